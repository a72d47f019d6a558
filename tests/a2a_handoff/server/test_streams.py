"""The SSE writer: frames in order, keep-alive pings, and a gone client stops the stream."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from a2a_handoff.protocol.sse import PING, frame
from a2a_handoff.server._streams import SseResponse

pytestmark = pytest.mark.anyio


class Client:
    """The ASGI side of one connection: records what was sent, disconnects on demand."""

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []
        self.gone = asyncio.Event()

    async def receive(self) -> dict[str, Any]:
        await self.gone.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: dict[str, Any]) -> None:
        self.sent.append(message)

    def body(self) -> bytes:
        return b"".join(m.get("body", b"") for m in self.sent[1:])


async def test_frames_are_sent_in_order_and_the_stream_closes() -> None:
    async def frames() -> AsyncIterator[bytes]:
        for i in range(1, 4):
            yield frame(f'{{"n":{i}}}', i)

    client = Client()
    await SseResponse(frames())({"type": "http"}, client.receive, client.send)
    start = client.sent[0]
    assert start["status"] == 200
    headers = dict(start["headers"])
    assert headers[b"content-type"].startswith(b"text/event-stream")
    assert b"content-length" not in headers
    assert (
        client.body() == b'id: 1\ndata: {"n":1}\n\nid: 2\ndata: {"n":2}\n\nid: 3\ndata: {"n":3}\n\n'
    )
    assert client.sent[-1] == {"type": "http.response.body", "body": b"", "more_body": False}


async def test_a_quiet_stream_is_pinged() -> None:
    async def frames() -> AsyncIterator[bytes]:
        await asyncio.sleep(0.35)
        yield frame("{}", 1)

    client = Client()
    await SseResponse(frames(), ping=0.1)({"type": "http"}, client.receive, client.send)
    body = client.body()
    assert body.count(PING) >= 2
    assert body.endswith(b"id: 1\ndata: {}\n\n")


async def test_a_gone_client_stops_the_stream_and_closes_the_frames() -> None:
    closed = asyncio.Event()

    async def frames() -> AsyncIterator[bytes]:
        try:
            yield frame("{}", 1)
            await asyncio.sleep(3600)  # a subscriber waiting for events that never come
            yield frame("{}", 2)
        finally:
            closed.set()

    client = Client()
    stream = asyncio.create_task(
        SseResponse(frames())({"type": "http"}, client.receive, client.send)
    )
    await asyncio.sleep(0.05)
    client.gone.set()
    await asyncio.wait_for(stream, 2)
    assert closed.is_set()
    assert not stream.cancelled()
    assert client.body() == b"id: 1\ndata: {}\n\n"


async def test_a_server_side_cancel_is_not_swallowed() -> None:
    async def frames() -> AsyncIterator[bytes]:
        await asyncio.sleep(3600)
        yield b""

    client = Client()
    stream = asyncio.create_task(
        SseResponse(frames())({"type": "http"}, client.receive, client.send)
    )
    await asyncio.sleep(0.05)
    stream.cancel()
    with pytest.raises(asyncio.CancelledError):
        await stream
