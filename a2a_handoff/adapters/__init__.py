"""Agents written with other frameworks, served as A2A agents with durable handoffs.

- `a2a_handoff.adapters.openai_agents` (`pip install 'a2a-handoff[agents]'`): an OpenAI
  Agents SDK `Agent`;
- `a2a_handoff.adapters.langgraph` (`pip install 'a2a-handoff[langgraph]'`): a LangGraph
  graph.

Each module imports its framework; this package imports neither until one of its names is
used (`from a2a_handoff.adapters import from_langgraph` loads LangGraph only), and
`import a2a_handoff` imports no adapter.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from a2a_handoff.adapters.langgraph import (
        LangGraphAgent,
        ask_tool,
        end_step,
        from_langgraph,
        handoff_tool,
        task_context,
    )
    from a2a_handoff.adapters.openai_agents import (
        A2ARunContext,
        AgentsSdkAgent,
        a2a_context,
        ask_agent,
        ask_user,
        from_agents_sdk,
        remote_agent,
        remote_result,
    )

# Each name, and the adapter module (and so the framework) that importing it loads.
_FROM = {
    **dict.fromkeys(
        (
            "A2ARunContext",
            "AgentsSdkAgent",
            "a2a_context",
            "ask_agent",
            "ask_user",
            "from_agents_sdk",
            "remote_agent",
            "remote_result",
        ),
        "openai_agents",
    ),
    **dict.fromkeys(
        (
            "LangGraphAgent",
            "ask_tool",
            "end_step",
            "from_langgraph",
            "handoff_tool",
            "task_context",
        ),
        "langgraph",
    ),
}

__all__ = [
    "A2ARunContext",
    "AgentsSdkAgent",
    "LangGraphAgent",
    "a2a_context",
    "ask_agent",
    "ask_tool",
    "ask_user",
    "end_step",
    "from_agents_sdk",
    "from_langgraph",
    "handoff_tool",
    "remote_agent",
    "remote_result",
    "task_context",
]


def __getattr__(name: str) -> Any:
    module = _FROM.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value
