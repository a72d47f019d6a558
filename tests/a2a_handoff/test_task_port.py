"""A handler reaches each thing beyond its step through an object of its own on the context
(`ctx.handoffs`, `ctx.delegation`, `ctx.tools`, `ctx.escalation`), each over a small port of
its own (`task_port`): here every port is a separate recorder, so a call that went through
the wrong one, or lost what the object adds (the step, a request built, defaults), shows."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest

from a2a_handoff.agent import TaskContext
from a2a_handoff.delegated import Delegated
from a2a_handoff.escalation import Escalate, Escalation, Need, Trigger
from a2a_handoff.outcomes import Handoff, Route
from a2a_handoff.protocol.mcp_result import ToolResult
from a2a_handoff.protocol.models import Artifact, Message, Part, Role, Task, TaskStatus
from a2a_handoff.protocol.states import TaskState

pytestmark = pytest.mark.anyio

STEP = "m-7"  # the id of the message the step runs on


@dataclass
class Calls:
    """What one port was asked, in order: (method, arguments)."""

    seen: list[tuple[str, tuple[Any, ...]]] = field(default_factory=list)

    def note(self, name: str, *args: Any) -> None:
        self.seen.append((name, args))


class Handoffs(Calls):
    def route_names(self) -> list[str]:
        self.note("route_names")
        return ["billing"]

    async def route(self, name: str, kind: str) -> Route:
        self.note("route", name, kind)
        return Route(name, "http://billing/", None, None)

    async def refusal(self, decision: Handoff) -> str | None:
        self.note("refusal", decision)
        return "no"

    async def hand_off(self, decision: Handoff) -> str | None:
        self.note("hand_off", decision)
        return None


class Delegations(Calls):
    async def delegate(self, step: str, request: Handoff, within: float) -> Delegated:
        self.note("delegate", step, request, within)
        return Delegated(request.target, TaskState.COMPLETED, "done")

    def earlier(self, step: str) -> list[Delegated]:
        self.note("earlier", step)
        return []


class Tools(Calls):
    async def call_tool(
        self, server: str, tool: str, args: Mapping[str, Any] | None, key: str | None
    ) -> ToolResult:
        self.note("call_tool", server, tool, args, key)
        return ToolResult()


class Escalations(Calls):
    def use_approval(self, decision_id: str) -> bool:
        self.note("use_approval", decision_id)
        return True

    async def inform(self, escalation: Escalation) -> str:
        self.note("inform", escalation)
        return "human-task"


@dataclass
class Ports(Calls):
    """A `TaskPort` whose event methods and capability ports all record apart."""

    handoffs: Handoffs = field(default_factory=Handoffs)
    delegation: Delegations = field(default_factory=Delegations)
    tools: Tools = field(default_factory=Tools)
    escalation: Escalations = field(default_factory=Escalations)

    async def status(self, text: str) -> None:
        self.note("status", text)

    async def artifact(self, artifact: Artifact) -> None:
        self.note("artifact", artifact)

    async def chunk(self, chunk: Artifact, append: bool, last_chunk: bool) -> None:
        self.note("chunk", chunk, append, last_chunk)

    async def step(self, name: str, fn: Callable[[str], Awaitable[Any]]) -> Any:
        self.note("step", name)
        return await fn(name)

    async def checkpoint(self, step: str, value: Any) -> None:
        self.note("checkpoint", step, value)


def context(ports: Ports) -> TaskContext:
    message = Message(message_id=STEP, role=Role.USER, parts=[Part(text="refund order 7")])
    task = Task(id="t", context_id="c", status=TaskStatus(state=TaskState.WORKING))
    return TaskContext(message, task, ports)


def names(calls: Calls) -> list[str]:
    return [name for name, _ in calls.seen]


def escalation() -> Escalation:
    return Escalation(
        "The customer asks for a refund of $900 on order 7.",
        ["Found order 7 and computed the refund."],
        "permission to refund $900 on order 7",
        Need.PERMISSION,
        Trigger.HIGH_IMPACT,
    )


async def test_handoffs_go_through_the_handoff_port_alone() -> None:
    ports = Ports()
    ctx = context(ports)
    assert ctx.handoffs.routes == ["billing"]
    assert (await ctx.handoffs.route("billing")).url == "http://billing/"
    assert await ctx.handoffs.check(Escalate(escalation())) == "no"
    assert await ctx.handoffs.hand_off(Handoff("billing", "refund")) is None
    seen = ports.handoffs.seen
    assert [name for name, _ in seen] == ["route_names", "route", "refusal", "hand_off"]
    assert seen[1][1] == ("billing", "handoff")  # the kind a route is asked for by default
    (asked,) = seen[2][1]  # an escalation is checked as the handoff to the human agent
    assert (asked.target, asked.kind) == ("human", "escalation")
    assert names(ports) == names(ports.delegation) == names(ports.tools) == []


async def test_a_delegation_is_asked_from_this_step_as_a_request_of_kind_delegation() -> None:
    ports = Ports()
    ctx = context(ports)
    result = await ctx.delegation.ask("billing", "Refund order 7", context={"orderId": "7"})
    assert result.state is TaskState.COMPLETED
    assert ctx.delegation.earlier == []
    (_, (step, request, within)), (_, (before,)) = ports.delegation.seen
    assert (step, within, before) == (STEP, 60.0, STEP)
    assert (request.target, request.kind) == ("billing", "delegation")
    assert request.context == {"orderId": "7", "summary": "Refund order 7"}
    assert names(ports) == names(ports.handoffs) == names(ports.tools) == []


async def test_a_tool_call_goes_through_the_tool_port_with_its_key() -> None:
    ports = Ports()
    await context(ports).tools.call("billing", "quote", {"order": "7"}, idempotency_key="k")
    await context(ports).tools.call("billing", "status")
    assert ports.tools.seen == [
        ("call_tool", ("billing", "quote", {"order": "7"}, "k")),
        ("call_tool", ("billing", "status", None, None)),
    ]
    assert names(ports) == names(ports.escalation) == []


async def test_approvals_and_notices_go_through_the_escalation_port() -> None:
    ports = Ports()
    ctx = context(ports)
    assert await ctx.escalation.inform(escalation()) == "human-task"
    assert names(ports.escalation) == ["inform"]
    assert names(ports) == names(ports.handoffs) == []


async def test_the_step_s_own_events_go_through_the_event_port() -> None:
    ports = Ports()
    ctx = context(ports)
    await ctx.status("working")
    await ctx.checkpoint({"at": 1})
    assert await ctx.step("refund", lambda key: _echo(key)) == "refund"
    assert names(ports) == ["status", "checkpoint", "step"]
    assert ports.seen[1][1] == (STEP, {"at": 1})  # kept under this step


async def _echo(key: str) -> str:
    return key
