"""The SSE writer: frames in order, keep-alive pings, a gone client stops the stream, and a
task stream that fails ends with its binding's error event."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from starlette.requests import Request

from a2a_handoff.errors import TaskNotFoundError
from a2a_handoff.protocol.models import Message, Part, Role, StreamResponse
from a2a_handoff.protocol.sse import PING, frame
from a2a_handoff.server._call import Call
from a2a_handoff.server._jsonrpc import JSON_RPC
from a2a_handoff.server._streams import SseResponse, StreamSlots, sse_answer
from a2a_handoff.server.results import Caller, EventStream, Items

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


def _call() -> tuple[Call, Request]:
    request = Request({"type": "http", "headers": [(b"x-big", b"y" * 1000)]})
    return Call(7, {"message": {"big": "x" * 1000}}, Caller(), request, JSON_RPC), request


def _reply(text: str) -> StreamResponse:
    return StreamResponse(
        message=Message(message_id=text, role=Role.AGENT, parts=[Part(text=text)])
    )


@pytest.mark.parametrize(
    ("failure", "code"), [(TaskNotFoundError("gone"), -32001), (ValueError("bug"), -32603)]
)
async def test_a_failing_task_stream_ends_with_an_error_event(
    failure: Exception, code: int
) -> None:
    closed = asyncio.Event()

    async def items() -> Items:
        try:
            yield 1, _reply("one")
            raise failure
        finally:
            closed.set()

    slots = StreamSlots(1)
    slots.take()
    call, request = _call()
    response = sse_answer(call, EventStream(items(), False, slots.give), 15.0)
    # An open stream keeps the call's id and binding, not its request nor its params.
    assert response.call.request is not request
    assert response.call.params == {}
    client = Client()
    await response({"type": "http"}, client.receive, client.send)
    events = client.body().split(b"\n\n")
    assert events[0].startswith(b"id: 1\ndata: ")
    assert b'"id":7' in events[0]
    error = json.loads(events[1].removeprefix(b"data: "))
    assert error["id"] == 7
    assert error["error"]["code"] == code
    assert events[2:] == [b""]
    assert client.sent[-1] == {"type": "http.response.body", "body": b"", "more_body": False}
    assert closed.is_set()
    assert slots.open == 0
