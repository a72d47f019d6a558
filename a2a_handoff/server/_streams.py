"""Task streams over Server-Sent Events: what a stream carries, and a lean response for it.

A task stream starts with a Task snapshot (when it has one) and goes on with the task's
committed events, each framed with its sequence number (`id:`), until the task ends or waits
for its caller. The service hands it to a face as an `EventStream` (`server.results`), its
items rendered for the caller (TRANSFERRED per client, see `protocol.extension`).

The response: one watcher task per stream, nothing more. Open streams per process are capped
(`StreamSlots`): beyond the cap a streaming call is refused before anything is done for it;
a stream's slot is given back when its `EventStream` is closed.

Each open stream costs memory for as long as a task runs (a subscriber may wait minutes), so
this writer keeps to the request's own task plus one small watcher that reads the client's
`http.disconnect` and sends the keep-alive comment every `ping` seconds. A gone client
cancels the stream, which unsubscribes it at once. (sse-starlette's response does the same
with a task group of several tasks: about 20 KiB more per open stream, measured.) A task's
items are framed by the response itself as it sends them (no generator of frames between
it and the store's), and an open stream keeps neither the call's request nor its params.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import logging
from collections.abc import AsyncIterator, Mapping

from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from a2a_handoff.errors import InternalError, RpcError, TooManyStreamsError
from a2a_handoff.protocol.models import StreamResponse, Task
from a2a_handoff.protocol.sse import PING
from a2a_handoff.protocol.states import TaskState
from a2a_handoff.server._call import Call, protocol_headers
from a2a_handoff.server.results import EventStream, Items
from a2a_handoff.stores.base import Store, TaskEvent

log = logging.getLogger("a2a_handoff.server")


class StreamSlots:
    """The open-stream cap of one process: a stream takes a slot before anything is done for
    it (a refused SendStreamingMessage creates no task) and gives it back when it ends."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.open = 0

    def take(self) -> None:
        """A slot, or TooManyStreamsError (-32106, HTTP 503)."""
        if self.open >= self.limit:
            raise TooManyStreamsError(
                f"this agent has {self.open} streams open, its limit; retry shortly"
            )
        self.open += 1

    def give(self) -> None:
        self.open -= 1


