"""Secure by default: the combinations that would let money move without an operator refuse to
start, or say so at start-up. Each test is an attack on the agents configured as the docs
show, which succeeded before the defaults changed."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sqlite3
import stat
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from a2a_handoff import AgentClient, HandoffError, Message, Part, Role, Task
from a2a_handoff.escalation import Action, decision_claims
from a2a_handoff.protocol.extension import HANDOFF_EXTENSION_URI as URI
from a2a_handoff.protocol.extension import SIGNATURE_KEY
from a2a_handoff.trust.keys import Identity
from a2a_handoff.trust.signing import DECISION_TYP, sign_claims
from tests.integration.handoff_support import REFUND, message, result, wait_for
from tests.integration.trust_support import (
    AGENT_KEYS,
    USERS,
    Bank,
    Listener,
    as_user,
    bank,
    forged,
    keys_file,
    send,
)
from tests.redis_support import RedisServer
from tests.support import ROOT, AgentProcess, Cli, free_port, key_env
from tests.trust_support import sign_with, stolen_identity

ALICE, MALLORY = USERS["alice"], USERS["mallory"]


@contextmanager
def running(agent: AgentProcess) -> Iterator[AgentProcess]:
    agent.start()
    try:
        yield agent
    finally:
        agent.stop()


def serve(*args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    """`python -m servers …` expected to refuse to start: its exit code and output."""
    return subprocess.run(
        [sys.executable, "-m", "servers", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_a_human_agent_under_auth_without_operators_refuses_to_start(tmp_path: Path) -> None:
    # Before: it started, and the user an escalation was about approved it with her own key.
    done = serve(
        "human",
        "--port",
        str(free_port()),
        "--store",
        f"sqlite:///{tmp_path / 'h.db'}",
        f"--auth-keys={keys_file(tmp_path, 'human', {})}",
    )
    assert done.returncode == 64, done.stderr
    assert "names no operators" in done.stderr
    assert "--operators" in done.stderr


@pytest.fixture(scope="module")
def agents(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bank]:
    with bank(tmp_path_factory.mktemp("secure")) as running:  # no fallback: nothing times out
        yield running


def escalated(agents: Bank, tmp_path: Path, key: str = ALICE) -> dict[str, Any]:
    """A refund over billing's limit, asked for by the user of `key`: its escalation, as the
    operator's inbox lists it."""
    big = "I was charged twice, I want a refund of $750 for order 4242"
    reply = agents.triage.rpc("SendMessage", message(big), **{"X-API-Key": key})
    context = result(reply)["task"]["contextId"]
    operator = Cli(tmp_path / "op.json")

    def waiting() -> list[dict[str, Any]]:
        code, items = operator.events(
            "--api-key", key_env("operator-key"), "inbox", "--agent", agents.human.url
        )
        assert code == 0
        return [i for i in items if i["contextId"] == context]

    return wait_for(waiting, timeout=20)[0]


def refunds(agents: Bank, context: str, key: str) -> list[dict[str, Any]]:
    page = result(
        agents.billing.rpc(
            "ListTasks", {"contextId": context, "includeArtifacts": True}, **{"X-API-Key": key}
        )
    )
    return [a for t in page["tasks"] for a in t.get("artifacts") or [] if a.get("name") == "refund"]


def test_the_operator_sees_whose_escalation_it_is(agents: Bank, tmp_path: Path) -> None:
    # triage hands alice's refund to billing, which escalates it: the human agent's task
    # names alice (signed by billing, the hop before it), never triage or billing.
    item = escalated(agents, tmp_path)
    assert (item["onBehalfOf"], item["source"]) == ("alice", "billing")
    task = result(agents.human.rpc("GetTask", {"id": item["taskId"]}, **as_user("operator-key")))
    received = task["metadata"][URI]["handoff"]
    assert (received["onBehalfOf"], received["signer"], received["hop"]) == ("alice", "billing", 2)
    code, out = Cli(tmp_path / "op.json").run(
        "--api-key", key_env("operator-key"), "inbox", "--agent", agents.human.url
    )
    assert code == 0, out
    assert f"{item['taskId']}  " in out
    assert "from billing for alice  [blocking" in out
    assert escalated(agents, tmp_path, MALLORY)["onBehalfOf"] == "mallory"


