"""The chat a model sees, rebuilt from the stored task every step — never kept in memory.

    system:     the agent's instructions
    (handed over) the earlier turns the transfer context carries (`history`, when the edge's
                contract lets it: `full` or `last_k`), then a system note: who handed the
                conversation over, why, and what it passed along
    (returned)  a system note with the operator's decision, after an escalation
    user/assistant: the task's messages in order (the user's, and the agent's: status notes
                and the answers that ended earlier steps)

A follow-up on the same task (INPUT_REQUIRED, then the user's answer) continues the same chat;
so does a restarted process, since all of it is in the store.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from a2a_handoff.agent import TaskContext
from a2a_handoff.handoff.envelope import HandoffEnvelope
from a2a_handoff.protocol.extension import HANDOFF_EXTENSION_URI
from a2a_handoff.protocol.models import Message, Role

HISTORY_KEY = "history"  # the earlier turns, in a transfer context
MAX_TURNS = 40  # turns carried over at most
MAX_TURN_CHARS = 2000  # characters of one carried turn at most
MAX_CHARS = 24_000  # characters of all carried turns at most: well within an envelope
LAST_K = 6  # turns carried by the `last_k` strategy


def build_chat(instructions: str, ctx: TaskContext) -> list[dict[str, Any]]:
    """The messages for the model's next call in this step."""
    chat: list[dict[str, Any]] = [{"role": "system", "content": instructions}]
    history = ctx.history
    envelope = _envelope_of(history[0]) if history else None
    if envelope is not None:
        context = dict(ctx.transfer_context)
        chat += carried_turns(context.pop(HISTORY_KEY, None))
        what = json.dumps(context, default=str, ensure_ascii=False)
        chat.append(
            {
                "role": "system",
                "content": f"This conversation was handed over to you by {envelope.source.agent}"
                f" (reason: {envelope.reason}). What it passed along: {what}",
            }
        )
        history = history[1:]
    decision = ctx.decision
    if decision is not None:
        said = f": {decision.text}" if decision.text else ""
        chat.append(
            {
                "role": "system",
                "content": f"An operator answered the escalation: {decision.verdict}"
                f" (by {decision.by}){said}",
            }
        )
    for message in history:
        text = message.text.strip()
        if text:
            role = "user" if message.role is Role.USER else "assistant"
            chat.append({"role": role, "content": text})
    return chat


def handed_over_by(ctx: TaskContext) -> str | None:
    """The agent that handed this task's conversation over (None: it started here)."""
    history = ctx.history
    envelope = _envelope_of(history[0]) if history else None
    return envelope.source.agent if envelope is not None else None


def transcript(chat: Sequence[Mapping[str, Any]], strategy: str | None) -> list[dict[str, str]]:
    """The turns a successor may see, by the edge's history strategy: all of them (`full`),
    the last few (`last_k`), or none (`summary`, `pointer`, none given: the model's summary
    says what matters)."""
    if strategy not in ("full", "last_k"):
        return []
    turns = [
        {"role": str(m["role"]), "content": str(m["content"])[:MAX_TURN_CHARS]}
        for m in chat
        if m.get("role") in ("user", "assistant") and isinstance(m.get("content"), str)
    ]
    turns = turns[-(LAST_K if strategy == "last_k" else MAX_TURNS) :]
    while sum(len(t["content"]) for t in turns) > MAX_CHARS:
        turns.pop(0)  # the oldest go first
    return turns


def carried_turns(value: Any) -> list[dict[str, Any]]:
    """The earlier turns a transfer context carries, checked (anything else is left out)."""
    if not isinstance(value, list):
        return []
    turns = []
    for item in value[-MAX_TURNS:]:
        if (
            isinstance(item, Mapping)
            and item.get("role") in ("user", "assistant")
            and isinstance(item.get("content"), str)
        ):
            turns.append({"role": item["role"], "content": item["content"][:MAX_TURN_CHARS]})
    return turns


def _envelope_of(message: Message) -> HandoffEnvelope | None:
    carried = (message.metadata or {}).get(HANDOFF_EXTENSION_URI)
    if not isinstance(carried, dict) or "handoffId" not in carried:
        return None
    try:
        return HandoffEnvelope.model_validate(carried)
    except ValueError:
        return None
