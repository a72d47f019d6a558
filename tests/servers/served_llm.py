"""An `LLMAgent` for `python -m a2a_handoff serve tests.servers.served_llm:assistant`: its model
at $SERVED_LLM_URL (the tests' chat-completions server)."""

from __future__ import annotations

import os

from a2a_handoff.llm import LLMAgent

assistant = LLMAgent(
    name="assistant",
    model="scripted",
    base_url=os.environ.get("SERVED_LLM_URL", "http://127.0.0.1:1/v1"),
    instructions="Answer briefly.",
)
