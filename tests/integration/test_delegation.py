"""Delegation across services, end to end: triage asks billing for a sub-result and goes on.

Real processes (`tests.integration.delegating_agent`), shared by the module: triage (with the
example contracts), billing (trusts triage, logs every step of work it does) and a second
"billing" that trusts nobody. The crash tests kill triage at each failpoint of a delegation
(and billing mid-delegation) and restart it; each leaves the agents running as they found
them.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from a2a_handoff.delegated import MAX_OUTCOME_BYTES
from a2a_handoff.failpoints import ENV_VAR, EXIT_CODE
from tests.integration.delegation_support import (
    POINTS,
    Agents,
    ask,
    delegated,
    dies_at,
    make_agents,
    reply,
    settled,
)
from tests.integration.handoff_support import ext, message, result, tasks_in, wait_for


@pytest.fixture(scope="module")
def agents(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Agents]:
    found = make_agents(tmp_path_factory.mktemp("delegation"), stranger=True).start()
    yield found
    found.stop()


def test_delegation_returns_the_delegates_outcome(agents: Agents) -> None:
    ctx = str(uuid.uuid4())
    task = ask(agents.triage, "refund order 12345 please", ctx)
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    outcome = delegated(task)
    assert outcome["state"] == "COMPLETED"
    assert outcome["data"] == {"orderId": "12345", "status": "refunded"}
    assert outcome["text"] == "refunded order 12345"
    # triage kept its task (WORKING while it asked, never transferred) and recorded the answer
    said = [m["parts"][0].get("text", "") for m in task["history"] if m["role"] == "ROLE_AGENT"]
    assert any(s.startswith("Asking billing: refund order 12345") for s in said), said
    assert "transfer" not in ext(task)
    [record] = ext(task)["delegations"].values()
    assert record["agent"] == "billing"
    assert record["rounds"][0]["taskId"] == outcome["taskId"]
    [sub] = tasks_in(agents.billing, ctx)
    assert sub["id"] == outcome["taskId"]
    assert sub["status"]["state"] == "TASK_STATE_COMPLETED"
    assert ext(sub)["handoff"]["kind"] == "delegation"
    assert len(agents.work(ctx)) == 1


@pytest.mark.parametrize(
    ("text", "sent", "said"),
    [
        ("gate 12345", False, "capability gate refused the handoff: not offered by billing"),
        ("untrusted 12345", True, "untrusted_source: triage is not on billing's trust list"),
        ("offtopic 12345", False, "contract triage-to-billing refused the transfer context"),
    ],
    ids=["gate", "trust-list", "contract"],
)
def test_refused_delegation_says_why(agents: Agents, text: str, sent: bool, said: str) -> None:
    ctx = str(uuid.uuid4())
    task = ask(agents.triage, text, ctx)
    outcome = delegated(task)
    assert outcome["state"] == "REJECTED"
    assert outcome["sent"] is sent
    assert said in outcome["text"], outcome["text"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"  # the handler acted on it
    assert tasks_in(agents.billing, ctx) == []
    assert agents.stranger is not None
    assert tasks_in(agents.stranger, ctx) == []
    assert agents.work(ctx) == []


def test_a_delegation_without_an_answer_in_time_cancels_the_sub_task_and_says_how_far_it_got(
    agents: Agents,
) -> None:
    ctx = str(uuid.uuid4())
    task = ask(agents.triage, "hang briefly 999", ctx)  # billing works, then hangs
    outcome = delegated(task)
    assert outcome["state"] == "CANCELED"
    assert outcome["text"] == (
        f"no answer from billing within 0.5 s: its task {outcome['taskId']} was canceled"
        " after it recorded work (step work-1)"
    )
    [sub] = tasks_in(agents.billing, ctx)
    assert sub["id"] == outcome["taskId"]
    assert sub["status"]["state"] == "TASK_STATE_CANCELED"
    ctx = str(uuid.uuid4())
    task = ask(agents.triage, "stall briefly 998", ctx)  # billing waits before any work
    outcome = delegated(task)
    assert outcome["state"] == "CANCELED"
    assert outcome["text"].endswith("was canceled before it recorded any work")
    assert agents.work(ctx) == []


def test_a_delegation_out_of_time_adopts_the_outcome_the_delegate_reached(
    agents: Agents,
) -> None:
    """Billing dies after its work, triage's `within` runs out meanwhile; billing comes back
    before triage gave up canceling: its sub-task resumed and completed — the outcome is
    billing's, not "no answer"."""
    agents.billing.env = {ENV_VAR: "step.after_record"}
    agents.billing.restart()
    try:
        ctx = str(uuid.uuid4())
        asked = ask(agents.triage, "refund briefly 997", ctx, returnImmediately=True)
        assert agents.billing.proc is not None
        assert agents.billing.proc.wait(30) == EXIT_CODE

        def canceling() -> bool:  # triage's 0.5 s ran out while billing is down
            [task] = tasks_in(agents.triage, ctx)
            said = task["status"].get("message", {}).get("parts", [{}])[0].get("text", "")
            return str(said).startswith("No answer from billing within 0.5 s: canceling")

        wait_for(canceling, timeout=20)
    finally:
        agents.billing.env = {}
        agents.billing.start()
    task = settled(agents.triage, ctx)
    assert task["id"] == asked["id"]
    outcome = delegated(task)
    assert outcome["state"] == "COMPLETED", outcome
    assert outcome["data"] == {"orderId": "997", "status": "refunded"}
    assert len(agents.work(ctx)) == 1


