"""Transfer tools: a handoff route offered to a model as a `transfer_to_<route>` tool.

Shared by every model-driven agent (`LLMAgent`, and the framework adapters in
`a2a_handoff.adapters`): the tool's description is the target's card, its parameters the
edge's contract (the payload schema and its required keys) when contracts are on, else
`reason`, `summary`, `entities`; a call becomes a `Handoff` whose context is the model's
arguments and — as the contract's `history_strategy` lets them — the earlier turns. What a
refusal says back to the model is worded here too, so every agent says it alike.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from a2a_handoff.agent import Route, TaskContext
from a2a_handoff.errors import GateRefused
from a2a_handoff.llm.chat import HISTORY_KEY, transcript
from a2a_handoff.outcomes import Handoff

__all__ = [
    "FREE_FORM",
    "HandoffTool",
    "Transfer",
    "handoff_decision",
    "handoff_tools",
    "refused",
    "tool_spec",
]

FREE_FORM = {
    "type": "object",
    "properties": {
        "reason": {"type": "string", "description": "why this agent should take over"},
        "summary": {"type": "string", "description": "what the next agent needs to know"},
        "entities": {"type": "object", "description": "ids, amounts, names found so far"},
    },
    "required": ["reason", "summary"],
}


@dataclass(frozen=True, slots=True)
class Transfer:
    """A handoff route offered to the model, with the capabilities the target must offer."""

    route: str
    required: tuple[str, ...] = ()
    description: str | None = None

    @property
    def tool_name(self) -> str:
        return "transfer_to_" + re.sub(r"[^A-Za-z0-9_-]", "_", self.route)


@dataclass(frozen=True, slots=True)
class HandoffTool:
    """A transfer tool for one route: the route (card, contract) and the tool's spec."""

    transfer: Transfer
    route: Route
    spec: dict[str, Any]

    @property
    def name(self) -> str:
        return self.transfer.tool_name

    @property
    def description(self) -> str:
        return str(self.spec["function"]["description"])

    @property
    def parameters(self) -> dict[str, Any]:
        return dict(self.spec["function"]["parameters"])


def tool_spec(name: str, description: str, parameters: Mapping[str, Any]) -> dict[str, Any]:
    """A tool as the chat-completions API declares it."""
    return {
        "type": "function",
        "function": {"name": name, "description": description, "parameters": dict(parameters)},
    }


async def handoff_tools(ctx: TaskContext, transfers: Sequence[Transfer]) -> dict[str, HandoffTool]:
    """The transfer tools of the routes this agent has (a route not configured here is not
    offered), by tool name."""
    tools = {}
    for transfer in transfers:
        try:
            route = await ctx.handoffs.route(transfer.route)
        except GateRefused:
            continue
        parameters = FREE_FORM
        contract = route.contract
        path = contract.schema_path() if contract is not None else None
        if contract is not None and path is not None and path.is_file():
            parameters = json.loads(path.read_text())
            for key in ("$schema", "title", "$id"):
                parameters.pop(key, None)
            required = [*parameters.get("required", [])]
            required += [k for k in contract.payload.required if k not in required]
            parameters["required"] = required
        description = transfer.description or describe(route)
        tools[transfer.tool_name] = HandoffTool(
            transfer, route, tool_spec(transfer.tool_name, description, parameters)
        )
    return tools


def handoff_decision(
    tool: HandoffTool, arguments: Mapping[str, Any], chat: Sequence[Mapping[str, Any]]
) -> Handoff:
    """The handoff a transfer tool's call asks for. `chat`: the turns so far (role and
    content), of which the edge's contract decides what travels (`full`, `last_k`; none
    without a contract, or under `summary` and `pointer`)."""
    contract = tool.route.contract
    if contract is None:
        reason = str(arguments.get("reason") or f"handed over to {tool.route.name}")
        context: dict[str, Any] = {
            "summary": str(arguments.get("summary") or reason),
            "entities": arguments.get("entities") or {},
        }
    else:
        context = dict(arguments)
        reason = str(arguments.get("summary") or f"handed over to {tool.route.name}")
        turns = transcript(chat, contract.payload.history_strategy)
        if turns:
            context[HISTORY_KEY] = turns
    return Handoff(
        target=tool.route.name,
        reason=reason[:500],
        context=context,
        required=tool.transfer.required,
    )


def refused(reason: str) -> str:
    """What a refused transfer (or escalation) says back to the model."""
    return f"refused: {reason}. Choose again: correct the arguments, pick another tool, or answer."


def describe(route: Route) -> str:
    """A transfer tool's description: the target's card (its description and skills)."""
    card = route.card
    if card is None:
        return f"Hand the conversation over to the agent {route.name}."
    skills = "; ".join(f"{s.name}: {s.description}" for s in card.skills or [])
    text = f"Hand the conversation over to {card.name}: {card.description}."
    return f"{text} Skills: {skills}." if skills else text
