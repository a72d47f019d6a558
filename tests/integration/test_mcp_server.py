"""Every agent an MCP server too: the official MCP client (streamable HTTP) calls each tool of
real agents started with `--mcp-server` — a skill that asks for input and a reply, retries
with the same key, `get_task`, `health_check`, and `resume_from_handoff` with a replayed
and a forged envelope; a task waiting for a human operator answers a normal result saying so,
and `get_task` follows it to the decision; under API keys, `/mcp` takes the same keys and
ownership rules.
An agent without the option serves no `/mcp` and never imports the `mcp` package."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import Client
from mcp_types import CallToolResult

from a2a_handoff.protocol.extension import SIGNATURE_KEY
from tests.integration.handoff_support import REFUND, ext, message, result
from tests.integration.mcp_support import mcp_client, structured
from tests.integration.trust_support import USERS, Bank, forged, make_bank
from tests.support import ROOT, AgentProcess, Cli, wire_trust

pytestmark = pytest.mark.anyio
ALICE, MALLORY = USERS["alice"], USERS["mallory"]


async def resume(client: Client, args: dict[str, Any]) -> CallToolResult:
    """`resume_from_handoff`, retried as a sending agent does while the receiver answers
    -32603 (it fetched the sender's keys a moment ago and fetches them again shortly)."""
    for _ in range(20):
        answer = await client.call_tool("resume_from_handoff", args)
        error = (answer.structured_content or {}).get("error") or {}
        if error.get("code") != -32603:
            return answer
        await anyio.sleep(0.5)
    return answer


@pytest.fixture
def billing(tmp_path: Path) -> Iterator[AgentProcess]:
    agent = AgentProcess("billing", f"sqlite:///{tmp_path / 'billing.db'}", extra=["--mcp-server"])
    agent.log_path = tmp_path / "billing.log"
    agent.start()
    try:
        yield agent
    finally:
        agent.stop()


@pytest.fixture(scope="module")
def bank(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bank]:
    bank = make_bank(tmp_path_factory.mktemp("mcp-auth"))
    bank.billing.extra = (*bank.billing.extra, "--mcp-server")
    bank.start()
    try:
        yield bank
    finally:
        bank.stop()


async def test_a_skill_asks_for_input_and_reply_finishes_it_retries_return_the_same_task(
    billing: AgentProcess,
) -> None:
    async with mcp_client(billing.url + "mcp") as client:
        names = [t.name for t in (await client.list_tools()).tools]
        assert names == [
            "refund",
            "invoice",
            "reply",
            "get_task",
            "health_check",
            "resume_from_handoff",
        ]
        asked = await client.call_tool("refund", {"text": "a refund", "idempotencyKey": "k1"})
        first = structured(asked)
        assert first["state"] == "input-required"
        assert not asked.is_error
        assert "Which order" in asked.content[0].text
        assert first["taskId"] in asked.content[0].text
        again = await client.call_tool("refund", {"text": "a refund", "idempotencyKey": "k1"})
        assert structured(again)["taskId"] == first["taskId"]  # the retry made no new task
        other = await client.call_tool("refund", {"text": "a refund", "idempotencyKey": "k2"})
        assert structured(other)["taskId"] != first["taskId"]

        args = {"taskId": first["taskId"], "text": "order 12345", "idempotencyKey": "r1"}
        done = await client.call_tool("reply", args)
        assert structured(done)["state"] == "completed", done
        assert structured(done)["artifacts"][0]["parts"][0]["data"]["orderId"] == "12345"
        assert "Refund of $49.99" in done.content[0].text
        retried = await client.call_tool("reply", args)  # the answer lost: asked again
        assert structured(retried)["state"] == "completed"
        assert not retried.is_error
        history = result(billing.rpc("GetTask", {"id": first["taskId"]}))["history"]
        assert sum(m["role"] == "ROLE_USER" for m in history) == 2  # one reply, not two

        got = structured(await client.call_tool("get_task", {"taskId": first["taskId"]}))
        assert got["state"] == "completed"
        assert got["contextId"] == first["contextId"]
        missing = await client.call_tool("get_task", {"taskId": "no-such-task"})
        assert missing.is_error
        assert structured(missing)["error"]["code"] == -32001

        health = structured(await client.call_tool("health_check", {}))
        assert health["status"] == "healthy"
        assert health["store"] == "ok"
        assert health["stalePendingHandoffs"] == 0
        assert "lastCompletedHandoff" in health

        bad = await client.call_tool("refund", {})
        assert bad.is_error
        assert "text" in bad.content[0].text


@pytest.fixture
def desk(tmp_path: Path) -> Iterator[tuple[AgentProcess, AgentProcess]]:
    """Billing routed to a human agent, both with their MCP face."""
    fast = ("--recovery-interval", "0.3", "--mcp-server")
    human = AgentProcess("human", f"sqlite:///{tmp_path / 'human.db'}", extra=fast)
    billing = AgentProcess(
        "billing",
        f"sqlite:///{tmp_path / 'billing.db'}",
        extra=(f"--route=human={human.url}", *fast),
    )
    wire_trust([human, billing])
    for agent in (human, billing):
        agent.log_path = tmp_path / f"{agent.name}.log"
        agent.start()
    try:
        yield billing, human
    finally:
        billing.stop()
        human.stop()


async def test_a_task_waiting_for_an_operator_says_so_and_get_task_follows_it(
    desk: tuple[AgentProcess, AgentProcess], tmp_path: Path
) -> None:
    billing, human = desk
    async with mcp_client(billing.url + "mcp") as at_billing:
        sent = await at_billing.call_tool("refund", {"text": "a refund of $750 for order 4242"})
        handed = structured(sent)
        assert not sent.is_error, sent
        assert handed["state"] == "transferred"
        assert handed["transfer"]["agentName"] == "human"
        assert "a human operator" in sent.content[0].text
    waiting_id = handed["transfer"]["taskId"]
    async with mcp_client(human.url + "mcp") as at_human:

        async def waiting() -> CallToolResult:
            for _ in range(100):  # the handoff is delivered by billing's outbox, soon
                got = await at_human.call_tool("get_task", {"taskId": waiting_id})
                if not got.is_error:
                    return got
                await anyio.sleep(0.1)
            return got

        pending = await waiting()
        shown = structured(pending)
        assert not pending.is_error, pending
        assert shown["state"] == "input-required"
        assert shown["awaitingOperator"] is True
        assert shown["waitingFor"] == "permission to refund $750.00 on order 4242"
        said = pending.content[0].text
        assert "waits for a human operator" in said
        assert "reply tool" not in said  # the operator answers it, not the host
        assert "get_task" in said

        code, out = Cli(tmp_path / "op.json").run("approve", waiting_id, "--agent", human.url)
        assert code == 0, out
        decided = structured(await at_human.call_tool("get_task", {"taskId": waiting_id}))
        assert decided["awaitingOperator"] is False
        assert decided["state"] == "transferred"
        back = decided["transfer"]
    async with mcp_client(billing.url + "mcp") as at_billing:
        for _ in range(100):  # billing finishes the refund it got back
            done = structured(await at_billing.call_tool("get_task", {"taskId": back["taskId"]}))
            if done["state"] == "completed":
                break
            await anyio.sleep(0.1)
        assert done["state"] == "completed", done
        assert done["artifacts"][0]["parts"][0]["data"]["status"] == "refunded"


async def test_mcp_takes_the_same_keys_and_ownership_rules(bank: Bank) -> None:
    url = bank.billing.url + "mcp"
    async with httpx.AsyncClient() as http:
        refused = await http.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        assert refused.status_code == 401
        wrong = await http.post(url, json={}, headers={"X-API-Key": "no-such-key"})
        assert wrong.status_code == 401
        from_a_page = await http.post(
            url, json={}, headers={"X-API-Key": ALICE, "Origin": "https://evil.example"}
        )
        assert from_a_page.status_code == 403
    async with mcp_client(url, ALICE) as alice:
        mine = structured(await alice.call_tool("refund", {"text": "refund please"}))
        assert mine["state"] == "input-required"
    async with mcp_client(url, MALLORY) as mallory:
        seen = await mallory.call_tool("get_task", {"taskId": mine["taskId"]})
        assert seen.is_error
        assert structured(seen)["error"]["code"] == -32001
        answered = await mallory.call_tool("reply", {"taskId": mine["taskId"], "text": "1"})
        assert answered.is_error
        assert structured(answered)["error"]["code"] == -32001


@pytest.fixture(scope="module")
def genuine(bank: Bank) -> dict[str, Any]:
    """A real triage → billing handoff over A2A, and the envelope billing received."""
    source = result(bank.triage.rpc("SendMessage", message(REFUND), **{"X-API-Key": ALICE}))
    pointer = ext(source["task"])["transfer"]
    task = result(
        bank.billing.rpc("GetTask", {"id": pointer["taskId"]}, **{"X-API-Key": "triage-at-billing"})
    )
    return {"task": task, "metadata": task["history"][0]["metadata"]}


async def test_resume_from_handoff_returns_the_same_task_for_a_replayed_envelope(
    bank: Bank, genuine: dict[str, Any]
) -> None:
    from a2a_handoff.protocol.extension import HANDOFF_EXTENSION_URI as URI

    args = {"envelope": genuine["metadata"][URI], "signature": genuine["metadata"][SIGNATURE_KEY]}
    async with mcp_client(bank.billing.url + "mcp", "triage-at-billing") as triage:
        replayed = await resume(triage, args)
    assert not replayed.is_error, replayed
    assert structured(replayed)["taskId"] == genuine["task"]["id"]
    assert structured(replayed)["duplicate"] is True
    async with mcp_client(bank.billing.url + "mcp", MALLORY) as mallory:  # a user's key
        stolen = await resume(mallory, args)
    assert stolen.is_error
    assert structured(stolen)["rejected"] == "untrusted_source"
    assert structured(stolen)["taskId"] != genuine["task"]["id"]


async def test_resume_from_handoff_refuses_a_forged_envelope(bank: Bank) -> None:
    from tests.trust_support import Signer

    envelope = forged()
    args = {"envelope": envelope, "signature": Signer("triage").sign(envelope)}
    async with mcp_client(bank.billing.url + "mcp", "triage-at-billing") as triage:
        answer = await resume(triage, args)
        assert answer.is_error
        assert structured(answer)["state"] == "rejected"
        assert structured(answer)["rejected"] == "envelope_forged"
        unsigned = await resume(triage, {"envelope": forged(), "signature": "x.y.z"})
        assert unsigned.is_error
        assert structured(unsigned)["state"] == "rejected"
    page = result(
        bank.billing.rpc(
            "ListTasks", {"contextId": envelope["contextId"]}, **{"X-API-Key": "triage-at-billing"}
        )
    )
    assert page["tasks"] == []  # refused before anything was stored


def test_without_the_option_there_is_no_mcp_and_no_mcp_import(echo_agent: AgentProcess) -> None:
    assert httpx.post(echo_agent.url + "mcp", json={}).status_code == 404
    code = (
        "import sys, a2a_handoff\n"
        "from a2a_handoff import create_app, build_card, open_store\n"
        "import servers.__main__\nfrom servers.echo import EchoAgent\n"
        "create_app(EchoAgent(), build_card('e', 'http://127.0.0.1:1/'), open_store('memory://'))\n"
        "assert not [m for m in sys.modules if m == 'mcp' or m.startswith('mcp.')], 'mcp'\n"
    )
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, timeout=60)