def test_delegate_asks_for_input_and_the_user_answers(agents: Agents) -> None:
    ctx = str(uuid.uuid4())
    task = ask(agents.triage, "refund, a question first", ctx)
    assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert task["status"]["message"]["parts"][0]["text"] == (
        "billing asks: Which order is this about?"
    )
    [sub] = tasks_in(agents.billing, ctx)
    assert sub["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    reply = message("order 4242", ctx)
    reply["message"]["taskId"] = task["id"]
    task = result(agents.triage.rpc("SendMessage", reply))["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert delegated(task)["data"] == {"orderId": "order 4242", "status": "refunded"}
    [sub] = tasks_in(agents.billing, ctx)  # the same sub-task, answered
    assert sub["status"]["state"] == "TASK_STATE_COMPLETED"
    assert len(agents.work(ctx)) == 2  # the question, then the work


def test_cancel_cascades_to_the_sub_task(agents: Agents) -> None:
    # canceled while its handler waits on the delegate
    ctx = str(uuid.uuid4())
    task = ask(agents.triage, "hang on 777", ctx, returnImmediately=True)
    wait_for(lambda: agents.work(ctx))
    canceled = result(agents.triage.rpc("CancelTask", {"id": task["id"]}))
    assert canceled["status"]["state"] == "TASK_STATE_CANCELED"
    [sub] = tasks_in(agents.billing, ctx)
    assert sub["status"]["state"] == "TASK_STATE_CANCELED"
    # canceled while it waits for its own user, the delegate waiting for an answer
    ctx = str(uuid.uuid4())
    task = ask(agents.triage, "a question", ctx)
    assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    canceled = result(agents.triage.rpc("CancelTask", {"id": task["id"]}))
    assert canceled["status"]["state"] == "TASK_STATE_CANCELED"
    [sub] = tasks_in(agents.billing, ctx)
    assert sub["status"]["state"] == "TASK_STATE_CANCELED"


def test_stopping_the_delegator_leaves_its_delegation_to_resume(agents: Agents) -> None:
    """A graceful stop (SIGTERM) is no cancel: the sub-task goes on, and the restarted agent
    resumes waiting on it (the same sub-task, not a new one)."""
    ctx = str(uuid.uuid4())
    task = ask(agents.triage, "hang on 999", ctx, returnImmediately=True)
    wait_for(lambda: agents.work(ctx))
    agents.triage.stop()
    agents.triage.start()
    [sub] = tasks_in(agents.billing, ctx)
    assert sub["status"]["state"] == "TASK_STATE_WORKING"
    resumed = result(agents.triage.rpc("GetTask", {"id": task["id"]}))
    assert resumed["status"]["state"] == "TASK_STATE_WORKING"
    canceled = result(agents.triage.rpc("CancelTask", {"id": task["id"]}))
    assert canceled["status"]["state"] == "TASK_STATE_CANCELED"  # so its handler was running
    [sub] = tasks_in(agents.billing, ctx)
    assert sub["status"]["state"] == "TASK_STATE_CANCELED"
    assert len(agents.work(ctx)) == 1


@pytest.mark.timeout(60)
@pytest.mark.parametrize("point", POINTS)
def test_kill_delegator_at_each_point(agents: Agents, point: str) -> None:
    """kill -9 of triage at `point`: after the restart its handler runs again and ends with
    billing's outcome; billing worked once, on one task."""
    triage = agents.triage
    ctx = str(uuid.uuid4())
    with dies_at(triage, point):
        ask(triage, "refund order 31337", ctx, returnImmediately=True)
    task = settled(triage, ctx)
    assert task["status"]["state"] == "TASK_STATE_COMPLETED", task["status"]
    outcome = delegated(task)
    assert outcome["state"] == "COMPLETED"
    assert outcome["data"] == {"orderId": "31337", "status": "refunded"}
    [sub] = tasks_in(agents.billing, ctx)
    assert sub["id"] == outcome["taskId"]
    assert len(agents.work(ctx)) == 1


@pytest.mark.timeout(60)
def test_kill_delegator_after_recording_the_answer_to_a_question(agents: Agents) -> None:
    """The step that answers the delegate's question runs again after a restart: it is given
    the delegation as it was when the step began, answers it again, and gets the recorded
    outcome back — billing does not work a third time."""
    triage = agents.triage
    ctx = str(uuid.uuid4())
    task = ask(triage, "a question, then a crash", ctx)
    assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    reply = message("order 5150", ctx, returnImmediately=True)
    reply["message"]["taskId"] = task["id"]
    with dies_at(triage, "delegate.after_record"):
        triage.rpc("SendMessage", reply)
    task = settled(triage, ctx)
    assert task["status"]["state"] == "TASK_STATE_COMPLETED", task["status"]
    assert delegated(task)["data"] == {"orderId": "order 5150", "status": "refunded"}
    assert len(agents.work(ctx)) == 2  # the question, then the work: once each


@pytest.mark.timeout(60)
def test_kill_delegate_mid_delegation(agents: Agents) -> None:
    """kill -9 of billing while it works: its restart resumes the sub-task — the work it
    recorded is not done again — and triage's handler gets the sub-task's outcome."""
    ctx = str(uuid.uuid4())
    ask(agents.triage, "slowly refund 888", ctx, returnImmediately=True)
    wait_for(lambda: agents.work(ctx))
    agents.billing.restart()
    task = settled(agents.triage, ctx)
    outcome = delegated(task)
    assert outcome["state"] == "COMPLETED"
    assert outcome["data"] == {"orderId": "888", "status": "refunded"}
    assert len(agents.work(ctx)) == 1


@pytest.mark.parametrize(("said", "state"), [("never mind", "COMPLETED"), ("give up", "FAILED")])
def test_a_task_that_ends_cancels_the_sub_task_still_asking(
    agents: Agents, said: str, state: str
) -> None:
    """Triage's task ends without answering billing's question: nobody will, so the
    sub-task is canceled (not left asking for ever)."""
    ctx = str(uuid.uuid4())
    task = ask(agents.triage, "a question", ctx)
    assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    task = reply(agents.triage, task, said)
    assert task["status"]["state"] == f"TASK_STATE_{state}"

    def canceled() -> bool:
        [sub] = tasks_in(agents.billing, ctx)
        return bool(sub["status"]["state"] == "TASK_STATE_CANCELED")

    wait_for(canceled, timeout=5)


def test_a_cancel_while_the_request_is_in_flight_reaches_the_sub_task(agents: Agents) -> None:
    """Billing made the sub-task but has not answered yet when triage's task is canceled:
    once the answer comes, the cancel goes on to the sub-task."""
    ctx = str(uuid.uuid4())
    agents.hold_file.touch()
    done: list[dict[str, Any]] = []
    try:
        task = ask(agents.triage, "hang on 555", ctx, returnImmediately=True)
        wait_for(lambda: tasks_in(agents.billing, ctx))  # made, not answered: in flight
        cancel = threading.Thread(
            target=lambda: done.append(agents.triage.rpc("CancelTask", {"id": task["id"]}))
        )
        cancel.start()

        def waiting() -> bool:  # the cancel returned, or waits for the request to land
            if not cancel.is_alive():
                return True
            history = result(agents.triage.rpc("GetTask", {"id": task["id"]}))["history"]
            return any("Canceling" in (m["parts"][0].get("text") or "") for m in history)

        wait_for(waiting)
    finally:
        agents.hold_file.unlink()
    cancel.join(20)
    assert result(done[0])["status"]["state"] == "TASK_STATE_CANCELED"
    [sub] = tasks_in(agents.billing, ctx)
    assert sub["status"]["state"] == "TASK_STATE_CANCELED"


def test_the_delegates_artifacts_are_kept_within_a_bound(agents: Agents) -> None:
    """Billing publishes 100 000 bytes: triage keeps its outcome (state, text, the artifacts
    that fit) and names the artifact left out, rather than copying it into its task."""
    ctx = str(uuid.uuid4())
    task = ask(agents.triage, "bulky refund 12345", ctx)
    outcome = delegated(task)
    assert outcome["state"] == "COMPLETED"
    assert outcome["data"] == {"orderId": "12345", "status": "refunded"}  # this one fits
    [record] = ext(task)["delegations"].values()
    [kept] = record["rounds"][0]["artifacts"]
    assert kept["name"] == "refund"
    [left] = record["rounds"][0]["omitted"]
    assert left["name"] == "scan"
    assert left["bytes"] > MAX_OUTCOME_BYTES
    assert len(json.dumps(record)) < MAX_OUTCOME_BYTES
