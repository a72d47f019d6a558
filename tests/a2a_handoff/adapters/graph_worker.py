"""A LangGraph graph whose first node does work and whose second waits (run as a process).

python -m tests.a2a_handoff.adapters.graph_worker worker --port P --store URL
    --work-log FILE --hold FILE

`pay` appends a line to the work log (not keyed: a node run twice would log twice); `settle`
says so and waits while the hold file exists — a moment to kill the agent in, after the
checkpoint that follows `pay` — then answers.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import Any

import uvicorn
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

from a2a_handoff import build_card, create_app, open_store
from a2a_handoff.adapters.langgraph import from_langgraph, task_context


class Work(TypedDict, total=False):
    text: str
    paid: str
    answer: str


def build(work_log: Path, hold: Path) -> StateGraph[Any]:
    async def pay(state: Work) -> dict[str, Any]:
        line = f"{task_context().task_id} {state.get('text', '')}\n"
        with work_log.open("a") as log:
            log.write(line)
        return {"paid": "yes"}

    async def settle(state: Work) -> dict[str, Any]:
        await task_context().status("settling")
        while hold.exists():  # noqa: ASYNC110, ASYNC240 - a file the test removes
            await asyncio.sleep(0.05)
        return {"answer": f"paid: {state.get('paid')}"}

    builder = StateGraph(Work)
    builder.add_node("pay", pay)
    builder.add_node("settle", settle)
    builder.add_edge(START, "pay")
    builder.add_edge("pay", "settle")
    builder.add_edge("settle", END)
    return builder


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("name")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--store", required=True)
    parser.add_argument("--work-log", type=Path, required=True)
    parser.add_argument("--hold", type=Path, required=True)
    args = parser.parse_args()
    url = f"http://127.0.0.1:{args.port}/"
    agent = from_langgraph(build(args.work_log, args.hold), checkpoints=args.store)
    app = create_app(agent, build_card(args.name, url), open_store(args.store))
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")
    return 0


if __name__ == "__main__":
    sys.exit(main())
