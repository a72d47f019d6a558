"""A test agent whose handler calls MCP tools (run as a process).

python -m tests.integration.tool_agent tools --port P --store URL --mcp NAME=URL …
    [--mcp-timeout S] [--hold FILE]

A message is a JSON call: `{"server": …, "tool": …, "args": {…}, "key": …}` (`key`: the
idempotency key, optional). The handler makes it with `ctx.tools.call` and completes with
an artifact holding the result's text and structured content; a `ToolCallError` it does
not catch fails the task with its message. A list of calls is made in order, each
`ToolCallError` caught: the artifact's data lists each outcome (`{"text"}` or `{"error",
"kind"}`). With `--hold FILE`, after the call the handler
says "called" (a WORKING status) and waits while FILE exists — a moment to kill the agent
in. The agent resumes the tasks a killed process left running (`resumes = True`). `--mcp`
is mapped to the config as the example agents map it (`servers.__main__.mcp_tools`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path

import uvicorn

from a2a_handoff import TaskContext, TrustConfig, build_card, create_app, open_store
from a2a_handoff.errors import ToolCallError
from a2a_handoff.trust.keys import KeyFile
from servers.__main__ import mcp_tools


class ToolAgent:
    resumes = True  # its calls are journaled: a handler run again does not call again

    def __init__(self, hold: Path | None) -> None:
        self.hold = hold

    async def handle(self, ctx: TaskContext) -> None:
        call = json.loads(ctx.text)
        if isinstance(call, list):
            outcomes: list[dict[str, str]] = []
            for one in call:
                try:
                    made = await ctx.tools.call(
                        one["server"], one["tool"], one.get("args"), idempotency_key=one.get("key")
                    )
                    outcomes.append({"text": made.text})
                except ToolCallError as exc:
                    outcomes.append({"error": str(exc), "kind": exc.kind})
            await ctx.artifact(data=outcomes, name="results")
            return
        result = await ctx.tools.call(
            call["server"], call["tool"], call.get("args"), idempotency_key=call.get("key")
        )
        if self.hold is not None and self.hold.exists():
            await ctx.status("called")
            while self.hold.exists():  # noqa: ASYNC110 - a file the test removes
                await asyncio.sleep(0.05)
        await ctx.artifact(text=result.text, data=result.structured, name="result")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("name")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--store", required=True)
    parser.add_argument("--mcp", action="append", default=[])
    parser.add_argument("--mcp-timeout", type=float, default=30.0)
    parser.add_argument("--hold", type=Path, default=None)
    parser.add_argument("--key-file", type=Path, default=None)  # on a shared store
    args = parser.parse_args()
    url = f"http://127.0.0.1:{args.port}/"
    app = create_app(
        ToolAgent(args.hold),
        build_card(args.name, url),
        open_store(args.store),
        tools=mcp_tools(args),
        trust=TrustConfig(identity=KeyFile(args.key_file) if args.key_file else None),
    )
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")
