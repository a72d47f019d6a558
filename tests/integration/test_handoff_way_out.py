"""A way out of every handoff: one no try reached ends when its envelope expires; one a try
may have reached waits for the target's answer (only the target can tell), which ends it; a
cancel withdraws a handoff the target has not taken (and says so when it has); an agent
restarted with its route corrected delivers a handoff its old address never answered to
the new one, signed anew for it."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

from a2a_handoff.failpoints import PAUSE_FILE_VAR, PAUSE_VAR
from a2a_handoff.protocol.models import parse_time
from tests.integration.handoff_support import (
    REFUND,
    Agents,
    ext,
    make_agents,
    message,
    result,
    tasks_in,
    wait_for,
)
from tests.support import free_port


def status_text(task: dict[str, Any]) -> str:
    return str(((task["status"].get("message") or {}).get("parts") or [{}])[0].get("text", ""))


def source_of(agents: Agents, ctx: str) -> dict[str, Any]:
    [source] = tasks_in(agents.triage, ctx)
    return source


def ended(agents: Agents, ctx: str) -> dict[str, Any]:
    """The source task, once it ended."""

    def check() -> dict[str, Any] | None:
        source = source_of(agents, ctx)
        working = ("TASK_STATE_SUBMITTED", "TASK_STATE_WORKING")
        return source if source["status"]["state"] not in working else None

    found: dict[str, Any] = wait_for(check, timeout=30)
    return found


def sent(agents: Agents, ctx: str) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = result(agents.triage.rpc("ListHandoffs", {"contextId": ctx}))[
        "sent"
    ]
    return entries


def pause(agents: Agents, agent: str, point: str, tmp: Path) -> Path:
    marker = tmp / f"{agent}-{point}.paused"
    getattr(agents, agent).env = {PAUSE_VAR: point, PAUSE_FILE_VAR: str(marker)}
    return marker


def hand_off(agents: Agents) -> str:
    ctx = f"ctx-{uuid.uuid4()}"
    result(agents.triage.rpc("SendMessage", message(REFUND, ctx, returnImmediately=True)))
    return ctx


def test_a_handoff_no_try_reached_ends_when_its_envelope_expires(tmp_path: Path) -> None:
    agents = make_agents(tmp_path, "--ttl=2")
    agents.triage.start()  # billing never answers
    try:
        ctx = hand_off(agents)
        source = ended(agents, ctx)
        assert source["status"]["state"] == "TASK_STATE_FAILED"
        assert status_text(source).startswith(
            "handoff_expired: billing could not be reached before the handoff expired"
        )
        assert status_text(source).endswith("nothing was delivered")
        assert [e["status"] for e in sent(agents, ctx)] == ["failed"]
        agents.billing.start()
        assert tasks_in(agents.billing, ctx) == []  # nothing comes later either
    finally:
        agents.stop()


def test_a_handoff_a_try_may_have_reached_waits_past_expiry_for_the_targets_answer(
    tmp_path: Path,
) -> None:
    agents = make_agents(tmp_path, "--ttl=2")
    marker = pause(agents, "billing", "task.before_create", tmp_path)
    agents.billing.start()
    agents.triage.start()
    try:
        ctx = hand_off(agents)
        wait_for(marker.exists)  # the envelope reached billing, which dies before it commits
        agents.billing.kill()
        agents.billing.env = {}

        def says_it_may_have_taken_it() -> bool:
            return "it may have taken it" in status_text(source_of(agents, ctx))

        try:
            wait_for(says_it_may_have_taken_it, timeout=20)
        except AssertionError:
            print(
                "STATUS",
                source_of(agents, ctx)["status"],
                (tmp_path / "triage.log").read_text()[-3000:],
            )
            raise
        checkpointed = parse_time(sent(agents, ctx)[0]["createdAt"]).timestamp()
        wait_for(lambda: time.time() > checkpointed + 2.5, timeout=10)  # the 2 s TTL passed
        assert source_of(agents, ctx)["status"]["state"] == "TASK_STATE_WORKING"  # still waits
        agents.billing.start()  # it never took it: it refuses the expired envelope
        source = ended(agents, ctx)
        assert source["status"]["state"] == "TASK_STATE_FAILED"
        assert status_text(source).startswith("handoff_expired: the envelope expired")
        [refusal] = tasks_in(agents.billing, ctx)
        assert ext(refusal)["rejected"] == "envelope_expired"
    finally:
        agents.stop()


def test_a_cancel_withdraws_a_handoff_the_target_has_not_taken(tmp_path: Path) -> None:
    agents = make_agents(tmp_path)
    marker = pause(agents, "triage", "handoff.before_send", tmp_path)
    agents.billing.start()
    agents.triage.start()
    try:
        ctx = hand_off(agents)
        wait_for(marker.exists)  # triage read billing's card; its envelope is about to leave
        source = source_of(agents, ctx)
        canceled = result(agents.triage.rpc("CancelTask", {"id": source["id"]}))
        assert canceled["status"]["state"] == "TASK_STATE_CANCELED"
        assert status_text(canceled).startswith("Task canceled: its handoff to billing was")
        assert [(e["status"], e["detail"]) for e in sent(agents, ctx)] == [
            ("failed", {"reason": "withdrawn"})
        ]
        # Billing refused the key for good: the envelope, were it to arrive now, is not taken.
        [tombstone] = tasks_in(agents.billing, ctx)
        assert tombstone["status"]["state"] == "TASK_STATE_REJECTED"
        assert ext(tombstone)["rejected"] == "withdrawn"
    finally:
        agents.stop()


def test_a_cancel_after_the_target_took_the_handoff_is_refused_saying_where_it_went(
    tmp_path: Path,
) -> None:
    agents = make_agents(tmp_path)
    marker = pause(agents, "triage", "handoff.after_create", tmp_path)
    agents.billing.start()
    agents.triage.start()
    try:
        ctx = hand_off(agents)
        wait_for(marker.exists)  # billing took it; triage has not yet said so
        source = source_of(agents, ctx)
        refused = agents.triage.rpc("CancelTask", {"id": source["id"]})
        assert refused["error"]["code"] == -32002, refused
        [successor] = tasks_in(agents.billing, ctx)
        assert f"its task {successor['id']} there" in refused["error"]["message"]
        assert ext(source_of(agents, ctx))["state"] == "TRANSFERRED"
        assert ext(source_of(agents, ctx))["transfer"]["taskId"] == successor["id"]
    finally:
        agents.stop()


def test_a_cancel_of_a_handoff_to_an_address_that_never_answered_cancels_it(
    tmp_path: Path,
) -> None:
    agents = make_agents(tmp_path)
    wrong = f"http://127.0.0.1:{free_port()}/"  # a mistyped port: nothing listens there
    agents.triage.extra = tuple(
        f"--route=billing={wrong}" if a.startswith("--route=billing=") else a
        for a in agents.triage.extra
    )
    agents.triage.start()
    try:
        ctx = hand_off(agents)
        wait_for(lambda: "cannot reach billing" in status_text(source_of(agents, ctx)))
        canceled = result(agents.triage.rpc("CancelTask", {"id": source_of(agents, ctx)["id"]}))
        assert canceled["status"]["state"] == "TASK_STATE_CANCELED"
        assert [e["detail"]["reason"] for e in sent(agents, ctx)] == ["withdrawn"]
    finally:
        agents.stop()


def test_a_restart_with_the_route_corrected_delivers_it_to_the_new_address(
    tmp_path: Path,
) -> None:
    agents = make_agents(tmp_path)
    right = [a for a in agents.triage.extra if a.startswith("--route=billing=")]
    wrong = f"--route=billing=http://127.0.0.1:{free_port()}/"
    agents.triage.extra = tuple(wrong if a in right else a for a in agents.triage.extra)
    agents.billing.start()
    agents.triage.start()
    try:
        ctx = hand_off(agents)
        wait_for(lambda: "cannot reach billing" in status_text(source_of(agents, ctx)))
        agents.triage.stop()
        agents.triage.extra = tuple(right[0] if a == wrong else a for a in agents.triage.extra)
        agents.triage.start()
        source = ended(agents, ctx)
        assert ext(source)["state"] == "TRANSFERRED"
        [successor] = tasks_in(agents.billing, ctx)
        assert ext(source)["transfer"]["taskId"] == successor["id"]
        assert ext(source)["transfer"]["agentUrl"] == agents.billing.url
        old, new = sent(agents, ctx)
        assert old["status"] == "failed"
        assert (
            old["detail"]["reason"]
            == f"re-addressed: billing is now routed to {agents.billing.url}"
        )
        assert new["status"] == "done"
        assert new["target"]["url"] == agents.billing.url
    finally:
        agents.stop()