def test_only_operators_decide_an_escalation_a_user_adds_a_note(
    agents: Bank, tmp_path: Path
) -> None:
    item = escalated(agents, tmp_path)
    human = agents.human
    # The user the escalation is about sees it and answers "approve" with her own key: kept
    # as a note, never a decision; the escalation still waits, nothing is paid.
    code, out = Cli(tmp_path / "u.json").run(
        "--api-key", key_env(ALICE), "approve", item["taskId"], "--agent", human.url
    )
    assert code == 1, out
    assert "operators decide" in out
    assert "note" in out
    task = result(human.rpc("GetTask", {"id": item["taskId"]}, **{"X-API-Key": ALICE}))
    assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert task["history"][-1]["metadata"][URI] == {"note": {"by": "alice"}}
    # The agent that escalated (billing's own key at the human agent) cannot decide either:
    # the escalation is alice's there, billing reads it and adds nothing (not even a note).
    reply = human.rpc(
        "SendMessage",
        {
            "message": {
                "messageId": "billing-approves",
                "role": "ROLE_USER",
                "parts": [{"text": "approve"}],
                "taskId": item["taskId"],
                "metadata": {URI: {"decision": {"verdict": "approved"}}},
            }
        },
        **{"X-API-Key": AGENT_KEYS[("billing", "human")]},
    )
    assert reply["error"]["code"] == -32004, reply
    task = result(human.rpc("GetTask", {"id": item["taskId"]}, **{"X-API-Key": ALICE}))
    assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert task["history"][-1]["metadata"][URI] == {"note": {"by": "alice"}}
    time.sleep(1.0)  # a return, had one been sent, would have reached billing by now
    assert refunds(agents, item["contextId"], ALICE) == []
    # Another user does not even see it.
    code, items = Cli(tmp_path / "m.json").events(
        "--api-key", key_env(MALLORY), "inbox", "--agent", human.url
    )
    assert [i for i in items if i["contextId"] == item["contextId"]] == []
    # The operator decides: the refund is paid, once.
    code, out = Cli(tmp_path / "op.json").run(
        "--api-key", key_env("operator-key"), "approve", item["taskId"], "--agent", human.url
    )
    assert code == 0, out
    paid = wait_for(lambda: refunds(agents, item["contextId"], ALICE), timeout=20)
    assert len(paid) == 1


# -- an approval lands only where it was asked for ------------------------------------------

BIG_REFUND = {"name": "refund", "params": {"orderId": "9999"}, "amount": 25000.0}


def escalation_by(signer: Identity, source: str, human: str, **context: Any) -> dict[str, Any]:
    """A genuine escalation of `source` (signed with its own key) to the human agent at
    URL `human`."""
    action = Action(BIG_REFUND["name"], BIG_REFUND["params"], amount=BIG_REFUND["amount"])
    envelope = forged(
        source={"agent": source, "url": "http://127.0.0.1:1/", "taskId": f"t-{uuid.uuid4()}"},
        target={"agent": "human", "url": human},
        kind="escalation",
        onBehalfOf="alice",
        transferContext={
            "escalation": {
                "whatHappened": "The customer asks us to resend the tracking e-mail.",
                "whatWasTried": ["Looked the parcel up: it is on its way."],
                "whatIsNeeded": "permission to resend the tracking e-mail",
                "need": "permission",
                "trigger": "high_impact",
                "tier": "blocking",
                "action": action.to_json(),
            },
            "resume": {},
            **context,
        },
    )
    return {URI: envelope, SIGNATURE_KEY: sign_with(signer.signing_key, envelope)}


