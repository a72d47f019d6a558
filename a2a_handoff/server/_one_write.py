"""A response's head and its body in one send.

uvicorn writes an answer's status line and headers when the app starts the response, and its
body when the app sends it: two `send` calls, two TCP segments, and a reader woken twice for
every JSON-RPC answer. The transport a request's cycle writes to is wrapped in `OneWrite`,
which holds the head until the body's first bytes and writes them together. A head whose body
does not follow at once (a stream waiting for its first event) goes out on the event loop's
next turn, so nothing waits longer than that; an interim `100 Continue` is never held, nor
the answer to a HEAD request (it has no body: the server does not wrap its transport).
Anything else asked of the transport (close, is_closing, …) sends what is held first, so the
order of bytes on the wire is the order they were written in.
"""

from __future__ import annotations

import asyncio
from typing import Any

_INTERIM = b"HTTP/1.1 1"  # 1xx: the client waits for it before it sends the body


class OneWrite:
    """`transport`, as one response's cycle sees it (see the module docstring)."""

    __slots__ = ("_head", "_loop", "_started", "_transport")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._head: bytes | None = None
        self._started = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        head = self._head
        if head is not None:
            self._head = None
            self._transport.writelines((head, data))  # one send (no copy of the body here)
        elif not self._started and bytes(data[:10]) != _INTERIM:
            self._started = True  # the response's head: held until its body comes
            self._head = bytes(data)
            self._loop.call_soon(self.flush)
        else:
            self._transport.write(data)

    def flush(self) -> None:
        """Send what is held, if anything (and if the connection is still open)."""
        head = self._head
        if head is not None:
            self._head = None
            if not self._transport.is_closing():
                self._transport.write(head)

    def __getattr__(self, name: str) -> Any:
        self.flush()
        return getattr(self._transport, name)
