"""Ask tools: a route offered to a model as an `ask_<route>` tool, beside `transfer_to_<route>`.

A transfer gives the conversation away; an ask delegates (`ctx.delegation.ask`): the
target answers a sub-request and the model goes on with the answer as the tool's result.
The parameters are the transfer tool's (the edge's contract governs both), the description
says the difference. The result the model reads is JSON: the sub-task's state, its text (the
answer, the delegate's question, or why it failed) and the data it published — a question
is the model's to relay to its user, or to answer by asking again.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from a2a_handoff.agent import TaskContext
from a2a_handoff.delegated import Delegated
from a2a_handoff.llm.transfer import HandoffTool, handoff_decision

__all__ = ["ask_tools", "asked"]

PREFIX = "ask_"


def ask_tools(transfers: Mapping[str, HandoffTool]) -> dict[str, HandoffTool]:
    """An ask tool beside each transfer tool (`handoff_tools`), by tool name."""
    tools = {}
    for tool in transfers.values():
        name = PREFIX + re.sub(r"[^A-Za-z0-9_-]", "_", tool.transfer.route)
        target = tool.route.card.name if tool.route.card is not None else tool.route.name
        description = (
            f"Ask {target} for an answer and get it back as this tool's result; the"
            f" conversation stays with you (unlike transfer_to_{tool.transfer.route})."
            f" {tool.description}"
        )
        spec = {
            "type": "function",
            "function": {"name": name, "description": description, "parameters": tool.parameters},
        }
        tools[name] = HandoffTool(tool.transfer, tool.route, spec)
    return tools


async def asked(
    ctx: TaskContext,
    tool: HandoffTool,
    arguments: Mapping[str, Any],
    chat: Sequence[Mapping[str, Any]],
) -> str:
    """Delegate what the model asked through `tool`; the outcome as the tool's result."""
    decision = handoff_decision(tool, arguments, chat)
    context = dict(decision.context)
    text = str(context.pop("summary", "") or decision.reason)
    outcome = await ctx.delegation.ask(
        tool.route.name, text, context=context, required=decision.required, reason=decision.reason
    )
    return told(outcome)


def told(outcome: Delegated) -> str:
    """A delegation's outcome, as the model reads it."""
    said: dict[str, Any] = {"state": outcome.state.name, "text": outcome.text}
    data = outcome.data()
    if data is not None:
        said["data"] = data
    if outcome.omitted:  # too large to keep: the model should not think it has them
        said["omitted"] = [o.get("name") or o.get("artifactId") for o in outcome.omitted]
    if outcome.needs_input:
        said["note"] = f"{outcome.agent} needs an answer to go on: ask the user, or ask again"
    return json.dumps(said, default=str)
