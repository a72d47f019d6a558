"""On whose behalf, with real agents and API keys on: relays a → b → c pass a user's task along
(handoffs) or ask for a sub-result (delegations), each signing its envelope.

What holds: the successor of a handoff is the user's there — she reads, lists, answers it;
nobody else does, and the agent that handed it over reads and follows it but neither answers
nor cancels it, nor sees any other of her tasks; every hop names the chain's user (never the
agent before it, nor an operator who answered the task, nor a name a handler or a message
puts elsewhere), recorded in the task's metadata for operators; a delegated sub-task names
its user too but stays the delegating agent's alone; and only a proven envelope names anyone.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from a2a_handoff.protocol.extension import HANDOFF_EXTENSION_URI as URI
from a2a_handoff.protocol.extension import SIGNATURE_KEY
from a2a_handoff.trust.keys import Identity
from tests.integration.handoff_support import ext, message, result, wait_for
from tests.integration.trust_support import forged, send
from tests.support import AgentProcess, key_env
from tests.trust_support import sign_with

ALICE, MALLORY, OP = "alice-key", "mallory-key", "operator-key"
A_AT_B, B_AT_C = "a-at-b", "b-at-c"
MODULE = "tests.integration.relay_agent"


def _keys(path: Path, **callers: str) -> Path:
    users = {"alice": ALICE, "mallory": MALLORY, "op": OP, **callers}
    path.write_text("".join(f"{p}={k}\n" for p, k in users.items()))
    return path


@pytest.fixture(scope="module")
def relays(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, AgentProcess]]:
    tmp = tmp_path_factory.mktemp("on-behalf")
    a, b, c = (
        AgentProcess(
            name, f"sqlite:///{tmp / name}.db", module=MODULE, log_path=tmp / f"{name}.log"
        )
        for name in "abc"
    )
    a.extra = (
        f"--route=b={b.url}",
        f"--credential=b={key_env(A_AT_B)}",
        f"--auth-keys={_keys(tmp / 'a.auth')}",
        "--operators=op",
    )
    b.extra = (
        f"--route=c={c.url}",
        f"--credential=c={key_env(B_AT_C)}",
        f"--trust=a={a.url}",
        f"--auth-keys={_keys(tmp / 'b.auth', a=A_AT_B)}",
        "--operators=op",
    )
    c.extra = (
        f"--trust=b={b.url}",
        f"--auth-keys={_keys(tmp / 'c.auth', b=B_AT_C)}",
        "--operators=op",
    )
    for agent in (c, b, a):
        agent.start()
    try:
        yield {"a": a, "b": b, "c": c}
    finally:
        for agent in (a, b, c):
            agent.stop()


def call(agent: AgentProcess, method: str, params: dict[str, Any], key: str) -> dict[str, Any]:
    return agent.rpc(method, params, **{"X-API-Key": key})


def code(reply: dict[str, Any]) -> int:
    """The JSON-RPC error's code; 0 when the call was answered."""
    return int((reply.get("error") or {}).get("code", 0))


def start(agent: AgentProcess, text: str, key: str) -> dict[str, Any]:
    """A new task at `agent`, in a context of its own, as the user of `key`."""
    sent = message(text, f"ctx-{uuid.uuid4()}")
    task: dict[str, Any] = result(call(agent, "SendMessage", sent, key))["task"]
    return task


def successor(agent: AgentProcess, task_id: str, key: str) -> str:
    """The task the task `task_id` at `agent` was handed to, once it was."""

    def pointer() -> str:
        task = result(call(agent, "GetTask", {"id": task_id}, key))
        return str((ext(task).get("transfer") or {}).get("taskId") or "")

    found: str = wait_for(pointer)
    return found


def follow_up(task: dict[str, Any], text: str) -> dict[str, Any]:
    sent = message(text, task["contextId"])
    sent["message"]["taskId"] = task["id"]
    return sent


def listed(agent: AgentProcess, key: str, context_id: str) -> set[str]:
    page = result(call(agent, "ListTasks", {"contextId": context_id}, key))
    return {task["id"] for task in page["tasks"]}


