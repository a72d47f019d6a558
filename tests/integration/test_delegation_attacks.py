"""Delegation under attack, API keys on: triage delegates alice's request to billing, whose
sub-task asks a question. Nobody but triage may read, answer or cancel billing's sub-task
(not mallory, not even alice: her task is triage's, the sub-task triage's own), and no
hand-made or altered `kind: delegation` envelope makes billing work: unsigned, signed by a
stranger's key, from an untrusted agent, a captured one with a new key or turned into a
handoff, or delivered with a user's key. (A route that is not configured — a made-up name
or URL — is refused before anything is sent: `GateRefused`, the sender's `target_url`.)"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from a2a_handoff.protocol.extension import HANDOFF_EXTENSION_URI as URI
from a2a_handoff.protocol.extension import SIGNATURE_KEY
from a2a_handoff.trust.keys import Identity
from tests.integration.delegation_support import MODULE
from tests.integration.handoff_support import ext, message, result
from tests.integration.trust_support import Listener, forged, send
from tests.support import AgentProcess, key_env
from tests.trust_support import sign_with

ALICE, MALLORY, TRIAGE = "alice-key", "mallory-key", "triage-at-billing"


def _keys(path: Path, **principals: str) -> Path:
    path.write_text("".join(f"{p}={k}\n" for p, k in principals.items()))
    return path


@pytest.fixture(scope="module")
def agents(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[AgentProcess, ...]]:
    tmp = tmp_path_factory.mktemp("delegation-attacks")
    triage = AgentProcess("triage", f"sqlite:///{tmp / 'triage.db'}", log_path=tmp / "t.log")
    billing = AgentProcess("billing", f"sqlite:///{tmp / 'billing.db'}", log_path=tmp / "b.log")
    triage.module = billing.module = MODULE
    users = {"alice": ALICE, "mallory": MALLORY}
    triage.extra = (
        f"--route=billing={billing.url}",
        f"--credential=billing={key_env(TRIAGE)}",
        f"--auth-keys={_keys(tmp / 'triage.auth', **users)}",
    )
    billing.extra = (
        f"--trust=triage={triage.url}",
        f"--work-log={tmp / 'work.log'}",
        f"--auth-keys={_keys(tmp / 'billing.auth', **users, triage=TRIAGE)}",
    )
    billing.start()
    triage.start()
    try:
        yield triage, billing, tmp / "work.log"
    finally:
        triage.stop()
        billing.stop()


def as_key(key: str) -> dict[str, str]:
    return {"X-API-Key": key}


@pytest.fixture(scope="module")
def asked(agents: tuple[Any, ...]) -> dict[str, Any]:
    """Alice's request, delegated; billing's sub-task asks which order (INPUT_REQUIRED)."""
    triage, billing, _ = agents
    sent = message("question about a refund", f"ctx-{uuid.uuid4()}")
    task = result(triage.rpc("SendMessage", sent, **as_key(ALICE)))["task"]
    assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", task
    [record] = ext(task)["delegations"].values()
    sub = result(billing.rpc("GetTask", {"id": record["taskId"]}, **as_key(TRIAGE)))
    assert sub["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", sub
    return {"task": task, "sub": sub, "metadata": sub["history"][0]["metadata"]}


def error_code(reply: dict[str, Any]) -> int:
    """The JSON-RPC error's code; 0 when the call was answered."""
    return int((reply.get("error") or {}).get("code", 0))


