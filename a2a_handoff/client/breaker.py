"""A circuit breaker per target endpoint.

    closed ──N consecutive failures──▶ open ──cool-down──▶ half-open (ONE probe)
      ▲                                 ▲                      │
      └────────── probe succeeded ──────┼──── probe failed ────┘

While open, and while the half-open probe is out, calls fail fast with CircuitOpenError
(which is never retried). A cancelled call counts as neither success nor failure; a cancelled
probe frees the probe slot. `is_failure` decides which exceptions count as failures — an
answer from the target, even an error answer, shows it is up. The clock is injectable.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from enum import StrEnum

from a2a_handoff.client.reasons import reason
from a2a_handoff.errors import CircuitOpenError
from a2a_handoff.observe import events


class BreakerState(StrEnum):
    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


def _any_exception(exc: BaseException) -> bool:
    return True


class CircuitBreaker:
    """Closed → open after `threshold` consecutive failures → one probe after `cooldown` s."""

    def __init__(
        self,
        name: str = "",
        *,
        threshold: int = 5,
        cooldown: float = 10.0,
        is_failure: Callable[[BaseException], bool] = _any_exception,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if threshold < 1 or cooldown < 0:
            raise ValueError("threshold must be ≥ 1 and cooldown ≥ 0")
        self.name = name
        self.threshold = threshold
        self.cooldown = cooldown
        self.is_failure = is_failure
        self.clock = clock
        self.failures = 0
        self._opened_at: float | None = None
        self._probing = False
        self.last_reason = ""  # why the last failure failed, in words

    @property
    def state(self) -> BreakerState:
        if self._opened_at is None:
            return BreakerState.CLOSED
        if self._probing or self.clock() - self._opened_at >= self.cooldown:
            return BreakerState.HALF_OPEN
        return BreakerState.OPEN

    def _admit(self) -> bool:
        """Whether a call may go; True marks it as the probe when half-open."""
        state = self.state
        if state is BreakerState.CLOSED:
            return False
        if state is BreakerState.HALF_OPEN and not self._probing:
            self._probing = True
            events.breaker(self.name, "half_open", self.failures, routine=True)
            return True
        last = f" (last: {self.last_reason})" if self.last_reason else ""
        raise CircuitOpenError(
            f"not calling {self.name or 'this endpoint'}: it failed {self.failures} times in a"
            f" row{last}, so its circuit breaker is open for {self.cooldown:g} s"
        )

    @asynccontextmanager
    async def guard(self) -> AsyncIterator[None]:
        """Wrap one call: `async with breaker.guard(): await call()`."""
        probe = self._admit()
        try:
            yield
        except BaseException as exc:
            if isinstance(exc, GeneratorExit | KeyboardInterrupt | SystemExit):
                raise
            if not isinstance(exc, Exception):  # cancelled: neither success nor failure
                if probe:
                    self._probing = False
                raise
            if self.is_failure(exc):
                self._failure(probe, exc)
            else:
                self._success()
            raise
        self._success()

    def _success(self) -> None:
        if self._opened_at is not None:
            events.breaker(self.name, "closed", self.failures)
        self.failures = 0
        self._opened_at = None
        self._probing = False

    def _failure(self, probe: bool, exc: BaseException | None = None) -> None:
        self.failures += 1
        if exc is not None:
            self.last_reason = reason(exc)
        if probe:  # the probe failed: open again, with a fresh cool-down
            self._probing = False
            self._opened_at = self.clock()
            events.breaker(self.name, "open", self.failures, routine=True)
        elif self._opened_at is None and self.failures >= self.threshold:
            self._opened_at = self.clock()
            events.breaker(self.name, "open", self.failures)
        # A late failure of a call admitted before the breaker opened changes nothing else:
        # it must neither free the probe slot nor restart the cool-down.

    def retry_in(self) -> float:
        """Seconds until the breaker lets a call through again (0: it does now)."""
        if self._opened_at is None or self._probing:
            return 0.0
        return max(0.0, self.cooldown - (self.clock() - self._opened_at))

    def snapshot(self) -> dict[str, object]:
        return {"state": self.state.value, "consecutiveFailures": self.failures}
