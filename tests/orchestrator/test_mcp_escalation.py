"""An MCP host carried through an escalation: `python -m orchestrator mcp`, driven by the
official MCP client over stdio, with real triage, billing and human agents. A refund over $500
waits for an operator: the turn answers a normal result saying so, a message sent meanwhile
starts no new request, and `status` gives the outcome once the operator approved (CLI)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters

from tests.integration.handoff_support import tasks_in, wait_for
from tests.integration.mcp_support import structured
from tests.support import ROOT, AgentProcess, Cli, wire_trust

pytestmark = pytest.mark.anyio

BIG_REFUND = "I was charged twice, I want a refund of $750 for order 4242"


@pytest.fixture
def desk(tmp_path: Path) -> Iterator[dict[str, AgentProcess]]:
    def agent(name: str, *extra: str) -> AgentProcess:
        started = AgentProcess(name, f"sqlite:///{tmp_path / name}.db", extra=extra)
        started.log_path = tmp_path / f"{name}.log"
        return started

    fast = ("--recovery-interval", "0.3")
    human = agent("human", *fast)
    billing = agent("billing", f"--route=human={human.url}", *fast)
    triage = agent("triage", f"--route=billing={billing.url}", *fast)
    wire_trust([human, billing, triage])
    for one in (human, billing, triage):
        one.start()
    try:
        yield {"triage": triage, "billing": billing, "human": human}
    finally:
        for one in (triage, billing, human):
            one.stop()


def waiting_at(operator: Cli, human: AgentProcess, context_id: str) -> dict[str, Any]:
    """The escalation of `context_id` in the human agent's inbox."""

    def find() -> dict[str, Any] | None:
        code, items = operator.events("inbox", "--agent", human.url)
        assert code == 0
        return next((i for i in items if i["contextId"] == context_id), None)

    found: dict[str, Any] = wait_for(find, timeout=20)
    return found


async def test_a_refund_waiting_for_an_operator_over_stdio(
    desk: dict[str, AgentProcess], tmp_path: Path
) -> None:
    triage, billing, human = desk["triage"], desk["billing"], desk["human"]
    # --wait 20: before the fix, the turn blocked for it, then failed (isError).
    command = ["-m", "orchestrator", "mcp", "--entry", triage.url, "--wait", "20"]
    server = StdioServerParameters(command=sys.executable, args=command, cwd=ROOT)
    async with Client(server, read_timeout_seconds=60) as client:
        names = [t.name for t in (await client.list_tools()).tools]
        assert names == ["converse", "status"]

        first = await client.call_tool("converse", {"text": BIG_REFUND})
        asked = structured(first)
        assert not first.is_error, first
        assert asked["outcome"] == "awaiting_operator"
        assert asked["awaitingOperator"] is True
        assert asked["owner"] == "human"
        said = first.content[0].text
        assert "permission to refund $750.00 on order 4242" in said
        assert "human operator" in said
        assert "python -m orchestrator" not in said  # a host runs no command line

        news = await client.call_tool("converse", {"text": "any news on my refund?"})
        kept = structured(news)
        assert not news.is_error, news
        assert kept["outcome"] == "awaiting_operator"
        assert kept["notes"] == ["any news on my refund?"]
        assert kept["contextId"] == asked["contextId"]

        pending = await client.call_tool("status", {})
        shown = structured(pending)
        assert not pending.is_error, pending
        assert shown["awaitingOperator"] is True
        assert shown["waitingFor"] == "permission to refund $750.00 on order 4242"
        assert [e["event"] for e in shown["events"]][-1] == "awaiting_operator"

        operator = Cli(tmp_path / "operator.json")
        item = waiting_at(operator, human, asked["contextId"])
        code, out = operator.run("approve", item["taskId"], "verified", "--agent", human.url)
        assert code == 0, out

        done = await client.call_tool("status", {})
        outcome = structured(done)
        assert not done.is_error, done
        assert outcome["outcome"] == "completed", outcome
        assert outcome["awaitingOperator"] is False
        assert outcome["owner"] == "billing"
        assert "refunded" in done.content[0].text
        assert "[triage]" not in done.content[0].text  # what is new since the last call
        assert "any news on my refund?" in done.content[0].text  # the note, not sent on

        after = structured(await client.call_tool("status", {}))  # told once, then kept
        assert after["outcome"] == "completed"
        assert after["notes"] == []

    context = asked["contextId"]
    assert len(tasks_in(triage, context)) == 1  # the note started no new request at triage
    at_billing = tasks_in(billing, context)
    asked_order = [
        t
        for t in at_billing
        if "Which order" in str((t["status"].get("message") or {}).get("parts"))
    ]
    assert asked_order == []  # billing never asked again which order
    assert len(at_billing) == 2  # the escalated task and the one the decision came back to
    assert len(tasks_in(human, context)) == 1


async def test_a_wait_that_ran_out_is_followed_again_by_the_next_call(
    desk: dict[str, AgentProcess], tmp_path: Path
) -> None:
    triage, human = desk["triage"], desk["human"]
    command = ["-m", "orchestrator", "mcp", "--entry", triage.url, "--wait", "5"]
    server = StdioServerParameters(command=sys.executable, args=command, cwd=ROOT)
    async with Client(server, read_timeout_seconds=60) as client:
        first = structured(await client.call_tool("converse", {"text": BIG_REFUND}))
        assert first["outcome"] == "awaiting_operator", first

        async def ran_out() -> bool:  # the background turn's wait ended: it said so
            shown = structured(await client.call_tool("status", {}))
            assert shown["awaitingOperator"] is True, shown
            return any(e["event"] == "pending" for e in shown["events"])

        for _ in range(100):
            if await ran_out():
                break
            await anyio.sleep(0.2)
        else:
            raise AssertionError("the background turn's wait never ran out")

        operator = Cli(tmp_path / "operator.json")
        item = waiting_at(operator, human, first["contextId"])
        code, out = operator.run("approve", item["taskId"], "--agent", human.url)
        assert code == 0, out
        done = await client.call_tool("converse", {"text": "and now?"})
        outcome = structured(done)
        assert outcome["outcome"] == "completed", outcome
        assert outcome["notes"] == ["and now?"]  # kept, not sent on as a new request
        assert "Refund of $750.00 issued for order 4242." in done.content[0].text
    assert len(tasks_in(triage, first["contextId"])) == 1
