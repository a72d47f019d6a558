"""Fail fast while a networked store is down, and notice at once when it is back.

A store call that cannot reach its server waits for its timeouts (a paused server accepts the
connection and never answers). Once one call failed so, `StoreGuard` fails the next ones at
once with `StoreDownError` — a clear error for the caller instead of a wait — and lets one
call through every `probe_every` seconds to see whether the server answers again; the first
success closes the guard. Errors that are not about reaching the server (a script error, a
wrong type) pass through unchanged and do not open it. `ServerPing` gives such a store its
`ping` and `problem` (what /health says) from one guarded round trip.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from a2a_handoff.errors import StoreDownError, StoreError

T = TypeVar("T")


class StoreGuard:
    """Open after a failure to reach the server; one probe a period until it answers."""

    def __init__(
        self, unreachable: tuple[type[BaseException], ...], probe_every: float = 0.5
    ) -> None:
        self.unreachable = unreachable
        self.probe_every = probe_every
        self.reason: str | None = None  # why the last call failed, while the guard is open
        self._next_probe = 0.0
        self._probing = False

    @property
    def down(self) -> bool:
        return self.reason is not None

    async def call(self, run: Callable[[], Awaitable[T]]) -> T:
        """`run()`, unless the server is known down and another call is probing it."""
        probing = False
        if self.reason is not None:
            if self._probing or time.monotonic() < self._next_probe:
                raise StoreDownError(f"the store is unreachable: {self.reason}")
            self._probing = probing = True
        try:
            result = await run()
        except self.unreachable as exc:
            self.reason = f"{type(exc).__name__}: {exc}"[:200] or type(exc).__name__
            self._next_probe = time.monotonic() + self.probe_every
            raise StoreDownError(f"the store is unreachable: {self.reason}") from exc
        finally:
            if probing:
                self._probing = False
        self.reason = None
        return result


class ServerPing:
    """`ping` and `problem` of a store on a server, from its `_ping`: one round trip, run
    through the store's guard (a StoreError, `StoreDownError` included, when unreachable)."""

    async def _ping(self) -> None:
        raise NotImplementedError

    async def ping(self) -> bool:
        return await self.problem() is None

    async def problem(self) -> str | None:
        """None when the server answers, else why it did not."""
        try:
            await self._ping()
        except StoreError as exc:
            return f"unreachable: {exc}"
        return None
