"""The three-phase handoff between real agent processes on 127.0.0.1."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from a2a_handoff.handoff.envelope import (
    HandoffEnvelope,
    SourceRef,
    TargetRef,
    derive_key,
    root_key_for,
)
from a2a_handoff.protocol.extension import HANDOFF_EXTENSION_URI as URI
from a2a_handoff.protocol.extension import WITHDRAW_KEY
from tests.integration.handoff_support import (
    REFUND,
    TESTS,
    Agents,
    ext,
    make_agents,
    message,
    result,
    running,
    tasks_in,
    wait_for,
)
from tests.support import A2A_HEADERS, AgentProcess, key_env
from tests.trust_support import Signer


@pytest.fixture(scope="module")
def agents(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Agents]:
    """One set of agents for the module: every test works in a context of its own."""
    with running(tmp_path_factory.mktemp("handoff")) as agents:
        yield agents


def settled_at(agent: AgentProcess, task_id: str) -> dict[str, Any]:
    """The task, once its handler's step is over (no longer SUBMITTED or WORKING)."""

    def check() -> dict[str, Any] | None:
        task: dict[str, Any] = result(agent.rpc("GetTask", {"id": task_id}))
        working = ("TASK_STATE_SUBMITTED", "TASK_STATE_WORKING")
        return task if task["status"]["state"] not in working else None

    found: dict[str, Any] = wait_for(check)
    return found


def test_refund_is_transferred_to_billing_with_the_transfer_context(agents: Agents) -> None:
    ctx = f"ctx-{uuid.uuid4()}"
    source = result(agents.triage.rpc("SendMessage", message(REFUND, ctx)))["task"]
    # A client without the extension sees a normal, closed task and the pointer.
    assert source["status"]["state"] == "TASK_STATE_COMPLETED"
    pointer = ext(source)["transfer"]
    assert ext(source)["state"] == "TRANSFERRED"
    assert pointer["agentName"] == "billing"
    assert pointer["agentUrl"] == agents.billing.url
    assert pointer["contextId"] == ctx
    assert "Transferred to billing" in source["status"]["message"]["parts"][0]["text"]
    # A client that activated the extension sees TRANSFERRED.
    seen = result(agents.triage.rpc("GetTask", {"id": source["id"]}, **{"A2A-Extensions": URI}))
    assert seen["status"]["state"] == "TASK_STATE_TRANSFERRED"
    # The successor exists, references the source and carries the transfer context; its
    # handler runs once it is committed, after billing answered triage.
    target = settled_at(agents.billing, pointer["taskId"])
    first = target["history"][0]
    assert first["referenceTaskIds"] == [source["id"]]
    envelope = HandoffEnvelope.model_validate(first["metadata"][URI])
    assert envelope.transfer_context["intent"] == "refund"
    assert envelope.transfer_context["entities"]["orderId"] == "12345"
    assert REFUND not in json.dumps(envelope.transfer_context)  # a summary, not the transcript
    assert envelope.source.task_id == source["id"]
    assert target["status"]["state"] == "TASK_STATE_COMPLETED"
    assert target["artifacts"][0]["parts"][0]["data"]["orderId"] == "12345"


