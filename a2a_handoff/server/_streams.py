"""Task streams over Server-Sent Events: what a stream carries, and a lean response for it.

A task stream starts with a Task snapshot (when it has one) and goes on with the task's
committed events, each framed with its sequence number (`id:`), until the task ends or waits
for its caller. TRANSFERRED is rendered per client (see `protocol.extension`).

The response: one watcher task per stream, nothing more. Open streams per process are capped
(`StreamSlots`): beyond the cap a streaming call is refused before anything is done for it.

Each open stream costs memory for as long as a task runs (a subscriber may wait minutes), so
this writer keeps to the request's own task plus one small watcher that reads the client's
`http.disconnect` and sends the keep-alive comment when the stream has been quiet. A gone
client cancels the stream, which unsubscribes it at once. (sse-starlette's response does the
same with a task group of several tasks: about 20 KiB more per open stream, measured.)
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Mapping

from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from a2a_handoff.errors import InternalError, RpcError, TooManyStreamsError
from a2a_handoff.protocol.extension import render_item
from a2a_handoff.protocol.models import StreamResponse, Task
from a2a_handoff.protocol.sse import PING
from a2a_handoff.protocol.states import TaskState
from a2a_handoff.server._call import Call, protocol_headers
from a2a_handoff.stores.base import Store, TaskEvent

log = logging.getLogger("a2a_handoff.server")

Items = AsyncGenerator[tuple[int, StreamResponse], None]
"""A stream's items, each with its event sequence number."""


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
        frames: AsyncIterator[bytes],
        *,
        ping: float = 15.0,
        headers: Mapping[str, str] | None = None,
        slots: StreamSlots | None = None,
    ) -> None:
        super().__init__(
            None,
            status_code=200,
            headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no", **(headers or {})},
        )
        self.frames = frames
        self.ping = ping
        self.slots = slots  # the slot this stream took, given back when it ends

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await self._stream(receive, send)
        finally:
            if self.slots is not None:
                self.slots.give()
                self.slots = None

    async def _stream(self, receive: Receive, send: Send) -> None:
        headers = [(k, v) for k, v in self.raw_headers if k != b"content-length"]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        stream = asyncio.current_task()
        assert stream is not None
        gone = False

        async def watch() -> None:
            nonlocal gone
            while True:
                try:
                    async with asyncio.timeout(self.ping):
                        message = await receive()
                except TimeoutError:
                    # A whole chunk is written at once, so a ping never splits a frame.
                    await send({"type": "http.response.body", "body": PING, "more_body": True})
                    continue
                if message["type"] == "http.disconnect":
                    gone = True
                    stream.cancel()
                    return

        watcher = asyncio.create_task(watch())
        try:
            async for chunk in self.frames:
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
                del chunk  # a waiting stream keeps no copy of what it sent
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        except asyncio.CancelledError:
            if not gone:
                raise
            # The client went away: nothing left to send, and the stream's resources are
            # released by the frames' own clean-up (the generator is closed below).
            stream.uncancel()
        finally:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher
            aclose = getattr(self.frames, "aclose", None)
            if aclose is not None:
                await aclose()


async def task_stream(
    store: Store, task_id: str, head: Task | None, after: int, *, until_terminal: bool = False
) -> Items:
    """`head` (if any) then the task's events after `after`, until it ends or pauses.

    `until_terminal` (SubscribeToTask, spec §3.1.6): the stream stays open while the task
    waits for input, and closes only when it ends.
    """
    if head is not None:
        done = ends(head.status.state, until_terminal)
        first = StreamResponse(task=head)
        head = None  # an open stream keeps no snapshot alive
        yield after, first
        del first
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


def sse_answer(
    call: Call, items: Items, ping: float, slots: StreamSlots | None = None
) -> SseResponse:
    """The call's answer as an SSE stream of `items`, each framed by the call's binding; an
    error while streaming ends the stream with the binding's error event. `slots`: the cap
    the stream took a slot of (given back when it ends)."""
    visible = call.transfers_visible
    binding = call.binding
    # The frames need the call's id, not its params: an open stream keeps no parsed request.
    call = dataclasses.replace(call, params={})

    async def frames() -> AsyncIterator[bytes]:
        try:
            async for seq, item in items:
                framed = binding.event(call, seq or None, render_item(item, visible))
                del item  # held no longer than it takes to frame it
                yield framed
                del framed
        except RpcError as error:
            yield binding.stream_error(call, error)
        except Exception:
            log.exception("stream of a task failed")
            yield binding.stream_error(call, InternalError())
        finally:
            await items.aclose()

    headers = protocol_headers(call.extensions)
    return SseResponse(frames(), ping=ping, headers=headers, slots=slots)