def test_an_approval_goes_back_only_to_the_agent_that_escalated(
    agents: Bank, tmp_path: Path
) -> None:
    # Triage (trusted by the human agent, not to approve) escalates with `returnTo: billing`
    # and free text about an e-mail; behind it, a $25,000 refund's fingerprint. Before: the
    # operator saw only the text, approved, and billing — which escalated nothing — paid.
    triage = stolen_identity(agents.tmp / "triage.db")
    forward = {"agent": "billing", "url": agents.billing.url, "taskId": "x"}
    metadata = escalation_by(triage, "triage", agents.human.url, returnTo=forward)
    context = metadata[URI]["contextId"]
    reply = send(agents.human, metadata, AGENT_KEYS[("triage", "human")])
    held = result(reply)["task"]
    assert held["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", held
    # The operator sees the action the decision binds, and who would act on it.
    operator = Cli(tmp_path / "op.json")
    code, items = operator.events(
        "--api-key", key_env("operator-key"), "inbox", "--agent", agents.human.url
    )
    item = next(i for i in items if i["contextId"] == context)
    assert item["action"]["name"] == "refund"
    assert item["action"]["amount"] == 25000.0
    assert item["action"]["params"] == {"orderId": "9999"}
    assert item["actingAgent"] == "triage"
    code, shown = operator.run(
        "--api-key", key_env("operator-key"), "inbox", "--agent", agents.human.url
    )
    assert "refund" in shown
    assert "25,000.00" in shown
    code, out = operator.run(
        "--api-key", key_env("operator-key"), "approve", item["taskId"], "--agent", agents.human.url
    )
    assert code == 0, out

    def ended() -> dict[str, Any] | None:
        task = result(
            agents.human.rpc("GetTask", {"id": item["taskId"]}, **{"X-API-Key": "operator-key"})
        )
        # Past the decision and past the handoff it starts ("Handing off to triage…").
        waiting = ("TASK_STATE_INPUT_REQUIRED", "TASK_STATE_WORKING", "TASK_STATE_SUBMITTED")
        return task if task["status"]["state"] not in waiting else None

    # The decision went back to triage, which escalated (and which refuses it: it escalated
    # nothing from that task) — never to billing, which pays nothing.
    done = wait_for(ended, timeout=20)
    said = done["status"]["message"]["parts"][0]["text"]
    assert said.startswith("triage rejected the handoff: decision_invalid"), said
    time.sleep(1.0)
    assert refunds(agents, context, ALICE) == []


def test_billing_takes_no_decision_for_an_escalation_it_never_made(agents: Bank) -> None:
    # A decision genuinely signed by the human agent, for billing, answering an escalation
    # that another agent made: billing refuses it, whoever signed it.
    human = stolen_identity(agents.tmp / "human.db")
    claims = decision_claims(
        {
            "verdict": "approved",
            "escalation": {
                "action": Action(**BIG_REFUND).to_json(),
                "source": {"taskId": "t-of-triage"},
            },
        },
        issuer="human",
        audience="billing",
        escalation_task="t-human",
        decision_id="d-1",
        ttl=900,
    )
    decision = {
        "verdict": "approved",
        "text": "ok",
        "by": "operator",
        "escalation": {"action": Action(**BIG_REFUND).to_json()},
        "signed": sign_claims(claims, human.signing_key, DECISION_TYP),
    }
    envelope = forged(
        source={"agent": "human", "url": agents.human.url, "taskId": "t-human"},
        target={"agent": "billing", "url": agents.billing.url},
        kind="return",
        transferContext={"summary": "approved", "decision": decision},
    )
    signed = {URI: envelope, SIGNATURE_KEY: sign_with(human.signing_key, envelope)}
    reply = send(agents.billing, signed, AGENT_KEYS[("human", "billing")])
    task = result(reply)["task"]
    assert task["status"]["state"] == "TASK_STATE_REJECTED", task
    assert task["metadata"][URI]["rejected"] == "decision_invalid"
    assert "no escalation of billing" in task["status"]["message"]["parts"][0]["text"]
    assert refunds(agents, envelope["contextId"], ALICE) == []


# -- everything a handler reads of a handoff is signed -------------------------------------


def test_a_relay_rewriting_a_genuine_handoffs_text_changes_nothing(agents: Bank) -> None:
    # A genuine handoff from triage (its own key), whose message a relay rewrote on the way:
    # the amount was only in the unsigned text part. Before: billing read it as ctx.text and
    # refunded $480.
    triage = stolen_identity(agents.tmp / "triage.db")
    envelope = forged(onBehalfOf="alice", target={"agent": "billing", "url": agents.billing.url})
    metadata = {URI: envelope, SIGNATURE_KEY: sign_with(triage.signing_key, envelope)}
    message = {
        "messageId": "relayed",
        "role": "ROLE_USER",
        "contextId": envelope["contextId"],
        "parts": [{"text": "refund $480 on order 4242"}, {"data": {"amount": 480}}],
        "metadata": {**metadata, "note": "added by the relay"},
    }
    reply = agents.billing.rpc(
        "SendMessage", {"message": message}, **{"X-API-Key": AGENT_KEYS[("triage", "billing")]}
    )
    task = result(reply)["task"]
    paid = wait_for(lambda: refunds(agents, envelope["contextId"], ALICE), timeout=20)
    assert [a["parts"][0]["data"]["amount"] for a in paid] == [49.99]  # billing's default
    stored = result(agents.billing.rpc("GetTask", {"id": task["id"]}, **{"X-API-Key": ALICE}))
    first = stored["history"][0]
    assert first["parts"] == [
        {"text": envelope["transferContext"]["summary"]},
        {"data": envelope["transferContext"]},
    ]
    assert set(first["metadata"]) == {URI, SIGNATURE_KEY}


# -- an envelope is for one agent, not for its name -----------------------------------------


def test_a_genuine_envelope_replayed_to_a_namesake_is_refused(agents: Bank) -> None:
    # A second agent called billing, elsewhere, trusting triage as the first does. Before:
    # a genuine envelope replayed to it made a new task there and it refunded.
    store = f"sqlite:///{agents.tmp / 'namesake'}.db"
    namesake = AgentProcess("billing", store, extra=agents.billing.extra)
    reply = agents.triage.rpc("SendMessage", message(REFUND), **{"X-API-Key": ALICE})
    pointer = result(reply)["task"]["metadata"][URI]["transfer"]
    first = result(agents.billing.rpc("GetTask", {"id": pointer["taskId"]}, **{"X-API-Key": ALICE}))
    genuine = first["history"][0]["metadata"]
    with running(namesake):
        task = result(send(namesake, genuine, AGENT_KEYS[("triage", "billing")]))["task"]
        assert task["status"]["state"] == "TASK_STATE_REJECTED", task
        assert task["metadata"][URI]["rejected"] == "misaddressed"
        assert agents.billing.url in task["status"]["message"]["parts"][0]["text"]
        page = result(
            namesake.rpc(
                "ListTasks",
                {"contextId": first["contextId"], "includeArtifacts": True},
                **{"X-API-Key": ALICE},
            )
        )
        assert [a for t in page["tasks"] for a in t.get("artifacts") or []] == []


# -- secrets never on a command line ------------------------------------------------------


def test_a_secret_on_the_command_line_is_refused_saying_how_to_pass_it(tmp_path: Path) -> None:
    # Before: `--credential human=KEY` and `--api-key KEY` were taken, and every local user
    # read them in `ps`.
    done = serve(
        "billing",
        "--port",
        str(free_port()),
        "--store",
        f"sqlite:///{tmp_path / 'b.db'}",
        "--route=human=http://127.0.0.1:9/",
        "--credential=human=billing-at-human",
    )
    assert done.returncode == 64, done.stderr
    assert "visible to every local user" in done.stderr
    assert "@FILE" in done.stderr
    assert "env:NAME" in done.stderr
    assert "billing-at-human" not in done.stderr
    code, out = Cli(tmp_path / "s.json").run(
        "--api-key", "alice-key", "inbox", "--agent", "http://127.0.0.1:9/"
    )
    assert code == 64, out
    assert "visible to every local user" in out
    secret = tmp_path / "alice.key"
    secret.write_text("alice-key\n")
    secret.chmod(0o600)
    code, out = Cli(tmp_path / "s.json").run(
        "--api-key", f"@{secret}", "inbox", "--agent", "http://127.0.0.1:9/"
    )
    assert code == 3, out  # read, and used: nothing listens there


# -- key custody ----------------------------------------------------------------------------


def as_nobody(*command: str) -> subprocess.CompletedProcess[str]:
    """`command` run as another local user (uid 65534), as an attacker on the same machine."""
    return subprocess.run(
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *command],
        capture_output=True,
        text=True,
        timeout=30,
    )


