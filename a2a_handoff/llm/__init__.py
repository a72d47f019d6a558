"""Language-model agents: an `LLMAgent` is declared — a model, instructions, handoff routes,
tools — and runs as any agent does (`create_app(agent, card, store, handoff=…)`).

Needs the `llm` extra (`pip install '.[llm]'` in the a2a-handoff clone: the official `openai`
client), against any OpenAI-compatible chat-completions endpoint: OpenAI, Azure, vLLM, Ollama, the
llama.cpp server, a LiteLLM proxy.
"""

from __future__ import annotations

from a2a_handoff.llm.llm_agent import ESCALATE_TOOL, LLMAgent, Transfer
from a2a_handoff.llm.model import BASE_URL_ENV, MODEL_ENV, Model, ToolCall, Turn
from a2a_handoff.llm.tools import FunctionTool, function_tool, tool

__all__ = [
    "BASE_URL_ENV",
    "ESCALATE_TOOL",
    "MODEL_ENV",
    "FunctionTool",
    "LLMAgent",
    "Model",
    "ToolCall",
    "Transfer",
    "Turn",
    "function_tool",
    "tool",
]