def handed_along(relays: dict[str, AgentProcess]) -> dict[str, dict[str, Any]]:
    """Alice's task handed a → b → c, where it waits for her answer: the task at each."""
    a, b, c = relays["a"], relays["b"], relays["c"]
    sent = message("handoff b c", f"ctx-{uuid.uuid4()}")
    sent["message"]["metadata"] = {"onBehalfOf": "mallory"}  # her message names another user
    first = result(call(a, "SendMessage", sent, ALICE))["task"]
    at_b = successor(a, first["id"], ALICE)
    at_c = successor(b, at_b, ALICE)
    waiting = wait_for(
        lambda: (
            (task := result(call(c, "GetTask", {"id": at_c}, ALICE)))["status"]["state"]
            == "TASK_STATE_INPUT_REQUIRED"
            and task
        )
    )
    middle = result(call(b, "GetTask", {"id": at_b}, ALICE))
    return {"a": first, "b": middle, "c": waiting}


@pytest.fixture(scope="module")
def chain(relays: dict[str, AgentProcess]) -> dict[str, dict[str, Any]]:
    """One such chain, read (never answered) by the tests that take it."""
    return handed_along(relays)


def test_every_hop_names_the_chains_user_signed_by_the_hop_before(
    relays: dict[str, AgentProcess], chain: dict[str, dict[str, Any]]
) -> None:
    for hop, sender in (("b", "a"), ("c", "b")):
        # What an operator reads: whose task it is, and which trusted agent said so.
        seen = result(call(relays[hop], "GetTask", {"id": chain[hop]["id"]}, OP))
        received = ext(seen)["handoff"]
        assert received["onBehalfOf"] == "alice", received
        assert (received["signer"], received["source"]["agent"]) == (sender, sender)
    assert ext(chain["c"])["handoff"]["hop"] == 2
    # Every hop's handler named mallory in what it passed along, and the user's message did:
    # only the envelope's name counts.
    signed = chain["c"]["history"][0]["metadata"][URI]
    assert (signed["onBehalfOf"], signed["transferContext"]["onBehalfOf"]) == ("alice", "mallory")


def test_a_user_is_named_only_by_a_proven_envelope(
    relays: dict[str, AgentProcess], chain: dict[str, dict[str, Any]]
) -> None:
    c = relays["c"]
    metadata = chain["c"]["history"][0]["metadata"]
    genuine, signature = metadata[URI], metadata[SIGNATURE_KEY]
    # b's genuine envelope for alice, made to name mallory (a fresh key: no replay).
    swapped = {**genuine, "onBehalfOf": "mallory", "idempotencyKey": "e" * 64}
    made_up = forged(
        source={"agent": "b", "url": relays["b"].url, "taskId": str(uuid.uuid4())},
        target={"agent": "c", "url": c.url},
        contextId=genuine["contextId"],
        onBehalfOf="mallory",
    )
    impostor = sign_with(Identity.generate("b").signing_key, made_up)
    for rejected, sent, key in (
        ("envelope_forged", {URI: swapped, SIGNATURE_KEY: signature}, B_AT_C),
        ("envelope_unsigned", {URI: made_up}, MALLORY),
        ("envelope_forged", {URI: made_up, SIGNATURE_KEY: impostor}, B_AT_C),
        ("untrusted_source", metadata, MALLORY),  # alice's genuine one, delivered by mallory
    ):
        task = result(send(c, sent, key))["task"]
        assert task["status"]["state"] == "TASK_STATE_REJECTED", (rejected, task)
        assert ext(task)["rejected"] == rejected, (rejected, task)
        assert code(call(c, "GetTask", {"id": task["id"]}, MALLORY)) == -32001
    # Nothing of it reached mallory's list; alice's conversation there is hers alone.
    assert listed(c, MALLORY, genuine["contextId"]) == set()
    assert listed(c, ALICE, genuine["contextId"]) == {chain["c"]["id"]}


def test_the_successor_is_the_users_there_and_nobody_elses(
    relays: dict[str, AgentProcess], chain: dict[str, dict[str, Any]]
) -> None:
    c, task = relays["c"], chain["c"]
    assert task["id"] in listed(c, ALICE, task["contextId"])
    for tried in (
        call(c, "GetTask", {"id": task["id"]}, MALLORY),
        call(c, "SendMessage", follow_up(task, "it is mallory"), MALLORY),
        call(c, "CancelTask", {"id": task["id"]}, MALLORY),
    ):
        assert code(tried) == -32001, tried
    assert listed(c, MALLORY, task["contextId"]) == set()


