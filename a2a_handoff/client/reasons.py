"""Why a call did not reach an agent, in a person's words ("connection refused"), not an
exception's ("ConnectError: All connection attempts failed")."""

from __future__ import annotations

import errno
import socket

import httpx

_ERRNOS = {
    errno.ECONNREFUSED: "connection refused",
    errno.ECONNRESET: "connection reset",
    errno.EHOSTUNREACH: "host unreachable",
    errno.ENETUNREACH: "network unreachable",
    errno.ETIMEDOUT: "connection timed out",
    errno.EPIPE: "connection closed",
}


def _chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in seen and len(seen) < 16:
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def reason(exc: BaseException) -> str:
    """A short reason for a transport failure: `connection refused`, `host name not found`,
    `connection timed out`, `no answer in time`, … (else the exception's own words)."""
    chain = _chain(exc)
    for one in chain:
        if isinstance(one, socket.gaierror):
            return "host name not found"
        if isinstance(one, OSError) and one.errno in _ERRNOS:
            return _ERRNOS[one.errno]
    for one in chain:
        if isinstance(one, httpx.ConnectTimeout):
            return "connection timed out"
        if isinstance(one, httpx.TimeoutException | TimeoutError):
            return "no answer in time"
        if isinstance(one, httpx.ReadError | httpx.WriteError):
            return "the connection broke mid-answer"
        if isinstance(one, httpx.RemoteProtocolError):
            return "the connection closed before the answer"
        if isinstance(one, httpx.UnsupportedProtocol):
            return "not an http:// or https:// URL"
    text = str(exc).strip()
    return text or type(exc).__name__


def unreachable(url: str, exc: BaseException) -> str:
    """`cannot reach URL (REASON)`: the message of an UnavailableError."""
    return f"cannot reach {url} ({reason(exc)})"