def test_only_the_delegating_agent_reads_answers_or_cancels_the_sub_task(
    agents: tuple[Any, ...], asked: dict[str, Any]
) -> None:
    triage, billing, work_log = agents
    task, sub = asked["task"], asked["sub"]
    assert error_code(triage.rpc("GetTask", {"id": task["id"]}, **as_key(MALLORY))) == -32001
    answer = message("9999", sub["contextId"])
    answer["message"]["taskId"] = sub["id"]
    for key in (MALLORY, ALICE):  # alice's task is at triage; this one is triage's
        assert error_code(billing.rpc("GetTask", {"id": sub["id"]}, **as_key(key))) == -32001, key
        assert error_code(billing.rpc("SendMessage", answer, **as_key(key))) == -32001, key
        assert error_code(billing.rpc("CancelTask", {"id": sub["id"]}, **as_key(key))) == -32001, (
            key
        )
        listed = result(billing.rpc("ListTasks", {"contextId": sub["contextId"]}, **as_key(key)))
        assert listed["tasks"] == []
    still = result(billing.rpc("GetTask", {"id": sub["id"]}, **as_key(TRIAGE)))
    assert still["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    # Alice answers her own task: triage answers billing, which goes on with her reply.
    reply = message("4242", task["contextId"])
    reply["message"]["taskId"] = task["id"]
    done = result(triage.rpc("SendMessage", reply, **as_key(ALICE)))["task"]
    assert done["status"]["state"] == "TASK_STATE_COMPLETED", done
    data = next(a for a in done["artifacts"] if a.get("name") == "delegated")["parts"][0]["data"]
    assert (data["state"], data["text"]) == ("COMPLETED", "refunded order 4242"), data
    worked = [line for line in work_log.read_text().splitlines() if sub["id"] in line]
    said = [line.rsplit(" key=", 1)[0].split(" ", 2)[2] for line in worked]
    assert said == ["question about a refund", "4242"]


def test_no_forged_altered_or_misdelivered_delegation_makes_billing_work(
    agents: tuple[Any, ...], asked: dict[str, Any]
) -> None:
    _, billing, work_log = agents
    metadata = asked["metadata"]
    genuine, signature = metadata[URI], metadata[SIGNATURE_KEY]
    assert genuine["kind"] == "delegation"
    before = work_log.read_text()
    stranger = Identity.generate("triage")
    made_up = forged(kind="delegation", target={"agent": "billing", "url": billing.url})
    eve = forged(
        kind="delegation", source={"agent": "eve", "url": "http://127.0.0.1:1/", "taskId": "t"}
    )
    attempts = {
        "envelope_unsigned": [({URI: made_up}, MALLORY)],
        "envelope_forged": [
            ({URI: made_up, SIGNATURE_KEY: sign_with(stranger.signing_key, made_up)}, TRIAGE),
            ({URI: {**genuine, "kind": "handoff"}, SIGNATURE_KEY: signature}, TRIAGE),
            ({URI: {**genuine, "idempotencyKey": "f" * 64}, SIGNATURE_KEY: signature}, TRIAGE),
        ],
        "untrusted_source": [
            (
                {URI: eve, SIGNATURE_KEY: sign_with(Identity.generate("eve").signing_key, eve)},
                MALLORY,
            ),
            (metadata, ALICE),  # a genuine copy, delivered with a user's key
        ],
    }
    for code, tries in attempts.items():
        for sent, key in tries:
            task = result(send(billing, sent, key))["task"]
            assert task["status"]["state"] == "TASK_STATE_REJECTED", (code, task)
            assert ext(task)["rejected"] == code, (code, task)
    anonymous = httpx.post(
        billing.url,
        json={"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {}}},
        timeout=5,
    )
    assert anonymous.status_code == 401
    again = result(send(billing, metadata, TRIAGE))["task"]  # triage's own replay
    assert again["id"] == asked["sub"]["id"]
    assert ext(again)["duplicate"] is True
    assert work_log.read_text() == before  # none of it reached billing's handler


def test_a_user_naming_a_url_or_a_made_up_route_makes_triage_call_nothing(
    agents: tuple[Any, ...],
) -> None:
    triage = agents[0]
    with Listener() as listener:
        for route in (listener.url, "evil", "ask_billing"):
            sent = message(f"route={route} refund 4242", f"ctx-{uuid.uuid4()}")
            task = result(triage.rpc("SendMessage", sent, **as_key(ALICE)))["task"]
            data = next(a for a in task["artifacts"] if a["name"] == "delegated")["parts"][0]
            assert data["data"]["state"] == "REJECTED", data
            assert data["data"]["sent"] is False
            assert "no route to agent" in data["data"]["text"]
        assert listener.requests == []
