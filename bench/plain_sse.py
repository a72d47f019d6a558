"""The reference for a stream's time to its first event: a plain Starlette SSE endpoint.

    python bench/plain_sse.py --port P [--durable FILE]

`POST /` with a JSON-RPC request (`SendStreamingMessage`) answers one SSE event, through
sse-starlette's `EventSourceResponse`: a JSON-RPC result carrying a COMPLETED task that
echoes the message, with the request's id. No store, no durability, no validation beyond
the JSON itself: what any Starlette SSE endpoint costs before it does its own work. Served
by uvicorn as our server and `sdk_echo.py` are (uvloop and httptools when installed).

`--durable FILE`: the floor of a stream whose first event is durable. Before the event,
the task is inserted into a SQLite file (WAL, `synchronous=FULL`) and committed, on the
loop's thread, as our store commits a lone write: one row and one fsync, nothing else.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import uuid
from collections.abc import AsyncIterator

import uvicorn
from sse_starlette import EventSourceResponse
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.routing import Route

_durable: sqlite3.Connection | None = None


def _open(path: str) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute("CREATE TABLE IF NOT EXISTS tasks (id TEXT PRIMARY KEY, body TEXT NOT NULL)")
    return conn


async def rpc(request: Request) -> EventSourceResponse:
    call = await request.json()
    message = call["params"]["message"]
    task = {
        "id": uuid.uuid4().hex,
        "contextId": uuid.uuid4().hex,
        "status": {"state": "TASK_STATE_COMPLETED"},
        "artifacts": [{"artifactId": uuid.uuid4().hex, "parts": message["parts"]}],
        "history": [message],
    }

    if _durable is not None:
        _durable.execute("BEGIN IMMEDIATE")
        _durable.execute("INSERT INTO tasks VALUES (?, ?)", (task["id"], json.dumps(task)))
        _durable.execute("COMMIT")

    async def events() -> AsyncIterator[dict[str, str]]:
        yield {
            "data": json.dumps({"jsonrpc": "2.0", "id": call.get("id"), "result": {"task": task}})
        }

    return EventSourceResponse(events())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--durable", metavar="FILE", help="commit each task here first")
    args = parser.parse_args()
    if args.durable:
        global _durable
        _durable = _open(args.durable)
    app = Starlette(routes=[Route("/", rpc, methods=["POST"])])
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
