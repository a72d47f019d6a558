"""Http11Transport: a lean HTTP/1.1 client for calls between agents.

A handoff's create call runs on the user's critical path. httpx's default transport
(httpcore over anyio, parsing with the pure-Python h11) and its client layer (request
building, auth and redirect flows, cookies) cost more CPU per call than everything else the
source agent does for a handoff (bench/: ~700 µs per call against ~90 µs for the bare
socket round trip on this machine). This module parses with httptools — the C parser
uvicorn already uses for our servers — on a plain asyncio protocol, over a pool of
keep-alive connections per host, with two ways in:

- as an httpx transport (`httpx.AsyncClient(transport=Http11Transport())`): httpx's API,
  timeouts and exceptions, response bodies streamed (SSE);
- `post()`: one whole POST exchange, past httpx's client layer, for JSON-RPC calls.

Only plain `http://` is spoken here; anything else goes to httpx's own transport.

What it guarantees, as httpx's transport does: a connection is reused only after its
response was read to the end and the server allowed keep-alive; a response abandoned
half-read, a timeout or a cancellation closes its connection; a refused connection raises
`httpx.ConnectError` (the request never left: the caller may send it to another replica);
idle connections are dropped after `keepalive_expiry` seconds (below uvicorn's 5 s, so a
server does not close one under a request just written), and one the server has closed
(or written to) since is never handed out — its socket is checked at checkout, as httpcore
does. Informational (1xx) answers are skipped; HEAD requests, whose answers carry no body
the parser could know of, go to httpx's own transport.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Mapping

import httpx

from a2a_handoff.client._http11_connection import Http11Connection

_Key = tuple[str, int]


class _Body(httpx.AsyncByteStream):
    """A streamed response body; gives its connection back to the pool once read."""

    def __init__(
        self, pool: Http11Transport, key: _Key, conn: Http11Connection, timeout: float | None
    ) -> None:
        self._pool = pool
        self._key = key
        self._conn: Http11Connection | None = conn
        self._timeout = timeout

    async def __aiter__(self) -> AsyncIterator[bytes]:
        conn = self._conn
        while conn is not None:
            try:
                async with asyncio.timeout(self._timeout):
                    chunk = await conn.next_chunk()
            except TimeoutError:
                await self.aclose()
                raise httpx.ReadTimeout("timed out reading the response body") from None
            if chunk is None:
                self._release()
                return
            yield chunk

    def _release(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            self._pool._checkin(self._key, conn)

    async def aclose(self) -> None:
        conn, self._conn = self._conn, None
        if conn is None:
            return
        if conn.complete:
            self._pool._checkin(self._key, conn)
        else:
            conn.close()


class Http11Transport(httpx.AsyncBaseTransport):
    """Plain-HTTP/1.1 agent calls over pooled keep-alive connections (see the module doc)."""

    def __init__(
        self,
        *,
        keepalive_expiry: float = 4.0,
        max_idle_per_host: int = 32,
        fallback: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._expiry = keepalive_expiry
        self._max_idle = max_idle_per_host
        self._idle: dict[_Key, list[Http11Connection]] = {}
        self._targets: dict[str, tuple[_Key, bytes] | None] = {}
        self._fallback = fallback or httpx.AsyncHTTPTransport()
        self._closed = False

    # -- as an httpx transport ------------------------------------------------------------

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        if url.scheme != "http" or request.method == "HEAD":
            return await self._fallback.handle_async_request(request)
        timeouts: dict[str, float | None] = request.extensions.get("timeout", {})
        key = (url.host, url.port or 80)
        body = await request.aread()
        conn = await self._exchange(
            key,
            _head(request, len(body)) + body,
            streaming=True,
            connect=timeouts.get("connect"),
            read=timeouts.get("read"),
        )
        return httpx.Response(
            conn.status,
            headers=conn.headers,
            stream=_Body(self, key, conn, timeouts.get("read")),
            extensions={"http_version": b"HTTP/1.1"},
        )

    # -- whole exchanges ------------------------------------------------------------------

    async def post(
        self,
        url: str,
        body: bytes,
        headers: Mapping[str, str],
        limits: httpx.Timeout | None = None,
    ) -> tuple[int, bytes]:
        """POST `body` (JSON) to `url`; the status and the whole response body.

        `limits`: the connect and read timeouts (10 s each by default). Raises httpx's
        transport errors, as a request through httpx would.
        """
        timeout = limits or httpx.Timeout(10.0)
        target = self._target(url)
        if target is None:  # not plain http: through httpx's own transport
            request = httpx.Request(
                "POST",
                url,
                content=body,
                headers={**headers, "Content-Type": "application/json"},
                extensions={"timeout": timeout.as_dict()},
            )
            response = await self._fallback.handle_async_request(request)
            try:
                return response.status_code, await response.aread()
            finally:
                await response.aclose()
        key, start = target
        lines = [start]
        for name, value in headers.items():
            if "\r" in value or "\n" in value or "\r" in name or "\n" in name:
                raise httpx.LocalProtocolError(f"header {name!r} holds a line break")
            lines.append(f"{name}: {value}\r\n".encode("latin-1"))
        lines.append(b"Content-Length: %d\r\n\r\n" % len(body))
        lines.append(body)
        conn = await self._exchange(
            key, b"".join(lines), streaming=False, connect=timeout.connect, read=timeout.read
        )
        status, content = conn.status, b"".join(conn.body)
        self._checkin(key, conn)
        return status, content

    def _target(self, url: str) -> tuple[_Key, bytes] | None:
        """The pool key and the first request lines of a POST to `url` (None: not http)."""
        try:
            return self._targets[url]
        except KeyError:
            pass
        parsed = httpx.URL(url)
        target: tuple[_Key, bytes] | None = None
        if parsed.scheme == "http":
            start = b"POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n" % (
                parsed.raw_path,
                parsed.netloc,
            )
            target = ((parsed.host, parsed.port or 80), start)
        if len(self._targets) < 1024:
            self._targets[url] = target
        return target

    # -- the pool -------------------------------------------------------------------------

    async def _exchange(
        self,
        key: _Key,
        data: bytes,
        *,
        streaming: bool,
        connect: float | None,
        read: float | None,
    ) -> Http11Connection:
        """Write one request on a pooled (or new) connection; the connection once `ready`."""
        if self._closed:
            raise httpx.ConnectError("the transport is closed")
        conn = self._checkout(key) or await self._connect(key, connect)
        conn.send(data, streaming=streaming)
        try:
            async with asyncio.timeout(read):
                await conn.ready
        except TimeoutError:
            conn.close()
            raise httpx.ReadTimeout("timed out waiting for the response") from None
        except BaseException:
            conn.close()
            raise
        return conn

    async def _connect(self, key: _Key, within: float | None) -> Http11Connection:
        loop = asyncio.get_running_loop()
        host = key[0].strip("[]")
        try:
            async with asyncio.timeout(within):
                _, conn = await loop.create_connection(Http11Connection, host, key[1])
        except TimeoutError:
            raise httpx.ConnectTimeout(f"connecting to {host}:{key[1]} timed out") from None
        except OSError as exc:
            raise httpx.ConnectError(f"{host}:{key[1]}: {exc}") from exc
        return conn

    def _checkout(self, key: _Key) -> Http11Connection | None:
        idle = self._idle.get(key)
        now = time.monotonic()
        while idle:
            conn = idle.pop()
            if conn.usable(now, self._expiry):
                return conn
            conn.close()
        return None

    def _checkin(self, key: _Key, conn: Http11Connection) -> None:
        idle = self._idle.setdefault(key, [])
        if self._closed or conn.lost or not conn.keep_alive or len(idle) >= self._max_idle:
            conn.close()
            return
        conn.idle_since = time.monotonic()
        idle.append(conn)

    async def aclose(self) -> None:
        self._closed = True
        for idle in self._idle.values():
            for conn in idle:
                conn.close()
        self._idle.clear()
        await self._fallback.aclose()


def _head(request: httpx.Request, length: int) -> bytes:
    lines = [b"%s %s HTTP/1.1" % (request.method.encode(), request.url.raw_path)]
    chunked = False
    for name, value in request.headers.raw:
        lowered = name.lower()
        if lowered == b"transfer-encoding":
            chunked = True
            continue
        if lowered == b"content-length":
            continue
        lines.append(name + b": " + value)
    if chunked or length or request.method not in ("GET", "HEAD", "DELETE", "OPTIONS"):
        lines.append(b"Content-Length: %d" % length)
    return b"\r\n".join(lines) + b"\r\n\r\n"