def test_a_stores_files_and_keys_are_private_to_the_agents_user(tmp_path: Path) -> None:
    # Before: the SQLite file with every conversation was 0644, and the owner file (with the
    # command line, credentials included) world-readable and left behind after exit.
    tmp_path.chmod(0o755)  # others may enter: only the files' own modes keep them out
    data = tmp_path / "data"
    agent = AgentProcess("triage", f"sqlite:///{data / 'triage.db'}").start()
    try:
        agent.rpc("SendMessage", message("hello"))
        files = {p.name: stat.S_IMODE(p.stat().st_mode) for p in data.iterdir()}
        assert stat.S_IMODE(data.stat().st_mode) == 0o700
        for name in ("triage.db", "triage.keys.json", "triage.db-owner"):
            assert files[name] == 0o600, (name, oct(files[name]))
        data.chmod(0o755)  # even where the directory is opened up, the files stay closed
        for name in ("triage.db", "triage.keys.json", "triage.db-owner"):
            done = as_nobody("cat", str(data / name))
            assert done.returncode != 0
            assert "Permission denied" in done.stderr
    finally:
        agent.stop()
    assert (data / "triage.db-owner").read_text() == ""  # nothing of the process left in it


@pytest.mark.parametrize(
    ("mode", "owner", "said"),
    [
        (0o644, None, "readable by other users"),
        (0o600, 65534, "belongs to uid 65534"),
    ],
)
def test_a_readable_or_planted_key_file_is_refused(
    tmp_path: Path, mode: int, owner: int | None, said: str
) -> None:
    # Before: a key file another user planted (or could read) signed without a word.
    keys = tmp_path / "triage.keys.json"
    keys.write_text(Identity.generate("triage").to_document())
    keys.chmod(mode)
    if owner is not None:
        os.chown(keys, owner, owner)
    done = serve(
        "triage",
        "--port",
        str(free_port()),
        "--store",
        f"sqlite:///{tmp_path / 'triage.db'}",
        f"--key-file={keys}",
    )
    assert done.returncode == 64, done.stderr
    assert said in done.stderr


