"""A LangGraph graph for `python -m a2a_handoff serve tests.servers.served_graph:graph`: one
node, no model — it answers with the text it was given, in capitals."""

from __future__ import annotations

from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict


class Said(TypedDict, total=False):
    text: str
    answer: str


async def shout(state: Said) -> Said:
    return {"answer": state.get("text", "").upper()}


graph: StateGraph[Said] = StateGraph(Said)
graph.add_node("shout", shout)
graph.add_edge(START, "shout")
graph.add_edge("shout", END)
