"""The routes of a served LangGraph graph as nodes of it: for each route the graph has no node
of its own, a node that hands the task over — reaching it (`Command(goto=<route>)`, from a
node or a `handoff_tool`) interrupts the graph with the handoff, which the adapter turns into
the library's three-phase handoff. The user's graph is never changed: a copy of its builder
gets the nodes and is compiled — a compiled graph's builder with the options it was
compiled with.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from typing import Any

from langgraph.graph import StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Checkpointer, interrupt

from a2a_handoff.llm.transfer import Transfer

__all__ = ["MESSAGES", "REMOTE_KEY", "transfer_arguments", "with_routes"]

REMOTE_KEY = "a2a-handoff:remote"  # in an interrupt's value: a handoff to a route
MESSAGES = "messages"


def with_routes(
    graph: StateGraph[Any] | CompiledStateGraph[Any, Any, Any, Any],
    routes: Sequence[str],
    saver: Checkpointer,
    context_fields: Sequence[str] | None,
    excluded: Sequence[str],
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """`graph` compiled with `saver` and a node for each of `routes` it has none of; a
    handoff carries `context_fields` (default: every channel but `excluded`)."""
    compiled = graph if isinstance(graph, CompiledStateGraph) else None
    builder = compiled.builder if compiled is not None else graph
    assert isinstance(builder, StateGraph)
    missing = [route for route in routes if route not in builder.nodes]
    if compiled is not None and not missing:
        return compiled.copy(update={"checkpointer": saver})
    builder = _copy_of(builder)
    fields = [f for f in context_fields or builder.channels if f not in excluded]
    for route in missing:
        builder.add_node(route, _remote_node(route, fields))
    if compiled is None:
        return builder.compile(checkpointer=saver)
    return builder.compile(
        checkpointer=saver,
        interrupt_before=_nodes(compiled.interrupt_before_nodes),
        interrupt_after=_nodes(compiled.interrupt_after_nodes),
        store=compiled.store,
        cache=compiled.cache,
        debug=compiled.debug,
        name=compiled.name,
    )


def _nodes(names: Sequence[str]) -> Any:
    """A compiled graph's `interrupt_before`/`_after`, as `compile` takes it ("*": all)."""
    return "*" if names == "*" else list(names)


def _copy_of(builder: StateGraph[Any]) -> StateGraph[Any]:
    """A copy of `builder` that nodes can be added to without touching it."""
    copied = copy.copy(builder)
    for name in ("nodes", "edges", "branches", "schemas", "channels", "managed", "waiting_edges"):
        if hasattr(builder, name):
            setattr(copied, name, copy.copy(getattr(builder, name)))
    copied.compiled = False
    return copied


def _remote_node(route: str, fields: Sequence[str]) -> Any:
    """The node standing for the agent behind `route`: reaching it hands the task over, the
    declared fields — and the arguments of a `handoff_tool` call that chose it — as the
    transfer context."""

    async def hand_over(state: Mapping[str, Any]) -> dict[str, Any]:
        context = transfer_arguments(route, state.get(MESSAGES))
        context.update({f: state[f] for f in fields if state.get(f) is not None})
        context = json.loads(json.dumps(context, default=str))  # what travels is JSON
        interrupt({REMOTE_KEY: {"target": route, "context": context}})
        return {}  # not reached: the handoff ends the task

    hand_over.__name__ = f"hand_over_to_{route}"
    return hand_over


def transfer_arguments(route: str, messages: Any) -> dict[str, Any]:
    """The arguments of the handoff tool call to `route` in the last AI message, if any."""
    name = Transfer(route).tool_name
    for message in reversed(messages if isinstance(messages, list) else []):
        if getattr(message, "type", None) != "ai":
            continue
        for call in getattr(message, "tool_calls", None) or []:
            if call.get("name") == name and isinstance(call.get("args"), dict):
                return {k: v for k, v in call["args"].items() if v is not None}
        return {}
    return {}
