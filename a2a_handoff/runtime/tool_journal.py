"""Keyed MCP tool calls in the task's journal: a call that completed is not made again.

A handler's `ctx.tools.call(..., idempotency_key=K)` is recorded, once it completed, in the
task's metadata (`metadata[URI].toolCalls[K]`: the server, the tool, a digest of the
arguments, and the result or the tool's error), written with a status event and committed
before the handler sees the result. A handler run again on the same task — a resumed one
after a crash (`agent.resumes`), or a later step — that makes the call with the same key
gets the recorded answer back instead of calling again. The same key for another server,
tool or arguments is an error (`kind="replayed"`): a key names one call.

Why the task's metadata and not a table of its own: it is written in the same transaction
as the step's events, by every store backend as it is (SQLite, PostgreSQL, Redis, memory),
lives and goes with its task, and a replica that takes the task over reads it with the task.
The cost: the task's owner sees it (GetTask), as it sees the task's history — the caller
the handler works for. A result larger than `MAX_RESULT_BYTES` is recorded without its
content; calling again with its key then raises (`kind="replayed"`), saying so.

A call is made at least once: a crash between its completion and the commit of its record
makes it again on the next run, with the same key — which the server receives (`_meta`), so
a server that honours keys still executes it once. Unkeyed calls are neither recorded nor
retried.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any, Protocol

from a2a_handoff.client.mcp_tools import McpTools
from a2a_handoff.errors import ToolCallError
from a2a_handoff.failpoints import pausepoint
from a2a_handoff.protocol.extension import HANDOFF_EXTENSION_URI, ext_metadata, with_ext_metadata
from a2a_handoff.protocol.mcp_result import ToolResult
from a2a_handoff.protocol.models import StreamResponse, Task
from a2a_handoff.protocol.steps import status_event
from a2a_handoff.runtime.journal import Journal

TOOL_CALLS = "toolCalls"
MAX_RESULT_BYTES = 64 * 1024
MAX_KEY_LENGTH = 200


class Caller(Protocol):
    """What a keyed call needs from the run it belongs to (`runtime.run.TaskRun`)."""

    journal: Journal

    @property
    def tools(self) -> McpTools | None: ...

    def speak(self) -> None: ...

    def emit(self, task: Task, item: StreamResponse) -> None: ...


def _digest(server: str, tool: str, args: Mapping[str, Any]) -> str:
    text = json.dumps([server, tool, args], sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


class RunTools:
    """A run's tool calls as its handler makes them (`ctx.tools`): the run's
    `task_port.ToolPort`."""

    def __init__(self, run: Caller) -> None:
        self.run = run

    async def call_tool(
        self, server: str, tool: str, args: Mapping[str, Any] | None, key: str | None
    ) -> ToolResult:
        """The recorded answer of a keyed call made before, or the call made now (and,
        keyed, recorded before it is returned)."""
        run = self.run
        tools = run.tools
        if tools is None:
            raise ToolCallError(
                "this agent has no MCP servers: configure them (ToolsConfig(mcp={NAME: URL}),"
                " or --mcp NAME=URL)",
                kind="unknown_server",
                server=server,
                tool=tool,
            )
        args = dict(args or {})
        if key is not None and (not key or len(key) > MAX_KEY_LENGTH):
            raise ValueError(f"idempotency_key: 1 to {MAX_KEY_LENGTH} characters, not {key!r}")
        digest = _digest(server, tool, args)
        if key is not None:
            entry = (ext_metadata(run.journal.task).get(TOOL_CALLS) or {}).get(key)
            if isinstance(entry, dict):
                return _replay(entry, key, server, tool, digest)
        try:
            result = await tools.call(server, tool, args, idempotency_key=key)
        except ToolCallError as exc:
            if key is not None and exc.kind == "tool_error":
                await _record(
                    run, key, {"server": server, "tool": tool, "digest": digest, "error": str(exc)}
                )
            raise
        if key is not None:
            kept = result.to_json()
            size = len(json.dumps(kept, separators=(",", ":"), default=str))
            if size > MAX_RESULT_BYTES:
                kept = {"omitted": size}
            await _record(run, key, {"server": server, "tool": tool, "digest": digest, **kept})
        return result


def _replay(entry: dict[str, Any], key: str, server: str, tool: str, digest: str) -> ToolResult:
    """The recorded answer of call `key` (its error raised again)."""
    if entry.get("digest") != digest:
        raise ToolCallError(
            f"idempotency key {key!r} was used before for another call"
            f" ({entry.get('server')}/{entry.get('tool')} with other arguments)",
            kind="replayed",
            server=server,
            tool=tool,
        )
    if "error" in entry:
        raise ToolCallError(str(entry["error"]), kind="tool_error", server=server, tool=tool)
    if "omitted" in entry:
        raise ToolCallError(
            f"{server}/{tool} with key {key!r} was called before, and its result"
            f" ({entry['omitted']} bytes) was too large to keep: it is not called again",
            kind="replayed",
            server=server,
            tool=tool,
        )
    return ToolResult.from_json(entry)


async def _record(run: Caller, key: str, entry: dict[str, Any]) -> None:
    """Add the call to the task's metadata and wait until the store has it."""
    await pausepoint("tool.before_record")
    run.speak()
    task = run.journal.task
    calls = dict(ext_metadata(task).get(TOOL_CALLS) or {})
    calls[key] = entry
    task = with_ext_metadata(task, **{TOOL_CALLS: calls})
    note = {"toolCall": {"key": key, "server": entry["server"], "tool": entry["tool"]}}
    run.emit(task, status_event(task, {HANDOFF_EXTENSION_URI: note}))
    await run.journal.drain()
