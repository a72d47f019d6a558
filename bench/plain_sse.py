"""The reference for a stream's time to its first event: a plain Starlette SSE endpoint.

    python bench/plain_sse.py --port P

`POST /` with a JSON-RPC request (`SendStreamingMessage`) answers one SSE event, through
sse-starlette's `EventSourceResponse`: a JSON-RPC result carrying a COMPLETED task that
echoes the message, with the request's id. No store, no durability, no validation beyond
the JSON itself: what any Starlette SSE endpoint costs before it does its own work. Served
by uvicorn as our server and `sdk_echo.py` are (uvloop and httptools when installed).
"""

from __future__ import annotations

import argparse
import json
import uuid
from collections.abc import AsyncIterator

import uvicorn
from sse_starlette import EventSourceResponse
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.routing import Route


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

    async def events() -> AsyncIterator[dict[str, str]]:
        yield {
            "data": json.dumps({"jsonrpc": "2.0", "id": call.get("id"), "result": {"task": task}})
        }

    return EventSourceResponse(events())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    app = Starlette(routes=[Route("/", rpc, methods=["POST"])])
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
