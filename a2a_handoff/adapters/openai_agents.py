"""An OpenAI Agents SDK `Agent` served as an A2A agent: `create_app(from_agents_sdk(agent), …)`.

Needs the `agents` extra (`pip install 'a2a-handoff[agents]'`: the `openai-agents` package).

Each step runs the agent with `Runner.run_streamed`:

- **input**: the task's conversation, rebuilt from the store (`_conversation`: `build_chat`
  without the instructions, the agent has its own) — after a handoff, a note saying who
  handed over, why and what it passed along, the turns the edge's contract let travel, and
  a user turn;
- **run context**: an `A2ARunContext` — the task, the verified transfer context, the agent
  that handed over — which tools and dynamic instructions read as `ctx.context`; or the
  user's own (`context=`, `context_factory=`), the `A2ARunContext` then `a2a_context()`;
- **output**: the model's text streams as chunks of one artifact (`answer`); the final output
  completes the task, or, when it ends with "?", leaves it INPUT_REQUIRED (as `LLMAgent`
  does); a function tool calling `ask_user(question)` leaves it INPUT_REQUIRED at once;
- **remote handoffs** are explicit (`_sdk_remote`): only a `remote_agent("billing")` in
  `handoffs=[…]` is offered to the model as the route's transfer tool (`llm.transfer`: its
  description the target's card, its parameters the edge's contract — or its `input_type`'s
  schema —, its name a `tool_name_override`) and becomes the library's three-phase handoff:
  capability gate, contract, signature, durable outbox. Its `on_handoff` runs first. A
  refusal goes back to the model as the tool's result (`max_refusals` times, then the task
  fails). Its `input_filter` chooses the turns that may travel; the contract's
  `history_strategy` still bounds them (`summary`: none). Handoffs to local agents — whatever
  their names — stay the SDK's own;
- **ask tools**: an `ask_agent("billing")` in `tools=[…]` delegates (`llm.asking`: the
  outcome is the tool's result);
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
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from agents import Agent as SdkAgent
from agents import (
    InputGuardrailTripwireTriggered,
    MaxTurnsExceeded,
    OutputGuardrailTripwireTriggered,
    RunConfig,
)
from openai.types.responses import ResponseTextDeltaEvent

from a2a_handoff.adapters._conversation import conversation
from a2a_handoff.adapters._sdk_remote import (
    ask_agent,
    remote_agent,
    remote_result,
)
from a2a_handoff.adapters._sdk_resume import keep_state, started
from a2a_handoff.adapters._sdk_tools import (
    ASKED,
    AskUser,
    HandedOver,
    Step,
    TooManyRefusals,
    ask_user,
    remotes,
    served_copy,
    transfer_of,
)
from a2a_handoff.agent import TaskContext
from a2a_handoff.escalation import Decision
from a2a_handoff.llm.asking import ask_tools
from a2a_handoff.llm.chat import handed_over_by
from a2a_handoff.llm.transfer import (
    handoff_tools,
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
        step = Step(ctx, chat, self.max_refusals)
        handoffs, asks = remotes(self.agent)
        tools = await handoff_tools(ctx, [transfer_of(r) for r in handoffs])
        asking_tools = ask_tools(await handoff_tools(ctx, [transfer_of(a) for a in asks]))
        agent = served_copy(self.agent, tools, asking_tools, step, {})
        a2a = A2ARunContext(ctx, ctx.transfer_context, handed_over_by(ctx), ctx.decision)
        context = self.context if self.context is not None else a2a
        if self.context_factory is not None:
            context = self.context_factory(a2a)
        asking, running = ASKED.set(step.asked), _RUN.set(a2a)
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
        except HandedOver:
            return None  # TRANSFERRED: the step is over
        except AskUser as exc:
            await step.close()
            return InputRequired(exc.question)
        except TooManyRefusals as exc:
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
            ASKED.reset(asking)
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


def _text_of(item: Any) -> str:
    raw = getattr(item, "raw_item", None)
    parts = getattr(raw, "content", None) or []
    return "".join(getattr(p, "text", "") or "" for p in parts)
