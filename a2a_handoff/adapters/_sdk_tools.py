"""The tools an Agents SDK agent is served with, in place of what it declared: its remote
handoffs as transfer tools (the library's three-phase handoff, with the SDK's handoff options),
its `ask_agent` tools as delegations, and its function tools stopping the run when they called
`ask_user`. Copies: the user's agents are left as they were.

A step's state (`Step`) is what these tools share with the run: the conversation so far (what
a handoff may carry), the answer streaming, the refusals counted, the questions asked.
"""

from __future__ import annotations

import contextvars
import dataclasses
import inspect
from dataclasses import dataclass, field
from typing import Any, NoReturn

from agents import Agent as SdkAgent
from agents import FunctionTool, Handoff, HandoffInputData
from agents.exceptions import AgentsException, ModelBehaviorError

from a2a_handoff.adapters._sdk_remote import AskAgent, InputFilter, RemoteAgent
from a2a_handoff.agent import ArtifactStream, TaskContext
from a2a_handoff.llm.asking import asked
from a2a_handoff.llm.tools import ToolArgumentsError, json_object
from a2a_handoff.llm.transfer import HandoffTool, Transfer, handoff_decision, refused

__all__ = [
    "ASKED",
    "AskUser",
    "HandedOver",
    "Step",
    "TooManyRefusals",
    "ask_user",
    "remotes",
    "served_copy",
    "transfer_of",
    "transfer_tool",
]


def ask_user(question: str) -> NoReturn:
    """From a function tool: stop the run and ask the user; the task waits INPUT_REQUIRED and
    the user's answer continues the conversation."""
    asked = ASKED.get()
    if asked is None:
        raise RuntimeError("ask_user() is for the tools of an agent served by from_agents_sdk")
    asked.append(question)
    raise AskUser(question)  # the SDK turns it into the tool's error: _asking() stops the run


# The questions the step's tools asked: read past the SDK's handling of tool errors.
ASKED: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar(
    "a2a_handoff_asked", default=None
)


class AskUser(AgentsException):
    def __init__(self, question: str) -> None:
        super().__init__(question)
        self.question = question


class HandedOver(AgentsException):
    """The task was handed over (TRANSFERRED): the run stops here."""


class TooManyRefusals(AgentsException):
    pass


@dataclass
class Step:
    ctx: TaskContext
    chat: list[dict[str, Any]]
    max_refusals: int
    answer: ArtifactStream | None = None
    refusals: int = 0
    asked: list[str] = field(default_factory=list)

    async def write(self, token: str) -> None:
        if self.answer is None:
            self.answer = ArtifactStream(self.ctx, self.ctx.new_artifact_id(), "answer", None)
        await self.answer.write(token)

    async def close(self) -> None:
        if self.answer is not None:
            await self.answer.close()
            self.answer = None


def remotes(agent: SdkAgent[Any]) -> tuple[list[RemoteAgent], list[AskAgent]]:
    """Every remote handoff and ask tool, in `agent` and the local agents it hands off to."""
    remotes: list[RemoteAgent] = []
    asks: list[AskAgent] = []
    seen: set[int] = set()
    todo = [agent]
    while todo:
        current = todo.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        asks += [t for t in current.tools if isinstance(t, AskAgent)]
        for item in current.handoffs:
            if isinstance(item, RemoteAgent):
                remotes.append(item)
            elif isinstance(item, SdkAgent):
                todo.append(item)
    return remotes, asks


def transfer_of(item: RemoteAgent | AskAgent) -> Transfer:
    route = item.agent_name if isinstance(item, RemoteAgent) else item.route
    return Transfer(route, item.required, item.described)


