"""What a served LangGraph graph's nodes and tools use of the step: `task_context()` (the
step's `TaskContext`), `end_step(outcome)`; and tools for its models (a prebuilt
`create_react_agent`, or any graph with a `ToolNode`): `handoff_tool(route)` gives the
conversation to the agent behind a route, `ask_tool(route)` asks it for a sub-result (a
delegation) and returns its answer.

A handoff tool returns `Command(goto=route)`: the adapter's node for the route hands the task
over, the tool call's arguments (`reason`, `summary`, `entities`) in the transfer context. It
is `return_direct`, so a prebuilt agent does not call its model again beside the handoff.
"""

from __future__ import annotations

import contextvars
from collections.abc import Sequence
from typing import Annotated, Any, NoReturn

from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool, InjectedToolCallId, tool
from langgraph.types import Command

from a2a_handoff.agent import TaskContext
from a2a_handoff.llm.asking import told
from a2a_handoff.llm.transfer import Transfer
from a2a_handoff.outcomes import Outcome

__all__ = ["CURRENT", "EndStep", "ask_tool", "end_step", "handoff_tool", "task_context"]

CURRENT: contextvars.ContextVar[TaskContext] = contextvars.ContextVar("a2a_handoff_task")


def task_context() -> TaskContext:
    """The `TaskContext` of the step running this node."""
    try:
        return CURRENT.get()
    except LookupError:
        raise RuntimeError(
            "task_context() is for nodes of a graph served by from_langgraph"
        ) from None


def end_step(outcome: Outcome) -> NoReturn:
    """End the step now with `outcome` (an `Escalate` from `guard`, a `Rejected`, …)."""
    raise EndStep(outcome)


class EndStep(Exception):
    def __init__(self, outcome: Outcome) -> None:
        super().__init__(type(outcome).__name__)
        self.outcome = outcome


def handoff_tool(route: str, *, description: str | None = None) -> BaseTool:
    """A tool named `transfer_to_<route>` that hands the task to the agent behind `route`."""
    name = Transfer(route).tool_name

    async def transfer(
        reason: str,
        summary: str,
        tool_call_id: Annotated[str, InjectedToolCallId],
        entities: dict[str, Any] | None = None,
    ) -> Command[Any]:
        said = ToolMessage(f"Handing the conversation over to {route}.", tool_call_id=tool_call_id)
        return Command(goto=route, update={"messages": [said]})

    return tool(
        name,
        description=description
        or f"Hand the conversation over to the agent {route}: "
        "reason (why it should take over), summary (what it needs to know), entities "
        "(ids, amounts, names found so far).",
        return_direct=True,
    )(transfer)


def ask_tool(
    route: str,
    *,
    description: str | None = None,
    required: Sequence[str] = (),
    within: float = 60.0,
) -> BaseTool:
    """A tool named `ask_<route>` that delegates `request` (and `context`) to the agent behind
    `route` (`ctx.delegation.ask`) and returns its outcome as JSON — `state`, `text`, the
    data it published. Outside a served graph it says what it would have asked."""
    name = "ask_" + Transfer(route).tool_name.removeprefix("transfer_to_")

    async def ask(request: str, context: dict[str, Any] | None = None) -> str:
        try:
            ctx = task_context()
        except RuntimeError:
            return f"not asked: {route} is a remote agent, asked only when served ({request})"
        outcome = await ctx.delegation.ask(
            route, request, context=context, required=tuple(required), within=within
        )
        return told(outcome)

    return tool(
        name,
        description=description
        or f"Ask the agent {route} for an answer and get it back as "
        "this tool's result; the conversation stays with you. request: what to ask; context:"
        " ids and facts it needs.",
    )(ask)
