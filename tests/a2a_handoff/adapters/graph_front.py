"""A front desk written with LangGraph that hands refunds to billing with a plain
`Command(goto="billing")` — "billing" is a route, not a node (run as a process).

python -m tests.a2a_handoff.adapters.graph_front front --port P --store URL --route billing=URL

Its state's declared fields (intent, entities, summary) are the transfer context; anything
else it answers itself, with the graph's answer field.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import uvicorn
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command
from typing_extensions import TypedDict

from a2a_handoff import HandoffConfig, build_card, create_app, open_store
from a2a_handoff.adapters.langgraph import from_langgraph
from servers._text import find_order_id


class Desk(TypedDict, total=False):
    text: str
    intent: str
    entities: dict[str, Any]
    summary: str
    scratch: str  # not a context field: never travels
    answer: str


async def desk(state: Desk) -> Command[Any]:
    text = state.get("text", "")
    if "refund" not in text.lower():
        return Command(goto=END, update={"answer": "I only know where refunds go."})
    order = find_order_id(text)
    return Command(
        goto="billing",  # the agent behind the route: the adapter hands the task over
        update={
            "intent": "refund",
            "entities": {"orderId": order} if order else {},
            "summary": f"Refund asked at the front desk: {text}",
            "scratch": "internal notes",
        },
    )


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("name")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--store", required=True)
    parser.add_argument("--route", action="append", default=[])
    parser.add_argument("--recovery-interval", type=float, default=0.3)
    args = parser.parse_args()
    url = f"http://127.0.0.1:{args.port}/"
    builder = StateGraph(Desk)
    builder.add_node("desk", desk)
    builder.add_edge(START, "desk")
    agent = from_langgraph(
        builder,
        checkpoints=args.store,
        context_fields=("intent", "entities", "summary"),
        required={"billing": ("refunds",)},
    )
    app = create_app(
        agent,
        build_card(args.name, url, description="a front desk drawn as a graph"),
        open_store(args.store),
        handoff=HandoffConfig(
            routes=dict(r.split("=", 1) for r in args.route),
            recovery_interval=args.recovery_interval,
        ),
    )
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")
    return 0


if __name__ == "__main__":
    sys.exit(main())
