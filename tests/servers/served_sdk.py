"""An OpenAI Agents SDK agent for `python -m a2a_handoff serve tests.servers.served_sdk:helper`:
its model at $SERVED_LLM_URL (the tests' chat-completions server)."""

from __future__ import annotations

import os

from agents import Agent, OpenAIChatCompletionsModel
from openai import AsyncOpenAI

client = AsyncOpenAI(
    base_url=os.environ.get("SERVED_LLM_URL", "http://127.0.0.1:1/v1"), api_key="local"
)
helper = Agent(
    name="helper",
    instructions="Answer briefly.",
    model=OpenAIChatCompletionsModel("scripted", client),
)