def test_the_sender_reads_the_successor_but_never_speaks_for_the_user(
    relays: dict[str, AgentProcess], chain: dict[str, dict[str, Any]]
) -> None:
    c, task = relays["c"], chain["c"]
    # b follows its pointer: it reads the task it handed over, and lists it.
    read = result(call(c, "GetTask", {"id": task["id"]}, B_AT_C))
    assert read["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert listed(c, B_AT_C, task["contextId"]) == {task["id"]}
    # It neither answers for alice nor ends her conversation.
    for tried in (
        call(c, "SendMessage", follow_up(task, "it is b, as alice"), B_AT_C),
        call(c, "CancelTask", {"id": task["id"]}, B_AT_C),
    ):
        assert code(tried) == -32004, tried
        assert "alice" in tried["error"]["message"]
    after = result(call(c, "GetTask", {"id": task["id"]}, ALICE))
    assert after["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert len(after["history"]) == len(task["history"])


def test_neither_side_gains_the_others_tasks(relays: dict[str, AgentProcess]) -> None:
    b, c = relays["b"], relays["c"]
    # Alice's own task at c, and a task b hands to c for mallory, in one context each.
    own = start(c, "handoff", ALICE)
    assert own["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", own
    mallorys = successor(b, start(b, "handoff c", MALLORY)["id"], MALLORY)
    theirs = wait_for(lambda: result(call(c, "GetTask", {"id": mallorys}, MALLORY)))
    # b, which hands alice's tasks over, sees none of hers it did not hand over.
    assert code(call(c, "GetTask", {"id": own["id"]}, B_AT_C)) == -32001
    assert listed(c, B_AT_C, own["contextId"]) == set()
    # Alice, whose tasks b hands over, sees nothing else b handed over.
    assert code(call(c, "GetTask", {"id": theirs["id"]}, ALICE)) == -32001
    assert listed(c, ALICE, theirs["contextId"]) == set()
    assert listed(c, B_AT_C, theirs["contextId"]) == {theirs["id"]}
    assert ext(theirs)["handoff"]["onBehalfOf"] == "mallory"


def test_the_user_answers_the_successor(relays: dict[str, AgentProcess]) -> None:
    c, task = relays["c"], handed_along(relays)["c"]
    done = result(call(c, "SendMessage", follow_up(task, "alice here"), ALICE))["task"]
    assert done["status"]["state"] == "TASK_STATE_COMPLETED", done
    assert done["status"]["message"]["parts"][0]["text"] == "answered: alice here"


def test_a_delegated_sub_task_names_its_user_and_stays_the_delegating_agents(
    relays: dict[str, AgentProcess],
) -> None:
    a, b, c = relays["a"], relays["b"], relays["c"]
    # a delegates to b, whose sub-task delegates to c: c asks, b and a complete with it.
    task = start(a, "ask b c", ALICE)
    assert task["status"]["state"] == "TASK_STATE_COMPLETED", task
    assert "INPUT_REQUIRED: Who?" in task["status"]["message"]["parts"][0]["text"]
    [at_b] = [d["taskId"] for d in ext(task)["delegations"].values()]
    sub = result(call(b, "GetTask", {"id": at_b}, A_AT_B))
    [at_c] = [d["taskId"] for d in ext(sub)["delegations"].values()]
    for agent, sub_id, delegator in ((b, at_b, A_AT_B), (c, at_c, B_AT_C)):
        seen = result(call(agent, "GetTask", {"id": sub_id}, OP))
        # Whose work it is, for operators: alice's at every hop (not the agent that asked).
        assert ext(seen)["handoff"]["onBehalfOf"] == "alice", ext(seen)
        assert ext(seen)["handoff"]["kind"] == "delegation"
        assert code(call(agent, "GetTask", {"id": sub_id}, delegator)) == 0
        # Not shared with her: she reads the outcome in her own task at a.
        assert code(call(agent, "GetTask", {"id": sub_id}, ALICE)) == -32001
        assert listed(agent, ALICE, seen["contextId"]) == set()


def test_whoever_answers_a_users_task_she_stays_its_user(relays: dict[str, AgentProcess]) -> None:
    b, c = relays["b"], relays["c"]
    # Alice's own task at b waits; an operator answers it, and b hands it on to c.
    own = start(b, "handoff", ALICE)
    assert own["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", own
    answered = result(call(b, "SendMessage", follow_up(own, "handoff c"), OP))["task"]
    at_c = successor(b, answered["id"], ALICE)
    handed = wait_for(lambda: result(call(c, "GetTask", {"id": at_c}, ALICE)))
    assert ext(handed)["handoff"]["onBehalfOf"] == "alice"  # not the operator's
    assert code(call(c, "GetTask", {"id": at_c}, OP)) == 0  # c's operator: every task
