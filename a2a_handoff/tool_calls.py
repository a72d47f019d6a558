"""What a handler calls MCP tools through (`ctx.tools`): the servers the agent was configured
with (`ToolsConfig.mcp`, `--mcp NAME=URL`), a keyed call made at most once per task
(docs/tools.md)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from a2a_handoff.protocol.mcp_result import ToolResult
from a2a_handoff.task_port import ToolPort


class ToolCalls:
    """The MCP tools a handler may call (`ctx.tools`)."""

    __slots__ = ("_port",)

    def __init__(self, port: ToolPort) -> None:
        self._port = port

    async def call(
        self,
        server: str,
        tool: str,
        args: Mapping[str, Any] | None = None,
        *,
        idempotency_key: str | None = None,
    ) -> ToolResult:
        """Call `tool` on the MCP server configured as `server`; its result. `ToolCallError`
        when the tool answered `isError` (its text), the server failed, could not be reached
        or gave no answer in time (`ToolsConfig.timeout`), or `server` is not configured.

        With an `idempotency_key` the call is retried on a failed connection (the server
        gets the key in the call's `_meta`), and recorded in the task's journal once it
        completed: made again with the same key on this task — by a handler the agent runs
        again after a restart (`resumes = True`), or in a later step — it answers the
        recorded result (or raises the recorded error) without calling. Without a key the
        call is made once, as it is.
        """
        return await self._port.call_tool(server, tool, args, idempotency_key)
