"""How a served agent defends itself against slow, silent, greedy or non-reading clients.

uvicorn (0.54) has an idle keep-alive timeout and nothing else of this: no time limit on
reading a request head or body, no limit on a head's size with httptools, no cap on
connections before a head is complete, and no limit on how long an answer may wait for a
client that does not read it (its bytes stay queued, in the process and in the kernel, for
as long as the client keeps the connection). An ASGI middleware cannot add these — it runs
only once a head is complete and never sees the transport — so `LimitedHttpProtocol`
extends uvicorn's httptools protocol, given to uvicorn as its `http` class:

- head: complete within `header_timeout` of the connection or of its first bytes, else
  `408` (a silent new connection is just closed; an idle one after an answer is uvicorn's
  keep-alive's); over `max_head_bytes`: `431`;
- body: complete within `body_timeout` of the read that left it incomplete (time the app is
  not reading excluded), else `408`;
- idle keep-alive: uvicorn's own `timeout_keep_alive`;
- connections: beyond `max_connections` a new one is answered `503` with `Retry-After: 1`
  at once, its request never read (at most `max_refusing` at a time; beyond, reset);
- writing: queued output must shrink by `write_min_progress` bytes every `write_timeout`,
  else the connection is dropped (`SO_LINGER` 0: the kernel's send queue goes too, and a
  `send()` waiting for the client is released); the kernel send buffer is capped at
  `send_buffer`; when the output queued by the whole process passes `max_buffered`, the
  connection that asked for more is dropped at once.

Open SSE streams are capped in the app (`server._streams`), which knows what a stream is.

Over TLS it also hands the app what uvicorn does not: each request of a connection carries
the ASGI TLS extension with the client certificate the handshake verified
(`server._tls_peer`), the caller under mutual TLS.

Every open connection (an SSE stream holds one for as long as it runs) also costs memory, so
the protocol keeps its own state in slots, and swaps uvicorn's per-connection `asyncio.Event`s
(each with a deque of waiters, ~0.7 KiB) and its pipeline deque for lighter equivalents.

It relies on uvicorn's httptools protocol internals (`transport`, `loop`, `flow`
(`_is_writable_event`), `connections`, `cycle` (`message_event`), `pipeline`, `scope`,
`limit_concurrency`, `timeout_keep_alive(_task)` and its parser callbacks): pyproject pins
uvicorn to 0.54.x, and the raw-socket tests in tests/integration/test_server_limits.py are
what to run when moving it.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import fcntl
import logging
import resource
import socket
import struct
import termios
from dataclasses import dataclass, replace
from typing import Any, ClassVar

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from a2a_handoff.server._one_write import OneWrite
from a2a_handoff.server._tls_peer import tls_extension

log = logging.getLogger("a2a_handoff.server")

FD_RESERVE = 64  # descriptors kept for the store, logs and the outgoing pool to other agents
TLS_CLOSE_GRACE = 1.0  # seconds a closed idle TLS connection waits for the client's goodbye


@dataclass(frozen=True, slots=True)
class ServerLimits:
    """The limits one server process keeps (see the module docstring)."""

    header_timeout: float = 10.0
    body_timeout: float = 30.0
    write_timeout: float = 10.0
    write_min_progress: int = 16 * 1024
    max_connections: int = 1000
    max_head_bytes: int = 64 * 1024
    max_buffered: int = 64 * 1024 * 1024
    send_buffer: int = 256 * 1024  # 0: leave the kernel's autotuning (up to 4 MiB a socket)
    refuse_linger: float = 1.0  # a refused connection is read and discarded this long
    max_refusing: int = 32

    def fitted(self) -> ServerLimits:
        """These limits with `max_connections` fitted to the open-file limit, which is first
        raised to its hard maximum; logs what it took."""
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft != hard and hard != resource.RLIM_INFINITY:
            with contextlib.suppress(ValueError, OSError):
                resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
                soft = hard
        room = max(1, soft - self.max_refusing - FD_RESERVE)
        if room < self.max_connections:
            log.warning("max_connections lowered to %d: the open-file limit is %d", room, soft)
            return replace(self, max_connections=room)
        return self

    def protocol(self) -> type[LimitedHttpProtocol]:
        """The protocol class to give uvicorn (`http=`) for these limits (one process)."""
        attributes = {"limits": self, "__slots__": ()}
        return type("LimitedHttpProtocol", (LimitedHttpProtocol,), attributes)


_RESET_ON_CLOSE = struct.pack("ii", 1, 0)  # SO_LINGER on, 0 s: close() drops what is queued
_refusing = [0]  # refused connections still being drained, in this process


def _plain(status: bytes, text: bytes, extra: bytes = b"") -> bytes:
    """A complete HTTP/1.1 answer that closes the connection."""
    return b"".join(
        (
            b"HTTP/1.1 ",
            status,
            b"\r\ncontent-type: text/plain; charset=utf-8\r\n",
            extra,
            b"connection: close\r\ncontent-length: ",
            str(len(text)).encode(),
            b"\r\n\r\n",
            text,
        )
    )


TOO_MANY = _plain(b"503 Service Unavailable", b"Too many connections\n", b"retry-after: 1\r\n")
TIMED_OUT = _plain(b"408 Request Timeout", b"The request was not received in time\n")
HEAD_TOO_LARGE = _plain(b"431 Request Header Fields Too Large", b"Request head too large\n")


class _Flag:
    """`asyncio.Event` as uvicorn uses it (`set`, `clear`, `is_set`, `wait`), in two slots:
    the list of waiters is made only while someone waits (an Event makes a deque, 0.6 KiB,
    for every connection and request). One loop, as uvicorn's protocol."""

    __slots__ = ("_value", "_waiters")

    def __init__(self, value: bool = False) -> None:
        self._value = value
        self._waiters: list[asyncio.Future[bool]] | None = None

    def is_set(self) -> bool:
        return self._value

    def set(self) -> None:
        if not self._value:
            self._value = True
            for waiter in self._waiters or ():
                if not waiter.done():
                    waiter.set_result(True)

    def clear(self) -> None:
        self._value = False

    async def wait(self) -> bool:
        if self._value:
            return True
        waiter = asyncio.get_running_loop().create_future()
        if self._waiters is None:
            self._waiters = []
        self._waiters.append(waiter)
        try:
            await waiter
            return True
        finally:
            self._waiters.remove(waiter)
            if not self._waiters:
                self._waiters = None


