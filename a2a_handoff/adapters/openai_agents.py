"""An OpenAI Agents SDK `Agent` served as an A2A agent: `create_app(from_agents_sdk(agent), …)`.

Needs the `agents` extra (`pip install 'a2a-handoff[agents]'`: the `openai-agents` package).

Each step runs the agent with `Runner.run_streamed`:

- **input**: the task's conversation, rebuilt from the store (`llm.chat.build_chat`, without
  the instructions: the agent has its own) — after a handoff, a note saying who handed over,
  why and what it passed along, and the earlier turns the edge's contract let travel;
- **run context**: an `A2ARunContext` — the task, the verified transfer context, the agent
  that handed over — which tools and dynamic instructions read as `ctx.context`;
- **output**: the model's text streams as chunks of one artifact (`answer`); the final output
  completes the task, or, when it ends with "?", leaves it INPUT_REQUIRED (as `LLMAgent`
  does); a function tool calling `ask_user(question)` leaves it INPUT_REQUIRED at once;
- **remote handoffs**: a handoff whose target is one of the agent's routes — `remote_agent(
  "billing")` in `handoffs=[…]`, or any handoff (an `Agent` or a `handoff(…)`) whose target
  name is a route — is offered to the model as the route's transfer tool (`llm.transfer`:
  its description the target's card, its parameters the edge's contract) and becomes the
  library's three-phase handoff: capability gate, contract, signature, durable outbox. A
  refusal goes back to the model as the tool's result (`max_refusals` times, then the task
  fails). A `remote_agent`'s `input_filter` chooses the turns that may travel; the contract's
  `history_strategy` still bounds them (`summary`: none). Handoffs to local agents stay the
  SDK's own;
- **guardrails**: an input guardrail's tripwire REJECTS the task, an output guardrail's
  FAILS it, each naming the guardrail;
- `RunConfig` (model, model settings, provider) and `max_turns` pass through. Tracing is off
  unless a `run_config` turns it on: nothing leaves for a tracing service by default;
- **resume**: after each tool's result the run's state (the SDK's `RunState`: the turns and
  tool results so far) is kept as the step's checkpoint (`ctx.checkpoint`); a step cut by a
  crash goes on from it (`resumes`): the tool calls made are not made again, the model turn
  in flight is asked again. A tool that was running at the crash runs again: a side effect
  that must happen once goes in `ctx.step`.
"""

from __future__ import annotations

import contextvars
import dataclasses
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, NoReturn

from agents import Agent as SdkAgent
from agents import (
    FunctionTool,
    Handoff,
    HandoffInputData,
    InputGuardrailTripwireTriggered,
    MaxTurnsExceeded,
    OutputGuardrailTripwireTriggered,
    RunConfig,
)
from agents.exceptions import AgentsException, ModelBehaviorError
from openai.types.responses import ResponseTextDeltaEvent

from a2a_handoff.adapters._conversation import conversation
from a2a_handoff.adapters._sdk_remote import (
    AskAgent,
    InputFilter,
    RemoteAgent,
    ask_agent,
    remote_agent,
    remote_result,
)
from a2a_handoff.adapters._sdk_resume import keep_state, started
from a2a_handoff.agent import ArtifactStream, TaskContext
from a2a_handoff.escalation import Decision
from a2a_handoff.llm.asking import ask_tools, asked
from a2a_handoff.llm.chat import handed_over_by
from a2a_handoff.llm.tools import ToolArgumentsError, json_object
from a2a_handoff.llm.transfer import (
    HandoffTool,
    Transfer,
    handoff_decision,
    handoff_tools,
    refused,
)
from a2a_handoff.outcomes import Completed, Failed, InputRequired, Outcome, Rejected

__all__ = [
    "A2ARunContext",
    "AgentsSdkAgent",
    "a2a_context",
    "ask_agent",
    "ask_user",
    "from_agents_sdk",
    "remote_agent",
    "remote_result",
]


@dataclass
class A2ARunContext:
    """The run context of a served agent (`ctx.context` in its tools and instructions)."""

    task: TaskContext
    transfer_context: dict[str, Any]  # verified when it arrived; empty when not handed over
    handed_over_by: str | None  # the agent that handed this conversation over
    decision: Decision | None  # an operator's signed decision this task came back with


def a2a_context() -> A2ARunContext:
    """The served step's `A2ARunContext`, for tools whose run context is the user's own
    (`from_agents_sdk(…, context=…)`)."""
    current = _RUN.get()
    if current is None:
        raise RuntimeError("a2a_context() is for the tools of an agent served by from_agents_sdk")
    return current


_RUN: contextvars.ContextVar[A2ARunContext | None] = contextvars.ContextVar(
    "a2a_handoff_run", default=None
)


def ask_user(question: str) -> NoReturn:
    """From a function tool: stop the run and ask the user; the task waits INPUT_REQUIRED and
    the user's answer continues the conversation."""
    asked = _ASKED.get()
    if asked is None:
        raise RuntimeError("ask_user() is for the tools of an agent served by from_agents_sdk")
    asked.append(question)
    raise _AskUser(question)  # the SDK turns it into the tool's error: _asking() stops the run


# The questions the step's tools asked: read past the SDK's handling of tool errors.
_ASKED: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar(
    "a2a_handoff_asked", default=None
)


class _AskUser(AgentsException):
    def __init__(self, question: str) -> None:
        super().__init__(question)
        self.question = question


class _HandedOver(AgentsException):
    """The task was handed over (TRANSFERRED): the run stops here."""


class _TooManyRefusals(AgentsException):
    pass


@dataclass
class _Step:
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


