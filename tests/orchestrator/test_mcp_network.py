"""`python -m orchestrator mcp --entry URL`, launched and driven by the official MCP client
over stdio, as a desktop host does: a refund conversation through triage, transferred to
billing, which asks for the order and refunds it; a retried call does not send twice; `status`
says where a conversation is without sending anything."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters

from tests.integration.handoff_support import Agents, result, running
from tests.integration.mcp_support import structured
from tests.support import ROOT

pytestmark = pytest.mark.anyio


@pytest.fixture
def agents(tmp_path: Path) -> Iterator[Agents]:
    with running(tmp_path) as started:
        yield started


def kinds(answer: dict[str, Any]) -> list[str]:
    return [e["event"] for e in answer["events"]]


async def test_a_refund_conversation_with_a_transfer_over_stdio(agents: Agents) -> None:
    command = [sys.executable, "-m", "orchestrator", "mcp", "--entry", agents.triage.url]
    server = StdioServerParameters(command=command[0], args=command[1:], cwd=ROOT)
    async with Client(server, read_timeout_seconds=60) as client:
        tools = (await client.list_tools()).tools
        assert [t.name for t in tools] == ["converse", "status"]

        args = {"text": "I want a refund", "idempotencyKey": "m1"}
        first = await client.call_tool("converse", args)
        asked = structured(first)
        assert not first.is_error, first
        assert "transferred" in kinds(asked)
        assert asked["outcome"] == "input_required"
        assert asked["owner"] == "billing"
        assert "Which order" in first.content[0].text
        assert "[triage] transferred to billing" in first.content[0].text

        again = structured(await client.call_tool("converse", args))  # a retry: not re-sent
        assert again == asked

        done = await client.call_tool("converse", {"text": "order 12345"})
        finished = structured(done)
        assert finished["outcome"] == "completed", done
        assert finished["owner"] == "billing"
        assert finished["contextId"] == asked["contextId"]
        assert "Refund of $49.99 issued for order 12345." in done.content[0].text

        now = await client.call_tool("status", {})  # where it is, nothing sent
        where = structured(now)
        assert not now.is_error
        assert where["outcome"] == "completed"
        assert where["awaitingOperator"] is False
        assert (where["owner"], where["taskId"]) == (finished["owner"], finished["taskId"])
        assert "Refund of $49.99 issued" in now.content[0].text
        unknown = structured(await client.call_tool("status", {"conversation": "other"}))
        assert unknown["outcome"] == "none"

        fresh = structured(await client.call_tool("converse", {"text": "hello", "new": True}))
        assert fresh["contextId"] != asked["contextId"]

        bad = await client.call_tool("converse", {})
        assert bad.is_error
    page = result(agents.triage.rpc("ListTasks", {"contextId": asked["contextId"]}))
    assert len(page["tasks"]) == 1  # one refund request reached triage, not two