def served_copy(
    agent: SdkAgent[Any],
    tools: dict[str, HandoffTool],
    asks: dict[str, HandoffTool],
    step: Step,
    clones: dict[int, SdkAgent[Any]],
) -> SdkAgent[Any]:
    """A copy of `agent` (and of the local agents it hands off to) whose remote handoffs are
    transfer tools and whose `ask_agent` tools delegate. The user's agents are left as they
    were; a route not configured here is not offered."""
    if id(agent) in clones:
        return clones[id(agent)]
    clone = agent.clone()
    clones[id(agent)] = clone
    handoffs: list[SdkAgent[Any] | Handoff[Any, Any]] = []
    extra: list[FunctionTool] = []
    for item in agent.handoffs:
        if isinstance(item, RemoteAgent):
            tool = tools.get(Transfer(item.agent_name).tool_name)
            if tool is not None:
                extra.append(transfer_tool(tool, step, item))
        elif isinstance(item, SdkAgent):
            handoffs.append(served_copy(item, tools, asks, step, clones))
        else:
            handoffs.append(item)
    own: list[Any] = []
    for t in agent.tools:
        if isinstance(t, AskAgent):
            if t.name in asks:
                own.append(_ask_tool(asks[t.name], step))
        else:
            own.append(_asking(t, step.asked) if isinstance(t, FunctionTool) else t)
    clone.handoffs = handoffs
    clone.tools = [*own, *extra]
    return clone


def _asking(tool: FunctionTool, asked: list[str]) -> FunctionTool:
    """`tool`, stopping the run when it called `ask_user` (whatever the SDK made of it)."""
    invoke_tool = tool.on_invoke_tool

    async def invoke(ctx: Any, raw: str) -> Any:
        result = await invoke_tool(ctx, raw)
        if asked:
            raise AskUser(asked[-1])
        return result

    return dataclasses.replace(tool, on_invoke_tool=invoke)


def transfer_tool(tool: HandoffTool, step: Step, item: RemoteAgent | None = None) -> FunctionTool:
    """The transfer tool of a remote handoff, as `item` declares it: its name
    (`tool_name_override`), its arguments (an `input_type`'s schema: validated, and carried
    in the transfer context), its `on_handoff` (run before the handoff is attempted) and its
    `input_filter`."""

    async def invoke(run: Any, raw: str) -> str:
        try:
            arguments = json_object(raw)
            if item is not None:  # validates an input_type, runs on_handoff
                await item.on_invoke_handoff(run, raw)
        except (ToolArgumentsError, ModelBehaviorError) as exc:
            return _refused(step, f"bad arguments: {exc}")
        filter_ = item.input_filter if item is not None else None
        chat = step.chat if filter_ is None else await _filtered(filter_, step.chat)
        decision = handoff_decision(tool, arguments, chat)
        if item is not None and item.typed:
            decision = dataclasses.replace(decision, context={**decision.context, **arguments})
        await step.close()  # the answer so far is stored before the task is handed over
        refusal = await step.ctx.handoffs.hand_off(decision)
        if refusal is None:
            raise HandedOver(tool.route.name)
        return _refused(step, refusal)

    typed = item is not None and item.typed
    return FunctionTool(
        name=item.tool_name if item is not None else tool.name,
        description=tool.description,
        params_json_schema=item.input_json_schema
        if item is not None and typed
        else tool.parameters,
        on_invoke_tool=invoke,
        strict_json_schema=False,
    )


def _ask_tool(tool: HandoffTool, step: Step) -> FunctionTool:
    """An `ask_agent` tool, served: its call delegates; the outcome is the tool's result."""

    async def invoke(_: Any, raw: str) -> str:
        try:
            arguments = json_object(raw)
        except ToolArgumentsError as exc:
            return f"not asked: bad arguments: {exc}"
        await step.close()  # the answer so far is stored before the task waits
        return await asked(step.ctx, tool, arguments, step.chat)

    return FunctionTool(
        name=tool.spec["function"]["name"],
        description=tool.description,
        params_json_schema=tool.parameters,
        on_invoke_tool=invoke,
        strict_json_schema=False,
    )


def _refused(step: Step, reason: str) -> str:
    step.refusals += 1
    if step.refusals > step.max_refusals:
        raise TooManyRefusals(
            f"the model's handoffs were refused {step.refusals} times; the last: {reason}"
        )
    return refused(reason)


async def _filtered(filter_: InputFilter, chat: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The turns a handoff's `input_filter` lets travel (as the SDK would hand them over)."""
    data = HandoffInputData(
        input_history=tuple(chat),  # type: ignore[arg-type]  # easy input messages
        pre_handoff_items=(),
        new_items=(),
    )
    filtered = filter_(data)
    if inspect.isawaitable(filtered):
        filtered = await filtered
    kept = filtered.input_history
    if isinstance(kept, str):
        return [{"role": "user", "content": kept}]
    return [dict(item) for item in kept if isinstance(item, dict)]
