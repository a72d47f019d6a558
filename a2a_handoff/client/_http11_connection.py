"""One keep-alive HTTP/1.1 connection of `Http11Transport`: an asyncio protocol that writes
a request and parses its response with httptools, one at a time.

A response body is queued chunk by chunk; past `_PAUSE_AT` queued chunks the socket stops
being read (a slow stream reader) until the reader is down to `_RESUME_AT`. A connection is
reusable only once its response was read to the end, the server allowed keep-alive, and its
socket shows nothing since (a server that closed or wrote to it).
"""

from __future__ import annotations

import asyncio
import select
from typing import cast

import httptools
import httpx

_PAUSE_AT = 64  # queued body chunks before the socket stops being read (a slow stream reader)
_RESUME_AT = 8


class Http11Connection(asyncio.Protocol):
    """One TCP connection: writes a request, parses one response at a time.

    `ready` resolves when the head is parsed (streamed: the body follows through `chunks`)
    or, for a whole exchange, when the body is complete (it is in `body`).
    """

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.idle_since = 0.0
        self.lost = False
        self._paused = False
        self._streaming = False
        self._begin(streaming=False)

    def _begin(self, *, streaming: bool) -> None:
        if self._paused and self.transport is not None:  # a stream abandoned once complete
            self._paused = False
            self.transport.resume_reading()
        self._parser = httptools.HttpResponseParser(self)
        self._streaming = streaming
        self.headers: list[tuple[bytes, bytes]] = []
        self.body: list[bytes] = []
        self.ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.chunks: asyncio.Queue[bytes | BaseException | None] | None = (
            asyncio.Queue() if streaming else None
        )
        self.head_done = False
        self._interim = False  # parsing a 1xx answer: the real one follows
        self.complete = False
        self.keep_alive = False

    # -- asyncio.Protocol -----------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports do not subclass asyncio.Transport; they offer the same methods.
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._fail(httpx.RemoteProtocolError("the server switched protocols"))
        except httptools.HttpParserError as exc:
            self._fail(httpx.RemoteProtocolError(f"malformed HTTP response: {exc}"))

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        if self.complete:
            return
        if exc is None and self.head_done and not self._framed():
            self.on_message_complete()  # a body delimited by the (clean) end of the connection
            return
        self._fail(httpx.RemoteProtocolError("the server closed the connection mid-response"))

    # -- httptools callbacks ----------------------------------------------------------------

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name, value))

    def on_headers_complete(self) -> None:
        if 100 <= self.status < 200:  # 101 never gets here: httptools raises on upgrades
            self._interim = True
            self.headers = []
            return
        self.head_done = True
        self.keep_alive = self._parser.should_keep_alive()
        if self._streaming and not self.ready.done():
            self.ready.set_result(None)

    def on_body(self, body: bytes) -> None:
        if self.chunks is None:
            self.body.append(body)
            return
        self.chunks.put_nowait(body)
        if not self._paused and self.chunks.qsize() >= _PAUSE_AT and self.transport:
            self._paused = True
            self.transport.pause_reading()

    def on_message_complete(self) -> None:
        if self._interim:
            self._interim = False
            return
        self.complete = True
        if self.chunks is not None:
            self.chunks.put_nowait(None)
        elif not self.ready.done():
            self.ready.set_result(None)

    # -- used by the transport -------------------------------------------------------------

    @property
    def status(self) -> int:
        return int(self._parser.get_status_code())

    def usable(self, now: float, expiry: float) -> bool:
        """Whether an idle connection may carry a request: open, fresh, and silent."""
        transport = self.transport
        if self.lost or transport is None or transport.is_closing():
            return False
        if now - self.idle_since >= expiry:
            return False
        # The server's close (or anything it wrote) may not have reached the loop yet.
        sock = transport.get_extra_info("socket")
        readable, _, _ = select.select([sock], [], [], 0)
        return not readable

    def send(self, data: bytes, *, streaming: bool) -> None:
        self._begin(streaming=streaming)
        assert self.transport is not None
        self.transport.write(data)

    async def next_chunk(self) -> bytes | None:
        assert self.chunks is not None
        item = await self.chunks.get()
        if self._paused and self.chunks.qsize() <= _RESUME_AT and self.transport:
            self._paused = False
            self.transport.resume_reading()
        if isinstance(item, BaseException):
            raise item
        return item

    def close(self) -> None:
        self.lost = True
        if self.transport is not None:
            self.transport.close()

    def _framed(self) -> bool:
        names = {name.lower() for name, _ in self.headers}
        return b"content-length" in names or b"transfer-encoding" in names

    def _fail(self, exc: httpx.TransportError) -> None:
        if not self.ready.done():
            self.ready.set_exception(exc)
        elif self.chunks is not None:
            self.chunks.put_nowait(exc)
        self.close()
