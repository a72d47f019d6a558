"""Pins hold: a trusted agent's keys change only by its own signed rotation or an operator's
act, and no key outlives `--trust-max-age` because its agent's JWKS cannot be fetched.

Each test is an attack on billing, which trusts the human agent to approve refunds, that
succeeded before: the human agent's port taken over by an impostor, a retired key still
accepted while the human agent was down."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from a2a_handoff.escalation import Action, decision_claims
from a2a_handoff.protocol.extension import HANDOFF_EXTENSION_URI as URI
from a2a_handoff.protocol.extension import SIGNATURE_KEY
from a2a_handoff.trust.keys import Identity
from a2a_handoff.trust.signing import DECISION_TYP, sign_claims
from tests.integration.handoff_support import message, result, wait_for
from tests.integration.trust_support import AGENT_KEYS, USERS, Bank, bank, forged, send
from tests.support import ROOT, AgentProcess, Cli, key_env
from tests.trust_support import sign_with, stolen_identity

ALICE = USERS["alice"]
BIG = "I was charged twice, I want a refund of $750 for order 4242"


@pytest.fixture
def agents(tmp_path: Path) -> Iterator[Bank]:
    with bank(tmp_path) as running:
        yield running


def escalate(agents: Bank, tmp_path: Path) -> dict[str, Any]:
    """Alice's refund over the limit, escalated by billing: the operator's inbox item."""
    context = result(agents.triage.rpc("SendMessage", message(BIG), **{"X-API-Key": ALICE}))[
        "task"
    ]["contextId"]
    operator = Cli(tmp_path / "op.json")

    def waiting() -> list[dict[str, Any]]:
        _, items = operator.events(
            "--api-key", key_env("operator-key"), "inbox", "--agent", agents.human.url
        )
        return [i for i in items if i["contextId"] == context]

    return wait_for(waiting, timeout=20)[0]


def approve(agents: Bank, tmp_path: Path, item: dict[str, Any]) -> None:
    operator = ("--api-key", key_env("operator-key"))
    code, out = Cli(tmp_path / "op.json").run(
        *operator, "approve", item["taskId"], "--agent", agents.human.url
    )
    assert code == 0, out
    wait_for(lambda: paid(agents, item["contextId"]), timeout=20)


def paid(agents: Bank, context: str) -> list[float]:
    page = result(
        agents.billing.rpc(
            "ListTasks", {"contextId": context, "includeArtifacts": True}, **{"X-API-Key": ALICE}
        )
    )
    return [
        a["parts"][0]["data"]["amount"]
        for t in page["tasks"]
        for a in t.get("artifacts") or []
        if a.get("name") == "refund"
    ]


def forged_return(signer: Identity, agents: Bank, item: dict[str, Any]) -> dict[str, Any]:
    """What the human agent would send for `item`, approving $25,000 instead, signed by
    `signer`."""
    action = Action("refund", {"orderId": "4242"}, amount=25000.0)
    claims = decision_claims(
        {
            "verdict": "approved",
            "escalation": {"action": action.to_json(), "source": {"taskId": item["sourceTaskId"]}},
        },
        issuer="human",
        audience="billing",
        escalation_task=item["taskId"],
        decision_id=f"d-{time.time()}",
        ttl=900,
    )
    decision = {
        "verdict": "approved",
        "text": "ok",
        "by": "operator",
        "escalation": {"action": action.to_json()},
        "signed": sign_claims(claims, signer.signing_key, DECISION_TYP),
    }
    envelope = forged(
        contextId=item["contextId"],
        source={"agent": "human", "url": agents.human.url, "taskId": item["taskId"]},
        target={"agent": "billing", "url": agents.billing.url},
        kind="return",
        hop=3,
        visited=["triage", "billing", "human"],
        transferContext={
            "entities": {"orderId": "4242", "amount": 25000.0},
            "summary": "approved",
            "decision": decision,
        },
    )
    return {URI: envelope, SIGNATURE_KEY: sign_with(signer.signing_key, envelope)}


def test_an_impostor_on_a_trusted_agents_port_is_not_trusted(agents: Bank, tmp_path: Path) -> None:
    approve(agents, tmp_path, escalate(agents, tmp_path))  # billing pinned the human agent
    item = escalate(agents, tmp_path)
    agents.human.stop()
    # Someone else takes the human agent's port, with an identity of its own. Before:
    # billing fetched its keys within seconds (one WARNING line) and paid its forged return.
    store = f"sqlite:///{tmp_path / 'impostor'}.db"
    impostor = AgentProcess("human", store, port=agents.human.port, extra=agents.human.extra)
    impostor.start()
    try:
        stolen = stolen_identity(tmp_path / "impostor.db")
        reply = send(
            agents.billing, forged_return(stolen, agents, item), AGENT_KEYS[("human", "billing")]
        )
        task = result(reply)["task"]
        assert task["status"]["state"] == "TASK_STATE_REJECTED", task
        assert task["metadata"][URI]["rejected"] == "envelope_forged"
        assert 25000.0 not in paid(agents, item["contextId"])
        log = (tmp_path / "billing.log").read_text()
        assert "REFUSED human's keys" in log
        # The operator's act: forget the pin, and billing takes the new human's keys.
        pins = [sys.executable, "-m", "a2a_handoff", "trust"]
        store = f"sqlite:///{tmp_path / 'billing.db'}"
        listed = subprocess.run(
            [*pins, "list", "--store", store], cwd=ROOT, capture_output=True, text=True, timeout=60
        )
        assert listed.stdout.startswith("human  ")
        forgot = subprocess.run(
            [*pins, "forget", "human", "--store", store],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert forgot.returncode == 0, forgot.stderr
        genuine = forged_return(stolen, agents, item)  # now the agent billing was told of
        time.sleep(2.1)  # one refresh per min_refresh (2 s) for an unknown key id
        task = result(send(agents.billing, genuine, AGENT_KEYS[("human", "billing")]))["task"]
        assert task["status"]["state"] != "TASK_STATE_REJECTED", task
    finally:
        impostor.stop()


def test_a_retired_key_is_refused_within_max_age_even_while_its_jwks_is_down(
    agents: Bank, tmp_path: Path
) -> None:
    approve(agents, tmp_path, escalate(agents, tmp_path))  # billing pinned the human agent
    item = escalate(agents, tmp_path)
    old = stolen_identity(tmp_path / "human.db")  # the key an attacker took, then retired
    keys = [sys.executable, "-m", "a2a_handoff", "keys"]
    store = f"sqlite:///{tmp_path / 'human.db'}"
    subprocess.run([*keys, "rotate", "--store", store], cwd=ROOT, check=True, timeout=60)
    subprocess.run(
        [*keys, "retire", str(old.signing_key.kid), "--store", store],
        cwd=ROOT,
        check=True,
        timeout=60,
    )
    agents.human.stop()  # its JWKS cannot be fetched from now on
    time.sleep(1.5)  # past billing's --trust-max-age (1 s)
    reply = send(agents.billing, forged_return(old, agents, item), AGENT_KEYS[("human", "billing")])
    # Before: still accepted 25 s later, on the cached keys. Now: not verifiable now.
    assert reply.get("error", {}).get("code") == -32603, reply
    assert "cannot verify" in reply["error"]["message"]
    assert 25000.0 not in paid(agents, item["contextId"])
