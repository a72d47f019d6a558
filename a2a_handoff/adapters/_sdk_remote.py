"""Remote agents for an Agents SDK agent: `remote_agent(route)` (a handoff) and
`ask_agent(route)` (a delegation tool), each standing for the agent behind a route.

Remote is explicit: only these are remote — an `Agent` or a `handoff(…)` to a local agent stays
local whatever its name. Served by `from_agents_sdk`, each becomes the library's transfer or
ask tool. Under a plain `Runner.run` (a local test) they run too, without any network: a
remote handoff validates its input (`input_type`), calls `on_handoff`, and the run ends at a
stand-in for the remote agent whose final output says where the conversation would go
(`remote_result(route)`); an ask tool answers that it was not asked.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from agents import Agent as SdkAgent
from agents import (
    FunctionTool,
    Handoff,
    HandoffInputData,
    ModelResponse,
    Usage,
    handoff,
)
from agents.models.interface import Model
from openai.types.responses import (
    Response,
    ResponseCompletedEvent,
    ResponseOutputMessage,
    ResponseOutputText,
)

from a2a_handoff.llm.transfer import FREE_FORM, Transfer

__all__ = ["AskAgent", "RemoteAgent", "ask_agent", "remote_agent", "remote_result"]

InputFilter = Callable[[HandoffInputData], Awaitable[HandoffInputData] | HandoffInputData]


def remote_result(route: str) -> str:
    """The final output of a plain run that reached the remote agent behind `route`."""
    return f"handed over to {route}: a remote agent, reached only when served by from_agents_sdk"


@dataclass(eq=False)
class RemoteAgent(Handoff[Any, Any]):
    """A handoff to the agent behind a route: `remote_agent("billing")`."""

    required: tuple[str, ...] = ()
    described: str | None = None  # the tool's description, when not the target's card
    typed: bool = False  # an `input_type` validates the arguments: they are the tool's schema
    stand_in: SdkAgent[Any] | None = None  # the agent a plain run ends at (kept alive here)


def remote_agent(
    route: str,
    *,
    required: Sequence[str] = (),
    description: str | None = None,
    input_filter: InputFilter | None = None,
    tool_name_override: str | None = None,
    input_type: type[Any] | None = None,
    on_handoff: Callable[..., Any] | None = None,
) -> RemoteAgent:
    """A handoff to the agent behind the route `route`, for an agent's `handoffs=[…]`.

    `required`: the capabilities the target must offer (the capability gate). `description`:
    the tool's description (default: the target's card). `input_filter`: the SDK's filter of
    what history travels (bounded by the edge's contract). `tool_name_override`, `input_type`
    and `on_handoff` are the SDK's `handoff(…)` options: the tool's name, the type of its
    arguments (validated; they travel in the transfer context) and a callback run when the
    model chooses the handoff, before it is attempted.
    """
    stand_in: SdkAgent[Any] = SdkAgent(name=route, model=_RemoteStandIn(route))
    options: dict[str, Any] = {
        "tool_name_override": tool_name_override or Transfer(route).tool_name,
        "tool_description_override": description or f"Hand the conversation over to {route}.",
        # the SDK asks for an on_handoff with an input_type; a remote one may do without
        "on_handoff": on_handoff or (_ignored if input_type is not None else None),
        "input_filter": input_filter,
    }
    if input_type is not None:
        options["input_type"] = input_type
    base: Handoff[Any, Any] = handoff(stand_in, **options)
    kept = {f.name: getattr(base, f.name) for f in dataclasses.fields(Handoff) if f.init}
    if input_type is None:
        kept.update(input_json_schema=dict(FREE_FORM), strict_json_schema=False)
    remote = RemoteAgent(
        **kept,
        required=tuple(required),
        described=description,
        typed=input_type is not None,
        stand_in=stand_in,
    )
    remote._agent_ref = base._agent_ref
    return remote


def _ignored(_: Any, __: Any) -> None:
    """The `on_handoff` of a remote handoff with an `input_type` and none of its own."""


@dataclass(eq=False)
class AskAgent(FunctionTool):
    """A tool asking the agent behind a route for an answer: `ask_agent("billing")`."""

    route: str = ""
    required: tuple[str, ...] = ()
    described: str | None = None


def ask_agent(
    route: str, *, required: Sequence[str] = (), description: str | None = None
) -> AskAgent:
    """A tool named `ask_<route>`, for an agent's `tools=[…]`: its call delegates to the agent
    behind `route` (`ctx.delegation.ask`) and returns the outcome (state, text, data) as
    the tool's result; the conversation stays with this agent. Its parameters are the edge's
    contract when contracts are on. Under a plain `Runner.run` it answers that it did not
    ask."""

    async def local(_: Any, raw: str) -> str:
        return f"not asked: {route} is a remote agent, asked only when served ({raw})"

    name = "ask_" + Transfer(route).tool_name.removeprefix("transfer_to_")
    return AskAgent(
        name=name,
        description=description or f"Ask {route} for an answer; the conversation stays with you.",
        params_json_schema=dict(FREE_FORM),
        on_invoke_tool=local,
        strict_json_schema=False,
        route=route,
        required=tuple(required),
        described=description,
    )


class _RemoteStandIn(Model):
    """The model of the agent a plain run's remote handoff reaches: it answers, without any
    call, where the conversation would go."""

    def __init__(self, route: str) -> None:
        self.route = route

    def _said(self) -> ResponseOutputMessage:
        text = ResponseOutputText(
            type="output_text", text=remote_result(self.route), annotations=[]
        )
        return ResponseOutputMessage(
            id="msg_remote", type="message", role="assistant", status="completed", content=[text]
        )

    async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
        return ModelResponse(output=[self._said()], usage=Usage(), response_id=None)

    async def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        response = Response(
            id="resp_remote",
            created_at=0,
            model="remote",
            object="response",
            output=[self._said()],
            parallel_tool_calls=False,
            tool_choice="none",
            tools=[],
        )
        yield ResponseCompletedEvent(
            type="response.completed", response=response, sequence_number=0
        )
