"""The official MCP client (streamable HTTP) against real agents, with or without an API key."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult


@asynccontextmanager
async def mcp_client(url: str, key: str | None = None) -> AsyncIterator[Client]:
    """A connected MCP client of `url` (an agent's `/mcp`), presenting API key `key`."""
    headers = {"X-API-Key": key} if key else {}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=30) as http,
        Client(streamable_http_client(url, http_client=http)) as client,
    ):
        yield client


def structured(result: CallToolResult) -> dict[str, Any]:
    value = result.structured_content
    assert isinstance(value, dict), result
    return value