def test_billing_asks_for_the_order_id_and_the_follow_up_completes(agents: Agents) -> None:
    source = result(agents.triage.rpc("SendMessage", message("I want a refund please")))["task"]
    assert "transfer" in ext(source), source
    pointer = ext(source)["transfer"]
    target = settled_at(agents.billing, pointer["taskId"])
    assert target["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    follow = message("it was order #777")
    follow["message"]["taskId"] = pointer["taskId"]
    done = result(agents.billing.rpc("SendMessage", follow))["task"]
    assert done["status"]["state"] == "TASK_STATE_COMPLETED"
    assert done["artifacts"][0]["parts"][0]["data"] == {
        "orderId": "777",
        "amount": 49.99,
        "status": "refunded",
    }


def test_shipping_goes_to_logistics_and_small_talk_stays(agents: Agents) -> None:
    shipped = result(agents.triage.rpc("SendMessage", message("where is my package, order 4242")))
    assert ext(shipped["task"])["transfer"]["agentName"] == "logistics"
    chat = result(agents.triage.rpc("SendMessage", message("hello there")))["task"]
    assert chat["status"]["state"] == "TASK_STATE_COMPLETED"
    assert "transfer" not in ext(chat)


def test_the_ledgers_list_the_handoff_on_both_sides(agents: Agents) -> None:
    ctx = f"ctx-{uuid.uuid4()}"
    source = result(agents.triage.rpc("SendMessage", message(REFUND, ctx)))["task"]
    handoff_id = ext(source)["transfer"]["handoffId"]
    ledger = result(agents.triage.rpc("ListHandoffs", {"contextId": ctx}))
    sent = ledger["sent"]
    assert [(e["handoffId"], e["status"]) for e in sent] == [(handoff_id, "done")]
    assert sent[0]["detail"]["taskId"] == ext(source)["transfer"]["taskId"]  # an object
    assert ledger["nextPageToken"] == ""
    received = wait_for(
        lambda: result(agents.billing.rpc("ListHandoffs", {"contextId": ctx}))["received"]
    )  # the receiving ledger is written right after the reply
    assert [(e["handoffId"], e["outcome"]) for e in received] == [(handoff_id, "accepted")]
    health = httpx.get(agents.triage.url + "health").json()
    assert health["lastCompletedHandoff"] is not None
    assert health["stalePendingHandoffs"] == 0


def test_gate_failure_fails_the_source_and_sends_nothing(tmp_path: Path) -> None:
    agents = make_agents(tmp_path, "--scope=shipping")
    for agent in agents.all():
        agent.start()
    try:
        ctx = f"ctx-{uuid.uuid4()}"
        source = result(agents.triage.rpc("SendMessage", message(REFUND, ctx)))["task"]
        assert source["status"]["state"] == "TASK_STATE_FAILED"
        reason = source["status"]["message"]["parts"][0]["text"]
        assert "refunds" in reason
        assert "scope" in reason
        assert tasks_in(agents.billing, ctx) == []
    finally:
        agents.stop()


def test_a_target_without_the_capability_is_refused_by_the_gate(tmp_path: Path) -> None:
    agents = make_agents(tmp_path)
    # Route "billing" to the logistics agent, which offers no refunds.
    agents.triage.extra = (f"--route=billing={agents.logistics.url}", "--recovery-interval=0.3")
    for agent in agents.all():
        agent.start()
    try:
        ctx = f"ctx-{uuid.uuid4()}"
        source = result(agents.triage.rpc("SendMessage", message(REFUND, ctx)))["task"]
        assert source["status"]["state"] == "TASK_STATE_FAILED"
        assert (
            "not offered by logistics: refunds" in source["status"]["message"]["parts"][0]["text"]
        )
        assert tasks_in(agents.logistics, ctx) == []
    finally:
        agents.stop()


# -- the receiving side, driven directly -------------------------------------------------


def envelope(**changes: Any) -> HandoffEnvelope:
    root = root_key_for("http://tests/", str(uuid.uuid4()))
    fields: dict[str, Any] = {
        "handoff_id": str(uuid.uuid4()),
        "idempotency_key": derive_key(root, 1),
        "root_key": root,
        "context_id": f"ctx-{uuid.uuid4()}",
        "source": SourceRef(agent="tests", url="http://tests/", task_id=str(uuid.uuid4())),
        "target": TargetRef(agent="billing", url="http://billing/"),
        "reason": "testing",
        "transfer_context": {"intent": "refund", "entities": {"orderId": "555"}},
        "required_capabilities": ["refunds"],
        "hop": 1,
        "visited": ["tests"],
        "trace_id": uuid.uuid4().hex,
        "created_at": datetime.now(UTC).isoformat().replace("+00:00", "Z"),
    }
    fields.update(changes)
    return HandoffEnvelope(**fields)


def deliver(agents: Agents, env: HandoffEnvelope, **extra: Any) -> dict[str, Any]:
    """The envelope (with `extra` members) signed by the tests' identity, sent to billing
    (at the address it names: billing's own, unless a test says otherwise)."""
    if env.target.url == "http://billing/":
        env = env.model_copy(
            update={"target": env.target.model_copy(update={"url": agents.billing.url})}
        )
    params = {
        "message": {
            "messageId": f"handoff-{env.idempotency_key}",
            "role": "ROLE_USER",
            "parts": [{"text": env.reason}],
            "contextId": env.context_id,
            "metadata": TESTS.metadata(env, **extra),
            "referenceTaskIds": [env.source.task_id],
        },
        "configuration": {"returnImmediately": True},
    }
    return agents.billing.rpc("SendMessage", params, **{"A2A-Extensions": URI})


def rejection(reply: dict[str, Any]) -> tuple[str, str]:
    task = result(reply)["task"]
    assert task["status"]["state"] == "TASK_STATE_REJECTED"
    return ext(task)["rejected"], task["status"]["message"]["parts"][0]["text"]


@pytest.mark.parametrize(
    ("changes", "code"),
    [
        (
            {"created_at": (datetime.now(UTC) - timedelta(hours=1)).isoformat(), "ttl_seconds": 60},
            "envelope_expired",
        ),
        ({"transfer_context": {"blob": "x" * 70_000}}, "envelope_too_large"),
        ({"target": TargetRef(agent="logistics", url="http://x/")}, "misaddressed"),
        ({"visited": ["tests", "billing"]}, "loop_detected"),
        ({"hop": 9}, "loop_detected"),
    ],
)
def test_bad_envelopes_are_rejected_with_a_reason(
    agents: Agents, changes: dict[str, Any], code: str
) -> None:
    env = envelope(**changes)
    got_code, text = rejection(deliver(agents, env))
    assert got_code == code
    assert text.startswith(code)
    # Refusals are idempotent too: a replay gives the same rejected task.
    again = result(deliver(agents, env))["task"]
    assert again["status"]["state"] == "TASK_STATE_REJECTED"
    assert ext(again)["duplicate"] is True


def test_a_replay_returns_the_same_task_marked_duplicate(agents: Agents) -> None:
    env = envelope()
    first = result(deliver(agents, env))["task"]
    assert "duplicate" not in ext(first)
    again = result(deliver(agents, env))["task"]
    assert again["id"] == first["id"]
    assert ext(again)["duplicate"] is True
    assert len(tasks_in(agents.billing, env.context_id)) == 1


def withdrawal(agents: Agents, env: HandoffEnvelope, signer: Signer) -> dict[str, Any]:
    """`env`, signed by `signer`, sent to billing marked withdrawn."""
    env = env.model_copy(update={"target": TargetRef(agent="billing", url=agents.billing.url)})
    params = {
        "message": {
            "messageId": f"handoff-{env.idempotency_key}",
            "role": "ROLE_USER",
            "parts": [{"text": env.reason}],
            "contextId": env.context_id,
            "metadata": {**signer.metadata(env), WITHDRAW_KEY: True},
        },
        "configuration": {"returnImmediately": True},
    }
    return agents.billing.rpc("SendMessage", params, **{"A2A-Extensions": URI})


def test_a_withdrawal_refuses_the_key_only_from_the_proven_sender(agents: Agents) -> None:
    env = envelope()
    # Signed by a key billing does not trust: refused unproven, the key left alone.
    forged, _ = rejection(withdrawal(agents, env, Signer()))
    assert forged == "envelope_forged"
    taken = result(deliver(agents, env))["task"]
    assert "rejected" not in ext(taken)  # the genuine handoff is still taken
    # The proven sender's withdrawal of a key taken already answers with the task it made.
    again = result(withdrawal(agents, env, TESTS))["task"]
    assert again["id"] == taken["id"]
    # Withdrawn before it was taken, the key is refused for good: a late try is not taken.
    late = envelope()
    code, _ = rejection(withdrawal(agents, late, TESTS))
    assert code == "withdrawn"
    code, _ = rejection(deliver(agents, late))
    assert code == "withdrawn"


def test_one_key_with_another_envelope_is_refused(agents: Agents) -> None:
    env = envelope()
    result(deliver(agents, env))
    other = env.model_copy(update={"reason": "something else"})
    reply = deliver(agents, other)
    assert reply["error"]["code"] == -32103
    assert "different envelope" in reply["error"]["message"]


def test_fifty_concurrent_creates_with_one_key_make_one_task(agents: Agents) -> None:
    import concurrent.futures

    env = envelope()
    with concurrent.futures.ThreadPoolExecutor(max_workers=50) as pool:
        replies = list(pool.map(lambda _: deliver(agents, env), range(50)))
    ids = {r["result"]["task"]["id"] for r in replies if "result" in r}
    processing = [r for r in replies if "error" in r]
    assert len(ids) == 1
    assert all(r["error"]["code"] == -32102 for r in processing)
    assert all("processing" in r["error"]["message"] for r in processing)
    assert len(tasks_in(agents.billing, env.context_id)) == 1
    replay = result(deliver(agents, env))["task"]
    assert replay["id"] in ids
    assert ext(replay)["duplicate"] is True


def test_an_invalid_envelope_is_invalid_params(agents: Agents) -> None:
    reply = deliver(agents, envelope(), hop=0)
    assert reply["error"]["code"] == -32602
    assert "hop" in reply["error"]["message"]


def test_the_official_client_sees_a_closed_task_with_the_pointer(agents: Agents) -> None:
    import asyncio

    from a2a.client import ClientConfig, ClientFactory
    from a2a.types.a2a_pb2 import GetTaskRequest, TaskState

    source = result(agents.triage.rpc("SendMessage", message(REFUND)))["task"]

    async def read() -> Any:
        async with httpx.AsyncClient(headers=A2A_HEADERS) as http:
            factory = ClientFactory(ClientConfig(httpx_client=http, streaming=False))
            client = await factory.create_from_url(agents.triage.url)
            try:
                return await client.get_task(GetTaskRequest(id=source["id"]))
            finally:
                await client.close()

    task = asyncio.run(read())
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    pointer = dict(task.metadata[URI]["transfer"])
    assert pointer["taskId"] == ext(source)["transfer"]["taskId"]


def test_with_auth_the_source_presents_its_key_and_the_user_reads_the_successor(
    tmp_path: Path,
) -> None:
    keys = tmp_path / "keys"
    keys.write_text("alice=k-alice\nbob=k-bob\ntriage=k-triage\n")
    agents = make_agents(tmp_path, f"--credential=billing={key_env('k-triage')}")
    for agent in (agents.billing, agents.triage):
        agent.extra = (*agent.extra, f"--auth-keys={keys}")
    agents.billing.start()
    agents.triage.start()
    try:
        ctx = f"ctx-{uuid.uuid4()}"
        alice = {"X-API-Key": "k-alice"}
        source = result(agents.triage.rpc("SendMessage", message(REFUND, ctx), **alice))["task"]
        pointer = ext(source)["transfer"]
        # Read through the pointer by the user who owns the source task …
        successor = result(agents.billing.rpc("GetTask", {"id": pointer["taskId"]}, **alice))
        assert successor["history"][0]["referenceTaskIds"] == [source["id"]]
        # … by the source agent's principal, which owns it …
        as_triage = {"X-API-Key": "k-triage"}
        assert result(agents.billing.rpc("GetTask", {"id": pointer["taskId"]}, **as_triage))
        listed = result(agents.billing.rpc("ListTasks", {"contextId": ctx}, **alice))
        assert [t["id"] for t in listed["tasks"]] == [pointer["taskId"]]
        # … and by nobody else.
        other = agents.billing.rpc("GetTask", {"id": pointer["taskId"]}, **{"X-API-Key": "k-bob"})
        assert other["error"]["code"] == -32001
        anonymous = httpx.post(
            agents.billing.url,
            json={"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "x"}},
            headers=A2A_HEADERS,
        )
        assert anonymous.status_code == 401
    finally:
        agents.stop()


def test_without_the_target_credential_the_handoff_fails_with_the_target_error(
    tmp_path: Path,
) -> None:
    keys = tmp_path / "keys"
    keys.write_text("alice=k-alice\n")
    agents = make_agents(tmp_path)
    agents.billing.extra = (*agents.billing.extra, f"--auth-keys={keys}")
    agents.billing.start()
    agents.triage.start()
    try:
        ctx = f"ctx-{uuid.uuid4()}"
        source = result(agents.triage.rpc("SendMessage", message(REFUND, ctx)))["task"]
        assert source["status"]["state"] == "TASK_STATE_FAILED"
        text = source["status"]["message"]["parts"][0]["text"]
        assert text.startswith("billing refused: Authentication required")
        assert "k-alice" not in json.dumps(source)
    finally:
        agents.stop()


def test_a_rejection_by_the_target_fails_the_source_with_the_reason(tmp_path: Path) -> None:
    agents = make_agents(tmp_path)
    agents.billing.extra = (*agents.billing.extra, "--max-hops=0")  # refuses every handoff
    agents.billing.start()
    agents.triage.start()
    try:
        ctx = f"ctx-{uuid.uuid4()}"
        source = result(agents.triage.rpc("SendMessage", message(REFUND, ctx)))["task"]
        assert source["status"]["state"] == "TASK_STATE_FAILED"
        text = source["status"]["message"]["parts"][0]["text"]
        assert text.startswith("billing rejected the handoff: loop_detected")
        sent = result(agents.triage.rpc("ListHandoffs", {"contextId": ctx}))["sent"]
        assert [e["status"] for e in sent] == ["failed"]
    finally:
        agents.stop()