class SseResponse(Response):
    """Streams `frames` (ready-made SSE bytes) as `text/event-stream`."""

    media_type = "text/event-stream"

    def __init__(
        self,
        frames: AsyncIterator[bytes] | None,
        *,
        ping: float = 2.0,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(
            None,
            status_code=200,
            headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no", **(headers or {})},
        )
        self.frames = frames
        self.ping = ping
        self.gone = False  # the client went away

    def init_headers(self, headers: Mapping[str, str] | None = None) -> None:
        """Starlette's headers, less the `content-length` it would add, each pair made once
        per process (a stream keeps its headers for as long as it is open)."""
        self.raw_headers = [_header(k, v) for k, v in (headers or {}).items()]
        if not any(name == b"content-type" for name, _ in self.raw_headers):
            self.raw_headers.append(_CONTENT_TYPE)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        stream = asyncio.current_task()
        assert stream is not None
        watcher = None
        try:
            await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
            watcher = asyncio.create_task(self._watch(receive, send, stream))
            await self._send_frames(send)
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        except asyncio.CancelledError:
            if not self.gone:
                raise
            # The client went away: nothing left to send, and the stream's resources are
            # released by the frames' own clean-up (closed below).
            stream.uncancel()
        finally:
            if watcher is not None:
                watcher.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await watcher
            await self._close_frames()

    async def _watch(self, receive: Receive, send: Send, stream: asyncio.Task[None]) -> None:
        """Reads the client's messages: a disconnect cancels the stream; `ping` seconds
        without one send the keep-alive comment."""
        while True:
            try:
                async with asyncio.timeout(self.ping):
                    message = await receive()
            except TimeoutError:
                # A whole chunk is written at once, so a ping never splits a frame.
                await send({"type": "http.response.body", "body": PING, "more_body": True})
                continue
            if message["type"] == "http.disconnect":
                self.gone = True
                stream.cancel()
                return

    async def _send_frames(self, send: Send) -> None:
        if self.frames is None:
            return
        async for chunk in self.frames:
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
            del chunk  # a waiting stream keeps no copy of what it sent

    async def _close_frames(self) -> None:
        aclose = getattr(self.frames, "aclose", None)
        if aclose is not None:
            await aclose()


_CONTENT_TYPE = (b"content-type", b"text/event-stream; charset=utf-8")


@functools.lru_cache(maxsize=64)
def _header(name: str, value: str) -> tuple[bytes, bytes]:
    return name.lower().encode("latin-1"), value.encode("latin-1")


class _ItemsResponse(SseResponse):
    """A stream of task items, each framed by the call's binding as it is sent (no frame
    generator in between); an error from the items or their framing ends the stream with
    the binding's error event."""

    def __init__(
        self, call: Call, items: EventStream, *, ping: float, headers: Mapping[str, str]
    ) -> None:
        super().__init__(None, ping=ping, headers=headers)
        self.call = call
        self.items = items

    async def _send_frames(self, send: Send) -> None:
        call = self.call
        binding = call.binding
        last = False
        while not last:
            try:
                # The item is held no longer than it takes to frame it.
                chunk = self._frame(*await anext(self.items))
            except StopAsyncIteration:
                return
            except RpcError as error:
                chunk, last = binding.stream_error(call, error), True
            except Exception:
                log.exception("stream of a task failed")
                chunk, last = binding.stream_error(call, InternalError()), True
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
            del chunk  # a waiting stream keeps no copy of what it sent

    def _frame(self, seq: int, item: StreamResponse) -> bytes:
        return self.call.binding.event(self.call, seq or None, item)

    async def _close_frames(self) -> None:
        await self.items.aclose()


async def task_stream(
    store: Store,
    task_id: str,
    head: Task | None,
    after: int,
    first: list[StreamResponse] | None = None,
    *,
    until_terminal: bool = False,
) -> Items:
    """`head` (if any) then the task's events after `after`, until it ends or pauses.

    `first`: events after `after` known committed (a new task's creation), sent as they are
    rather than read back; handed over, the list is emptied. `until_terminal`
    (SubscribeToTask, spec §3.1.6): the stream stays open while the task waits for input,
    and closes only when it ends.
    """
    if first:
        known, seq = first[:], after
        first.clear()  # neither the run nor this stream keeps them once sent
        while known:
            item = known.pop(0)
            seq += 1
            yield seq, item
            if pauses(item, until_terminal):
                return
            del item
        after = seq
    if head is not None:
        done = ends(head.status.state, until_terminal)
        snapshot = StreamResponse(task=head)
        head = None  # an open stream keeps no snapshot alive
        yield after, snapshot
        del snapshot
        if done:
            return
    event: TaskEvent
    async with contextlib.aclosing(store.follow(task_id, after)) as events:
        async for event in events:
            yield event.seq, event.item
            if pauses(event.item, until_terminal):
                return
            del event  # nor the last event while it waits for the next


def ends(state: TaskState, until_terminal: bool = False) -> bool:
    """Whether a stream closes once the task is in `state`."""
    return state.terminal or (state.interrupted and not until_terminal)


def pauses(item: StreamResponse, until_terminal: bool = False) -> bool:
    """Whether a stream ends after this item: the task ended (or waits for its caller)."""
    status = item.status_update.status if item.status_update else None
    if status is None and item.task is not None:
        status = item.task.status
    return status is not None and ends(status.state, until_terminal)


async def one_item(item: StreamResponse) -> Items:
    """A stream of a single item (a direct Message reply) that closes after it."""
    yield 0, item


def sse_answer(call: Call, items: EventStream, ping: float) -> SseResponse:
    """The call's answer as an SSE stream of `items`, each framed by the call's binding; an
    error while streaming ends the stream with the binding's error event. The stream is
    closed when the answer ends (its slot given back), however it ends."""
    headers = protocol_headers(call.caller.extensions)
    # The frames need the call's id and binding only: an open stream keeps neither its
    # parsed params nor its request (scope, headers parsed).
    call = dataclasses.replace(call, params={}, request=_DETACHED)
    return _ItemsResponse(call, items, ping=ping, headers=headers)


_DETACHED = Request({"type": "http"})
"""Stands for the request in a streaming call's copy (see `sse_answer`)."""
