"""Whose trace a request may join: a caller's sampled `traceparent` makes this agent record
and export every span of the request, so it is a way to make the agent work harder.

A trusted agent's or an operator's trace context (under API-key auth: its key's principal is
one of the trust list's or an operator) is always followed: a handoff's trace goes on across
agents. Anyone else's — every caller when the agent has no API keys, since nobody is told
apart then — is followed for at most `per_second` requests a second (a token bucket, in this
process); beyond that the request is traced as a new one, as this agent's own sampler
decides, and its `traceparent` is ignored.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol

from starlette.datastructures import Headers

DEFAULT_PER_SECOND = 10.0


class _Auth(Protocol):
    def recognised(self, headers: Headers, peer: str | None = None) -> str | None: ...


class TraceAdmission:
    """Decides, per request, whether its caller's trace context is followed."""

    def __init__(
        self,
        auth: _Auth | None,
        trusted: frozenset[str],
        per_second: float = DEFAULT_PER_SECOND,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.auth = auth
        self.trusted = trusted
        self.per_second = per_second
        self.clock = clock
        self._tokens = per_second
        self._at = clock()

    def admits(self, headers: Headers, peer: str | None = None) -> bool:
        """`peer`: the principal of the connection's client certificate (mutual TLS)."""
        if self.auth is not None:
            principal = self.auth.recognised(headers, peer)
            if principal is None:
                return False  # an unproven caller never chooses what is recorded
            if principal in self.trusted:
                return True
        return self._take()

    def _take(self) -> bool:
        now = self.clock()
        self._tokens = min(self.per_second, self._tokens + (now - self._at) * self.per_second)
        self._at = now
        if self._tokens < 1.0:
            return False
        self._tokens -= 1.0
        return True
