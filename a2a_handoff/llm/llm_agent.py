"""LLMAgent: an agent whose every step is a language model's chat, handoffs among its tools.

A step: the chat is rebuilt from the stored task (`chat.build_chat`); the model is called
with the agent's tools — its function tools, one `transfer_to_<route>` per handoff route,
and `escalate_to_human` when a `human` route exists — and its text streams to the client as
chunks of one artifact. A tool call runs and its result goes back to the model, until the
model answers without calling one: that text completes the task — or, when the agent asks
(`ask=True`) and the text ends with a question mark, the task waits INPUT_REQUIRED for the
user's answer, which continues the same chat.

Beside each transfer tool, an `ask_<route>` tool delegates instead (`ctx.delegation.ask`,
`llm.asking`): the route's agent answers and the model goes on with the answer (`asks=False`
offers none).

A handoff tool's call is handed off at once and waited for (`ctx.handoffs.hand_off`); a
refusal — the capability gate, the edge's contract, the target's loop guard, or the target
itself — goes back to the model as the tool's result so it may choose again, `max_refusals`
times, then the task fails with the last reason. From its checkpoint on the handoff is the
library's: delivered, replayed after a crash (then without the model: a refusal after a
restart fails the task or follows the contract, as for any handoff).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from a2a_handoff.agent import ArtifactStream, TaskContext
from a2a_handoff.errors import IncompleteEscalationError
from a2a_handoff.escalation import Escalate, Escalation, Need, Trigger
from a2a_handoff.llm.asking import ask_tools, asked
from a2a_handoff.llm.chat import HISTORY_KEY, build_chat, transcript
from a2a_handoff.llm.model import Model, ToolCall
from a2a_handoff.llm.tools import (
    FunctionTool,
    ToolArgumentsError,
    ToolFunction,
    function_tool,
    json_object,
)
from a2a_handoff.llm.transfer import (
    HandoffTool,
    Transfer,
    handoff_decision,
    handoff_tools,
    refused,
    tool_spec,
)
from a2a_handoff.outcomes import Completed, Failed, InputRequired, Outcome, Rejected

__all__ = ["ESCALATE_TOOL", "LLMAgent", "Transfer"]

ESCALATE_TOOL = "escalate_to_human"
HUMAN_ROUTE = "human"
PENDING_TOOL = "pendingTool"  # in an escalation's resume: the tool call waiting for approval

ESCALATE_PARAMETERS = {
    "type": "object",
    "properties": {
        "what_happened": {"type": "string", "description": "what happened, in a sentence"},
        "what_was_tried": {
            "type": "array",
            "items": {"type": "string"},
            "description": "what you tried, one sentence each",
        },
        "what_is_needed": {"type": "string", "description": "what you need from a person"},
        "need": {"enum": [str(n) for n in Need]},
    },
    "required": ["what_happened", "what_was_tried", "what_is_needed", "need"],
}


_HandoffTool = HandoffTool  # the name the tests knew


@dataclass(slots=True)
class _Step:
    """One step's state: the chat so far, the streamed answer, the refusals counted."""

    ctx: TaskContext
    chat: list[dict[str, Any]]
    answer: ArtifactStream | None = None
    refusals: int = 0
    last_refusal: str = ""

    async def write(self, token: str) -> None:
        if self.answer is None:
            self.answer = ArtifactStream(self.ctx, self.ctx.new_artifact_id(), "answer", None)
        await self.answer.write(token)

    async def close(self) -> None:
        if self.answer is not None:
            await self.answer.close()
            self.answer = None


