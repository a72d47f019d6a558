"""A small MCP server for the tests of `ctx.tools.call` (run as a process, official `mcp` SDK).

python -m tests.mcp_tool_server --port P --counts FILE [--json]

Streamable HTTP at `/mcp` on 127.0.0.1. Tools: `add` (a sum, structured), `fail` (answers
`isError` with its reason), `sleep` (answers after `seconds`), and `count`: each execution
appends a line (its idempotency key, or `-`) to FILE, so the tests count them across
restarts. A `count` whose key (`_meta["a2a-handoff/idempotencyKey"]`) is in FILE already
answers without executing again, as a server that honours keys does; `hold` seconds make it
wait after counting (a call to kill the server in). The first request of a `count` with a
`lose` argument executes, but its answer is lost: the client gets HTTP 502, as through a
proxy whose upstream connection broke. `blob` answers `size` bytes of text (a hostile
server's answer); `--json` answers calls with JSON bodies rather than event streams.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path
from typing import Any

import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from starlette.types import ASGIApp, Message, Receive, Scope, Send

KEY = "a2a-handoff/idempotencyKey"


def counted(counts: Path, key: str) -> bool:
    """Count an execution of `key` ('' for none); False if the key was counted before."""
    if key and counts.exists() and key in counts.read_text().split():
        return False
    with counts.open("a") as file:
        file.write((key or "-") + "\n")
    return True


def build(counts: Path) -> MCPServer:
    server = MCPServer("tools")

    @server.tool()
    def add(a: int, b: int) -> dict[str, int]:
        """a + b."""
        return {"sum": a + b}

    @server.tool()
    def fail(reason: str) -> str:
        """Fails with `reason` (an isError result)."""
        raise ToolError(reason)

    @server.tool()
    async def sleep(seconds: float) -> str:
        """Answers after `seconds`."""
        await asyncio.sleep(seconds)
        return f"slept {seconds:g} s"

    @server.tool()
    def blob(size: int) -> str:
        """`size` bytes of text."""
        return "x" * size

    @server.tool()
    async def count(ctx: Context, hold: float = 0.0, lose: str = "") -> str:
        """Counts one execution per idempotency key (every call without one)."""
        meta: Any = ctx.request_context.meta or {}
        key = str(meta.get(KEY) or "")
        if not counted(counts, key):
            return f"done before ({key})"
        await asyncio.sleep(hold)
        return f"counted ({key or 'no key'})"

    return server


class LoseFirstAnswer:
    """Runs the first request of a call with a `lose` argument, then answers 502 instead."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.lost: set[str] = set()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        lose = _lose(body)
        replayed = False

        async def again() -> Message:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        if not lose or lose in self.lost:
            await self.app(scope, again, send)
            return
        self.lost.add(lose)

        async def swallow(message: Message) -> None:
            pass

        await self.app(scope, again, swallow)
        await send({"type": "http.response.start", "status": 502, "headers": []})
        await send({"type": "http.response.body", "body": b"upstream connection lost"})


def _lose(body: bytes) -> str:
    try:
        return str(json.loads(body)["params"]["arguments"].get("lose") or "")
    except (ValueError, KeyError, TypeError, AttributeError):
        return ""


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--counts", type=Path, required=True)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    app = LoseFirstAnswer(build(args.counts).streamable_http_app(json_response=args.json))
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")