class _Pipeline(list[Any]):
    """uvicorn's queue of pipelined requests (`appendleft`, `pop`, truth), as a list: empty,
    56 bytes where a deque takes 0.6 KiB on every connection; pipelining is rare."""

    __slots__ = ()

    def appendleft(self, item: Any) -> None:
        self.insert(0, item)


class LimitedHttpProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with the limits of `limits` (see the module docstring)."""

    limits: ClassVar[ServerLimits] = ServerLimits()
    # Our state in slots: in uvicorn's instance dict it pushed the dict past its shared keys
    # (some 1.5 KiB more per connection).
    __slots__ = (
        "_body_timer",
        "_closing_timer",
        "_draining_refusal",
        "_fd",
        "_head_bytes",
        "_head_timer",
        "_reading_body",
        "_refused",
        "_tls",
        "_write_mark",
        "_write_timer",
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.pipeline = _Pipeline()  # type: ignore[assignment]
        self._head_timer: asyncio.TimerHandle | None = None
        self._body_timer: asyncio.TimerHandle | None = None
        self._write_timer: asyncio.TimerHandle | None = None
        self._write_mark = 0
        self._fd = -1
        self._head_bytes = -1  # bytes of a head received so far; -1: not waiting for one
        self._reading_body = False  # a head came, its body is not complete yet
        self._refused = False
        self._draining_refusal = False
        self._tls: dict[str, Any] | None = None  # the ASGI TLS extension, over TLS
        self._closing_timer: asyncio.TimerHandle | None = None

    # -- connection -----------------------------------------------------------------------

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self.flow._is_writable_event = _Flag(True)  # type: ignore[assignment]
        connection = transport.get_extra_info("ssl_object")  # its handshake done, over TLS
        if connection is not None:
            self._tls = tls_extension(connection)
        sock = transport.get_extra_info("socket")
        if sock is not None:
            self._fd = sock.fileno()
            if self.limits.send_buffer:
                with contextlib.suppress(OSError):
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self.limits.send_buffer)
        if len(self.connections) <= self.limits.max_connections:
            self._expect_head(silent_for=self.limits.header_timeout)
            return
        self._refuse()

    def _refuse(self) -> None:
        """Over the cap: answer 503 without reading the request, then close."""
        self._refused = True
        self.connections.discard(self)  # a refused connection takes no slot
        if _refusing[0] >= self.limits.max_refusing:
            self._drop()  # a flood of them: keep the descriptors for real work
            return
        _refusing[0] += 1
        self._draining_refusal = True
        self.transport.write(TOO_MANY)
        try:
            self.transport.write_eof()  # FIN after the answer; its request is read and dropped
        except OSError:
            self._drop()
            return
        # Reading on a while keeps the kernel from resetting the connection (which would
        # destroy the 503 before the client read it) when the request arrives after the close.
        self._head_timer = self.loop.call_later(self.limits.refuse_linger, self._drop)

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return
        if self._head_bytes >= 0:
            self._head_bytes += len(data)
        super().data_received(data)
        # Timers only for what this data left incomplete: a whole request in one read (the
        # usual case) arms none, so the limits cost nothing per request.
        if self._head_bytes > 0:
            if self._head_bytes > self.limits.max_head_bytes:  # still no complete head
                self._reject(HEAD_TOO_LARGE)
            elif self._head_timer is None and not self.transport.is_closing():
                self._head_timer = self.loop.call_later(self.limits.header_timeout, self._head_late)
        elif self._reading_body and self._body_timer is None:
            self._body_timer = self.loop.call_later(self.limits.body_timeout, self._body_late)

    def connection_lost(self, exc: Exception | None) -> None:
        timers = (self._head_timer, self._body_timer, self._write_timer, self._closing_timer)
        for timer in timers:
            if timer is not None:
                timer.cancel()
        self._head_timer = self._body_timer = self._write_timer = self._closing_timer = None
        if self._draining_refusal:
            self._draining_refusal = False
            _refusing[0] -= 1
        super().connection_lost(exc)

    # -- reading: the head, then the body -----------------------------------------------------

    def _expect_head(self, silent_for: float | None = None) -> None:
        """Count the next head's bytes; `silent_for`: also close the connection if nothing
        comes within that long (after an answer, uvicorn's keep-alive timeout does that)."""
        self._head_bytes = 0
        if silent_for is not None and self._head_timer is None:
            self._head_timer = self.loop.call_later(silent_for, self._head_late)

    def _head_late(self) -> None:
        self._head_timer = None
        self._reject(TIMED_OUT if self._head_bytes > 0 else b"")  # silent: just closed

    def on_message_begin(self) -> None:
        super().on_message_begin()
        if self._tls is not None:  # the connection's certificate, for the app (server.tls)
            self.scope["extensions"] = {"tls": self._tls}  # type: ignore[dict-item]

    def on_headers_complete(self) -> None:
        self._head_bytes = -1
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None
        self._reading_body = True
        cycle = self.cycle
        super().on_headers_complete()
        if self.cycle is not cycle:  # a new request's cycle; nothing waits on its event yet
            self.cycle.message_event = _Flag()  # type: ignore[assignment]
            if self.scope["method"] != "HEAD":  # its answer's head and body in one send
                self.cycle.transport = OneWrite(self.transport, self.loop)  # type: ignore[assignment]

    def on_message_complete(self) -> None:
        self._reading_body = False
        if self._body_timer is not None:
            self._body_timer.cancel()
            self._body_timer = None
        super().on_message_complete()
        answered = self.cycle is not None and self.cycle.response_complete
        if answered and not self.transport.is_closing() and not self.pipeline:
            self._expect_head()  # answered before its body ended (a 413): the next head

    def _body_late(self) -> None:
        self._body_timer = None
        if self.flow.read_paused:  # the app is not reading: not the client's delay
            self._body_timer = self.loop.call_later(self.limits.body_timeout, self._body_late)
            return
        started = self.cycle is not None and self.cycle.response_started
        self._reject(b"" if started else TIMED_OUT)

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if self.transport.get_write_buffer_size():
            self._watch_writes()  # also when the answer said `connection: close`
        complete = self.cycle is not None and self.cycle.response_complete
        # An answer given before the request's body ended (413 on its declared length): the
        # rest of the body is read and dropped (uvicorn), within `body_timeout`, and is no
        # head: counted as one it reset the connection, and the client lost the answer
        # ("connection reset" instead of "request body over N bytes").
        idle = not self.transport.is_closing() and not self.pipeline and complete
        if idle and not self._reading_body:
            self._expect_head()

    # -- writing ----------------------------------------------------------------------------

    def pause_writing(self) -> None:
        """The transport holds over its high-water mark of our output (64 KiB)."""
        super().pause_writing()
        queued = sum(c.transport.get_write_buffer_size() for c in self.connections)
        if queued > self.limits.max_buffered:
            log.warning("dropped a slow reader: %d bytes of output queued in all", queued)
            self._drop()
            return
        self._watch_writes()

    def timeout_keep_alive_handler(self) -> None:
        if self._queued():  # the last answer is still unread: closing would orphan it
            self._watch_writes()
            self.timeout_keep_alive_task = self.loop.call_later(
                self.timeout_keep_alive, self.timeout_keep_alive_handler
            )
            return
        super().timeout_keep_alive_handler()
        self._closed_idle()

    def shutdown(self) -> None:
        super().shutdown()
        if self.transport.is_closing():
            self._closed_idle()

    def _closed_idle(self) -> None:
        """An idle connection was closed. Over TLS the close waits for the client's
        close_notify, which a client keeping the connection in its pool does not send until
        it next looks (asyncio: up to 30 s), holding a connection slot and the server's
        shutdown that long: after `TLS_CLOSE_GRACE` it is dropped instead."""
        if self._tls is not None and self._closing_timer is None:
            self._closing_timer = self.loop.call_later(TLS_CLOSE_GRACE, self._drop)

    def _queued(self) -> int:
        """Our output not yet taken by the client: in the transport and the kernel."""
        queued = self.transport.get_write_buffer_size()
        if self._fd >= 0:
            with contextlib.suppress(OSError):
                raw = fcntl.ioctl(self._fd, termios.TIOCOUTQ, b"\0\0\0\0")
                queued += struct.unpack("i", raw)[0]
        return queued

    def _watch_writes(self) -> None:
        if self._write_timer is None:
            self._write_mark = self._queued()
            self._write_timer = self.loop.call_later(self.limits.write_timeout, self._check_writes)

    def _check_writes(self) -> None:
        self._write_timer = None
        left = self._queued()
        if not left:
            return
        if self._write_mark - left >= self.limits.write_min_progress:
            self._watch_writes()  # slow, but reading: another period
            return
        self._drop()

    # -- ending -----------------------------------------------------------------------------

    def _drop(self) -> None:
        """Close at once, dropping what is queued (here and in the kernel)."""
        sock = self.transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _RESET_ON_CLOSE)
        self.transport.abort()

    def _reject(self, answer: bytes) -> None:
        """Answer `answer` (if any) and close; the write watchdog drops it if never read."""
        if self.transport.is_closing():
            return
        if answer:
            self.transport.write(answer)
        self.transport.close()
        if self.transport.get_write_buffer_size():
            self._watch_writes()


def return_freed_memory() -> None:
    """Make glibc give freed large buffers back to the system at once (an answer of a few
    MiB would otherwise stay in the heap after a slow reader was dropped). Linux/glibc only;
    a no-op elsewhere."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None)  # the process's own symbols: libc's among them on Linux
        m_mmap_threshold = -3
        libc.mallopt(m_mmap_threshold, 256 * 1024)
