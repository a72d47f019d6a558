"""The conversation an adapter gives its framework: the task's turns as `LLMAgent` sees them
(`llm.chat.build_chat`, without instructions: the framework's agent has its own), always with
a user turn — a task handed over starts with a system note only, which some providers
reject, so the handoff's own message (what the user asked, as the source passed it on) is
given as the user's turn."""

from __future__ import annotations

from typing import Any

from a2a_handoff.agent import TaskContext
from a2a_handoff.llm.chat import build_chat

__all__ = ["conversation"]


def conversation(ctx: TaskContext) -> list[dict[str, Any]]:
    """The task's turns, ending with a user turn whenever the task has none of its own."""
    chat = build_chat("", ctx)[1:]
    if any(turn["role"] == "user" for turn in chat):
        return chat
    first = ctx.history[0].text.strip() if ctx.history else ""
    asked = first or ctx.text.strip() or str(ctx.transfer_context.get("summary") or "")
    chat.append({"role": "user", "content": asked or "(handed over without a message)"})
    return chat
