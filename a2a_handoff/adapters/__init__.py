"""Agents written with other frameworks, served as A2A agents with durable handoffs.

- `a2a_handoff.adapters.openai_agents` (`pip install 'a2a-handoff[agents]'`): an OpenAI
  Agents SDK `Agent`;
- `a2a_handoff.adapters.langgraph` (`pip install 'a2a-handoff[langgraph]'`): a LangGraph
  graph.

Each module imports its framework; this package imports neither, and `import a2a_handoff`
imports no adapter.
"""