def test_a_missing_key_file_never_becomes_a_new_identity(tmp_path: Path) -> None:
    # Before: an agent whose key file was gone made itself a new identity without a word.
    store = f"sqlite:///{tmp_path / 'triage.db'}"
    agent = AgentProcess("triage", store).start()
    old = httpx.get(agent.url + ".well-known/jwks.json").json()["keys"][0]["kid"]
    agent.stop()
    (tmp_path / "triage.keys.json").unlink()
    done = serve("triage", "--port", str(free_port()), "--store", store)
    assert done.returncode == 64, done.stderr
    assert "is missing" in done.stderr
    assert "keys init" in done.stderr
    made = subprocess.run(
        [
            sys.executable,
            "-m",
            "a2a_handoff",
            "keys",
            "init",
            "--store",
            store,
            "--agent",
            "triage",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert made.returncode == 0, made.stderr
    with running(agent):
        new = httpx.get(agent.url + ".well-known/jwks.json").json()["keys"][0]["kid"]
    assert new != old


def test_a_shared_store_keeps_no_private_keys(redis_server: RedisServer, tmp_path: Path) -> None:
    # Before: every agent's private key sat in Redis (no password), and another local user
    # read the human agent's and signed an approval with it.
    store = f"{redis_server.url()}?prefix=custody-{uuid.uuid4().hex[:8]}:"
    done = serve("human", "--port", str(free_port()), "--store", store)
    assert done.returncode == 64, done.stderr
    assert "keeps no signing keys" in done.stderr
    # Keys an older version kept in Redis: refused until moved out into a key file.
    legacy = Identity.generate("human")
    prefix = store.split("prefix=")[1]
    subprocess.run(
        [
            "redis-cli",
            "-p",
            str(redis_server.port),
            "set",
            f"{prefix}id:human",
            legacy.to_document(),
        ],
        check=True,
        capture_output=True,
    )
    keys = tmp_path / "human.keys.json"
    done = serve("human", "--port", str(free_port()), "--store", store, f"--key-file={keys}")
    assert done.returncode == 64, done.stderr
    assert "keys move" in done.stderr
    moved = subprocess.run(
        [
            sys.executable,
            "-m",
            "a2a_handoff",
            "keys",
            "move",
            "--store",
            store,
            "--agent",
            "human",
            "--key-file",
            str(keys),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert moved.returncode == 0, moved.stderr
    assert stat.S_IMODE(keys.stat().st_mode) == 0o600
    left = subprocess.run(
        ["redis-cli", "-p", str(redis_server.port), "exists", f"{prefix}id:human"],
        capture_output=True,
        text=True,
    )
    assert left.stdout.strip() == "0"
    human = AgentProcess("human", store, extra=(f"--key-file={keys}",))
    with running(human):
        kid = httpx.get(human.url + ".well-known/jwks.json").json()["keys"][0]["kid"]
    assert kid == legacy.signing_key.kid


# -- a key goes only to its own origin ----------------------------------------------------


def test_the_client_sends_a_key_only_to_the_origin_it_was_given_for(agents: Bank) -> None:
    # Before: AgentClient(api_key=…) presented the user's triage key to every URL it called,
    # so the agent a transfer pointer named received it (and could use it at triage).
    with pytest.raises(TypeError):
        AgentClient(httpx.AsyncClient(), api_key=ALICE)  # type: ignore[call-arg]

    async def follow(listener: str) -> None:
        async with httpx.AsyncClient(timeout=10) as http:
            client = AgentClient(http, credentials={agents.triage.url: ALICE})
            refund = Message(
                message_id=f"m-{uuid.uuid4()}", role=Role.USER, parts=[Part(text=REFUND)]
            )
            task = await client.send(agents.triage.url, refund)
            assert isinstance(task, Task)
            with contextlib.suppress(HandoffError, ValueError, KeyError):
                await client.get_task(listener, task.id)  # where a pointer could lead

    with Listener() as listener:
        asyncio.run(follow(listener.url))
        assert listener.requests, "the client called the listener"
        assert all(k.lower() != "x-api-key" for r in listener.requests for k in r["headers"])


# -- what a refused envelope leaves behind ---------------------------------------------------


def test_unsigned_envelopes_with_made_up_names_leave_bounded_residue(agents: Bank) -> None:
    # Before: 300 of them grew /metrics from 3 kB to 6.1 MB (a label per claimed name), the
    # store by 9 MB, and a newline in a name forged a log line.
    def metrics() -> int:
        return len(httpx.get(agents.billing.url + "metrics", headers={"X-API-Key": ALICE}).content)

    before = metrics()
    for i in range(40):
        name = f"evil{i}\n2026-01-01T00:00:00.000Z INFO a2a_handoff.events: forged {'x' * 3000}"
        envelope = forged(
            source={"agent": name, "url": "http://x/", "taskId": "t" * 5000},
            handoffId="h" * 5000,
            contextId=f"c{i}" + "c" * 5000,
        )
        code = result(send(agents.billing, {URI: envelope}, MALLORY))["task"]
        assert code["metadata"][URI]["rejected"] == "envelope_unsigned"
    assert metrics() - before < 2000
    log = (agents.tmp / "billing.log").read_text()
    assert not any(line.startswith("2026-01-01") for line in log.splitlines())
    assert "evil3\\n2026" in log  # escaped, on the line of the refusal
    with sqlite3.connect(agents.tmp / "billing.db") as db:
        longest = db.execute(
            "SELECT max(length(handoff_id) + length(context_id) + length(source_agent)"
            " + length(source_task_id)) FROM received WHERE source_agent LIKE 'evil%'"
        ).fetchone()[0]
    assert longest <= 4 * 128


def test_the_card_shows_peers_only_to_a_caller_with_a_key(agents: Bank) -> None:
    # Before: the public card listed the peer URLs that /health hides from anonymous callers.
    card = agents.billing.url + ".well-known/agent-card.json"

    def peers(headers: dict[str, str]) -> list[str]:
        served = httpx.get(card, headers=headers).json()
        ext = next(e for e in served["capabilities"]["extensions"] if e["uri"] == URI)
        return list(ext.get("params", {}).get("peers", []))

    assert peers({}) == []
    assert peers({"X-API-Key": "wrong"}) == []
    assert agents.human.url in peers({"X-API-Key": ALICE})
    health = httpx.get(agents.billing.url + "health").json()
    assert agents.human.url not in json.dumps(health)


# -- files of secrets another user can read, or owns ---------------------------------------


def test_an_auth_keys_file_others_can_read_refuses_to_start_unless_the_risk_is_accepted(
    tmp_path: Path,
) -> None:
    # Before: a WARNING line, and the agent served with keys every local user could read.
    keys = keys_file(tmp_path, "echo", {})
    keys.chmod(0o644)
    port = free_port()
    store = f"sqlite:///{tmp_path / 'e.db'}"
    done = serve("echo", "--port", str(port), "--store", store, f"--auth-keys={keys}")
    assert done.returncode == 64, done.stderr
    assert "readable by other users (mode 644)" in done.stderr
    assert "--allow-insecure-files" in done.stderr
    extra = (f"--auth-keys={keys}", "--allow-insecure-files")
    accepted = AgentProcess("echo", store, port, extra=extra)
    accepted.log_path = tmp_path / "echo.log"
    with running(accepted):
        assert "INSECURE: --auth-keys" in accepted.log_path.read_text()
    keys.chmod(0o600)
    with running(AgentProcess("echo", store, free_port(), extra=(f"--auth-keys={keys}",))):
        pass


def test_a_secret_file_others_can_read_is_refused_by_the_cli(tmp_path: Path) -> None:
    secret = tmp_path / "key"
    secret.write_text("k-alice\n")
    secret.chmod(0o640)
    code, out = Cli(tmp_path / "s.json").run(
        "--api-key", f"@{secret}", "inbox", "--agent", "http://127.0.0.1:9/"
    )
    assert code == 64, out
    assert "readable by other users (mode 640)" in out


def test_a_pins_file_others_can_change_is_not_read(tmp_path: Path) -> None:
    # Pins are the keys this agent trusts its peers by: a file another user can write could
    # pin an impostor's keys. Refused rather than read.
    key_file = tmp_path / "billing.keys.json"
    pins = tmp_path / "billing.pins.json"
    pins.write_text(json.dumps({"triage": []}))
    pins.chmod(0o666)
    command = [sys.executable, "-m", "a2a_handoff", "trust", "list", "--key-file", str(key_file)]
    listed = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=30)
    assert listed.returncode == 1, listed.stdout
    assert "the pinned keys" in listed.stderr
    assert "readable by other users" in listed.stderr
    pins.chmod(0o600)
    listed = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=30)
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.startswith("triage")


@pytest.mark.skipif(os.geteuid() != 0, reason="making a file another user owns needs root")
def test_a_pins_file_another_user_owns_is_not_read(tmp_path: Path) -> None:
    from a2a_handoff.errors import TrustError
    from a2a_handoff.trust.pins import PinFile

    pins = tmp_path / "billing.pins.json"
    pins.write_text(json.dumps({"triage": []}))
    os.chown(pins, 65534, 65534)  # nobody
    with pytest.raises(TrustError, match="belongs to uid 65534"):
        PinFile(pins).names()