@dataclass
class LLMAgent:
    """An agent declared, not written: a model, instructions, handoff routes, tools.

    `model`: a model name (the endpoint from `base_url` / `api_key` or $OPENAI_BASE_URL /
    $OPENAI_API_KEY), or a `Model`. `handoffs`: route names (or `Transfer`s naming the
    capabilities required). `tools`: async functions (or `tool(...)`-declared ones).
    `ask`: a final answer ending with "?" leaves the task INPUT_REQUIRED. `max_refusals`:
    refused handoffs fed back to the model before the task fails. `max_turns`: model calls
    per step. `asks`: offer an `ask_<route>` (delegation) tool beside each transfer tool.
    """

    name: str
    model: str | Model | None = None
    instructions: str = ""
    handoffs: Sequence[str | Transfer] = ()
    tools: Sequence[ToolFunction | FunctionTool] = ()
    base_url: str | None = None
    api_key: str | None = None
    ask: bool = True
    max_refusals: int = 3
    max_turns: int = 10
    asks: bool = True
    _model: Model = field(init=False, repr=False)
    _tools: dict[str, FunctionTool] = field(init=False, repr=False)
    _transfers: tuple[Transfer, ...] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._model = (
            self.model
            if isinstance(self.model, Model)
            else Model(self.model, self.base_url, self.api_key)
        )
        self._tools = {t.name: t for t in map(function_tool, self.tools)}
        self._transfers = tuple(
            t if isinstance(t, Transfer) else Transfer(t) for t in self.handoffs
        )

    @property
    def instructions_text(self) -> str:
        return self.instructions or f"You are {self.name}, an agent that helps customers."

    async def handle(self, ctx: TaskContext) -> Outcome | None:
        step = _Step(ctx, build_chat(self.instructions_text, ctx))
        transfers = await handoff_tools(ctx, self._transfers)
        asks = ask_tools(transfers) if self.asks else {}
        escalate = HUMAN_ROUTE in ctx.handoffs.routes
        specs = [t.spec() for t in self._tools.values()]
        specs += [t.spec for t in (*transfers.values(), *asks.values())]
        if escalate:
            specs.append(tool_spec(ESCALATE_TOOL, _ESCALATE_DESCRIPTION, ESCALATE_PARAMETERS))
        outcome = await self._resume_approved(step)
        if outcome is not None:
            return outcome
        for _ in range(self.max_turns):
            turn = await self._model.complete(step.chat, specs, step.write)
            step.chat.append(turn.message())
            if not turn.tool_calls:
                await step.close()
                text = turn.text.strip()
                if self.ask and text.endswith("?"):
                    return InputRequired(text)
                return Completed(text or None)
            for call in turn.tool_calls:
                result: str | Outcome
                if call.name in transfers:
                    result = await self._transfer(step, transfers[call.name], call)
                elif call.name in asks:
                    result = await self._ask(step, asks[call.name], call)
                elif call.name == ESCALATE_TOOL and escalate:
                    result = await self._escalate(step, call)
                elif call.name in self._tools:
                    result = await self._function(step, self._tools[call.name], call.arguments)
                else:
                    result = f"error: there is no tool {call.name!r}"
                if result is _HANDED_OVER:
                    return None  # TRANSFERRED: the step is over
                if not isinstance(result, str):
                    await step.close()
                    return result
                if step.refusals > self.max_refusals:
                    return Failed(
                        f"the model's handoffs were refused {step.refusals} times;"
                        f" the last: {step.last_refusal}",
                        kind="HandoffRefused",
                    )
                step.chat.append({"role": "tool", "tool_call_id": call.id, "content": result})
        await step.close()
        return Failed(f"the model did not finish within {self.max_turns} calls", kind="ModelTurns")

    async def _transfer(self, step: _Step, tool: HandoffTool, call: ToolCall) -> str | Outcome:
        try:
            arguments = json_object(call.arguments)
        except ToolArgumentsError as exc:
            return self._refused(step, f"bad arguments: {exc}")
        decision = handoff_decision(tool, arguments, step.chat)
        await step.close()  # the answer so far is stored before the task is handed over
        refusal = await step.ctx.handoffs.hand_off(decision)
        if refusal is not None:
            return self._refused(step, refusal)
        return _HANDED_OVER

    async def _ask(self, step: _Step, tool: HandoffTool, call: ToolCall) -> str:
        try:
            arguments = json_object(call.arguments)
        except ToolArgumentsError as exc:
            return f"error: bad arguments for {tool.name}: {exc}"
        await step.close()  # the answer so far is stored before the task waits
        return await asked(step.ctx, tool, arguments, step.chat)

    async def _escalate(self, step: _Step, call: ToolCall) -> str | Outcome:
        try:
            arguments = json_object(call.arguments)
            tried = arguments.get("what_was_tried")
            need = str(arguments.get("need") or Need.DECISION)
            trigger = (
                Trigger.KNOWLEDGE_GAP if need == Need.INFORMATION else (Trigger.VALUE_UNCERTAINTY)
            )
            escalation = Escalation(
                arguments.get("what_happened"),  # type: ignore[arg-type]  # checked there
                tuple(tried) if isinstance(tried, list) else (tried,),  # type: ignore[arg-type]
                arguments.get("what_is_needed"),  # type: ignore[arg-type]
                need,  # type: ignore[arg-type]
                trigger,
                resume=_resume(step),
            )
        except (ToolArgumentsError, IncompleteEscalationError) as exc:
            return self._refused(step, f"the escalation is incomplete: {exc}")
        outcome = Escalate(escalation)
        refusal = await step.ctx.handoffs.check(outcome)
        if refusal is not None:
            return self._refused(step, refusal)
        return outcome

    async def _function(self, step: _Step, tool: FunctionTool, raw: str) -> str | Outcome:
        ctx = step.ctx
        try:
            arguments = tool.parse(raw)
        except ToolArgumentsError as exc:
            return f"error: bad arguments for {tool.name}: {exc}"
        if tool.guarded:
            action = tool.action(arguments)
            held = ctx.escalation.guard(
                action,
                what_happened=f"The model of {self.name} asked to run {action.description}.",
                tried=[f"Held {tool.name} back before it ran: nothing was done yet."],
                resume={
                    **_resume(step),
                    PENDING_TOOL: {"name": tool.name, "arguments": raw},
                },
            )
            if isinstance(held, Rejected):
                return f"not done: {held.reason}"
            if held is not None:
                refusal = await ctx.handoffs.check(held)
                if refusal is not None:
                    return f"not done: it needs an operator's approval, not asked: {refusal}"
                return held
        try:
            return await tool(ctx, arguments)
        except Exception as exc:
            return f"error: {tool.name} raised {type(exc).__name__}: {exc}"

    async def _resume_approved(self, step: _Step) -> Outcome | None:
        """Handed back after an escalation for a held-back tool: the tool runs now, under
        the operator's decision (`ctx.escalation.guard` runs it only if exactly it was
        approved, once), and the model is told how it went."""
        ctx = step.ctx
        pending = ctx.transfer_context.get(PENDING_TOOL) if ctx.decision is not None else None
        if not isinstance(pending, Mapping):
            return None
        tool = self._tools.get(str(pending.get("name")))
        if tool is None:
            return None
        call = ToolCall("resume-" + ctx.task_id, tool.name, str(pending.get("arguments") or "{}"))
        result = await self._function(step, tool, call.arguments)
        if not isinstance(result, str):
            return result  # held again (the approval expired): a new escalation
        step.chat.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": call.id,
                        "type": "function",
                        "function": {"name": call.name, "arguments": call.arguments},
                    }
                ],
            }
        )
        step.chat.append({"role": "tool", "tool_call_id": call.id, "content": result})
        return None

    def _refused(self, step: _Step, reason: str) -> str:
        step.refusals += 1
        step.last_refusal = reason
        return refused(reason)

    async def aclose(self) -> None:
        await self._model.aclose()


_HANDED_OVER = Completed("handed over")  # a marker: `ctx.handoffs.hand_off` transferred the task

_ESCALATE_DESCRIPTION = (
    "Hand the conversation to a human operator and wait for their decision. Use it when you"
    " cannot or must not decide: say what happened, what you tried, and what you need."
)


def _resume(step: _Step) -> dict[str, Any]:
    """What an escalation takes along to come back with: a summary and the chat's turns."""
    turns = transcript(step.chat, "full")
    last_user = next((t["content"] for t in reversed(turns) if t["role"] == "user"), "")
    return {"summary": last_user[:500] or "the conversation so far", HISTORY_KEY: turns}