@dataclass
class AgentsSdkAgent:
    """An Agents SDK agent as a handler (see the module's docstring)."""

    agent: SdkAgent[Any]
    run_config: RunConfig | None = None
    max_turns: int = 10
    ask: bool = True
    max_refusals: int = 3
    context: Any = None  # the run context tools see, instead of the A2ARunContext
    context_factory: Callable[[A2ARunContext], Any] | None = None  # or made per step
    _run_config: RunConfig = field(init=False, repr=False)

    resumes: ClassVar[bool] = True  # a step cut by a crash goes on from its last tool result

    def __post_init__(self) -> None:
        self._run_config = self.run_config or RunConfig(tracing_disabled=True)

    async def handle(self, ctx: TaskContext) -> Outcome | None:
        chat = conversation(ctx)  # the agent's instructions are its own
        step = _Step(ctx, chat, self.max_refusals)
        remotes, asks = _remotes(self.agent)
        tools = await handoff_tools(ctx, [_transfer(r) for r in remotes])
        asking_tools = ask_tools(await handoff_tools(ctx, [_transfer(a) for a in asks]))
        agent = _with_transfer_tools(self.agent, tools, asking_tools, step, {})
        a2a = A2ARunContext(ctx, ctx.transfer_context, handed_over_by(ctx), ctx.decision)
        context = self.context if self.context is not None else a2a
        if self.context_factory is not None:
            context = self.context_factory(a2a)
        asking, running = _ASKED.set(step.asked), _RUN.set(a2a)
        try:
            saved = ctx.checkpointed
            run = await started(agent, chat, context, saved, self.max_turns, self._run_config)
            async for event in run.stream_events():
                if event.type == "raw_response_event" and isinstance(
                    event.data, ResponseTextDeltaEvent
                ):
                    if event.data.delta:
                        await step.write(event.data.delta)
                elif (
                    event.type == "run_item_stream_event" and event.name == "message_output_created"
                ):
                    text = _text_of(event.item)
                    if text:
                        step.chat.append({"role": "assistant", "content": text})
                elif event.type == "run_item_stream_event" and event.name == "tool_output":
                    await keep_state(ctx, run)
        except _HandedOver:
            return None  # TRANSFERRED: the step is over
        except _AskUser as exc:
            await step.close()
            return InputRequired(exc.question)
        except _TooManyRefusals as exc:
            await step.close()
            return Failed(str(exc), kind="HandoffRefused")
        except InputGuardrailTripwireTriggered as exc:
            await step.close()
            return Rejected(f"input guardrail {exc.guardrail_result.guardrail.get_name()} tripped")
        except OutputGuardrailTripwireTriggered as exc:
            await step.close()
            name = exc.guardrail_result.guardrail.get_name()
            return Failed(f"output guardrail {name} tripped", kind="Guardrail")
        except MaxTurnsExceeded:
            await step.close()
            return Failed(f"the agent did not finish within {self.max_turns} turns", "ModelTurns")
        finally:
            _ASKED.reset(asking)
            _RUN.reset(running)
        await step.close()
        output = run.final_output
        if output is None or isinstance(output, str):
            text = (output or "").strip()
            if self.ask and text.endswith("?"):
                return InputRequired(text)
            return Completed(text or None)
        data = output.model_dump(mode="json") if hasattr(output, "model_dump") else output
        await ctx.artifact(data=data, name="output")
        return Completed()


def from_agents_sdk(
    agent: SdkAgent[Any],
    *,
    run_config: RunConfig | None = None,
    max_turns: int = 10,
    ask: bool = True,
    max_refusals: int = 3,
    context: Any = None,
    context_factory: Callable[[A2ARunContext], Any] | None = None,
) -> AgentsSdkAgent:
    """Serve `agent`: `create_app(from_agents_sdk(agent), card, store, handoff=…)`.
    `context`: the run context its tools and instructions read (`ctx.context`) in place of the
    `A2ARunContext` (then `a2a_context()`); `context_factory`: one made for each step from
    the step's `A2ARunContext`."""
    return AgentsSdkAgent(agent, run_config, max_turns, ask, max_refusals, context, context_factory)


def _remotes(agent: SdkAgent[Any]) -> tuple[list[RemoteAgent], list[AskAgent]]:
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


def _transfer(item: RemoteAgent | AskAgent) -> Transfer:
    route = item.agent_name if isinstance(item, RemoteAgent) else item.route
    return Transfer(route, item.required, item.described)


def _with_transfer_tools(
    agent: SdkAgent[Any],
    tools: dict[str, HandoffTool],
    asks: dict[str, HandoffTool],
    step: _Step,
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
                extra.append(_transfer_tool(tool, step, item))
        elif isinstance(item, SdkAgent):
            handoffs.append(_with_transfer_tools(item, tools, asks, step, clones))
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
            raise _AskUser(asked[-1])
        return result

    return dataclasses.replace(tool, on_invoke_tool=invoke)


def _transfer_tool(tool: HandoffTool, step: _Step, item: RemoteAgent | None = None) -> FunctionTool:
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
        refusal = await step.ctx.hand_off(decision)
        if refusal is None:
            raise _HandedOver(tool.route.name)
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


def _ask_tool(tool: HandoffTool, step: _Step) -> FunctionTool:
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


def _refused(step: _Step, reason: str) -> str:
    step.refusals += 1
    if step.refusals > step.max_refusals:
        raise _TooManyRefusals(
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


def _text_of(item: Any) -> str:
    raw = getattr(item, "raw_item", None)
    parts = getattr(raw, "content", None) or []
    return "".join(getattr(p, "text", "") or "" for p in parts)
