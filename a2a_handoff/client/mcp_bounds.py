"""A bound on what an MCP server may answer: a body over `MAX_ANSWER_BYTES` is cut off.

The SDK bounds each server-sent event (`max_sse_event_size`); a server answering a call
with plain JSON is read whole, so a hostile or broken one could make the agent hold any
amount. This transport counts the bytes of every response that is not an event stream and
fails it past the bound — the SDK then answers the call with a JSON-RPC error (not retried:
the server did answer), which the caller raises as `ToolCallError(kind="refused")`.
Imported with the `mcp` extra only (`client.mcp_tools` imports it lazily).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx2

MAX_ANSWER_BYTES = 4 * 1024 * 1024
"""The most an MCP server's answer may weigh: one JSON body, or one server-sent event."""


class AnswerTooLarge(httpx2.StreamError):
    """The server's answer went past `MAX_ANSWER_BYTES`."""


class _Counted(httpx2.AsyncByteStream):
    def __init__(self, inner: httpx2.AsyncByteStream, limit: int) -> None:
        self.inner = inner
        self.limit = limit

    async def __aiter__(self) -> AsyncIterator[bytes]:
        seen = 0
        async for chunk in self.inner:
            seen += len(chunk)
            if seen > self.limit:
                raise AnswerTooLarge(f"the server's answer is over {self.limit} bytes")
            yield chunk

    async def aclose(self) -> None:
        await self.inner.aclose()


class BoundedTransport(httpx2.AsyncBaseTransport):
    """An HTTP transport whose non-stream response bodies stop at `limit` bytes."""

    def __init__(self, limit: int = MAX_ANSWER_BYTES) -> None:
        self.inner = httpx2.AsyncHTTPTransport()
        self.limit = limit

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await self.inner.handle_async_request(request)
        if response.headers.get("content-type", "").startswith("text/event-stream"):
            return response  # bounded per event by the SDK
        stream = response.stream
        assert isinstance(stream, httpx2.AsyncByteStream)
        return httpx2.Response(
            response.status_code,
            headers=response.headers,
            stream=_Counted(stream, self.limit),
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await self.inner.aclose()
