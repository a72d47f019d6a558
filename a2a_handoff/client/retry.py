"""Opinionated retries for calls to other agents: which failures, how often, how long.

Only idempotent calls are retried — reads, keyed handoff creates, sends whose message id makes
them deduplicated — on transport errors and on HTTP 429, 502, 503 and 504, with exponential
backoff and jitter, capped in attempts *and* in total time (the first attempt counts). Every
attempt goes through the endpoint's circuit breaker; an open breaker fails fast and is never
retried.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import httpx
from tenacity import (
    AsyncRetrying,
    retry_if_exception,
    stop_after_attempt,
    stop_after_delay,
    wait_exponential_jitter,
    wait_none,
)

from a2a_handoff.client.breaker import CircuitBreaker
from a2a_handoff.client.reasons import unreachable
from a2a_handoff.errors import CircuitOpenError, HandoffError, UnavailableError

RETRYABLE_STATUS = frozenset({429, 502, 503, 504})

Answer = tuple[int, bytes]
"""An HTTP answer: its status and its whole body."""


class RetryableStatus(HandoffError):
    """An HTTP status worth another attempt (the endpoint is overloaded or restarting)."""

    def __init__(self, status_code: int) -> None:
        self.status_code = status_code
        super().__init__(f"HTTP {status_code}")


def is_transient(exc: BaseException) -> bool:
    """Worth retrying (and a failure for the breaker): the endpoint did not answer well."""
    return isinstance(exc, httpx.TransportError | RetryableStatus)


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How often and how long to try: attempts and total time capped, waits exponential."""

    attempts: int = 5
    total_seconds: float = 10.0
    initial_wait: float = 0.05
    max_wait: float = 2.0
    wait: bool = True  # False: retry at once, for tests

    def backoff(self, failures: int) -> float:
        """Seconds to wait after `failures` failed attempts (1 or more): exponential from
        `initial_wait`, capped at `max_wait`. Without jitter: a caller that paces one job
        (a handoff's delivery) waits on the breaker's cool-down for the endpoint anyway."""
        if not self.wait:
            return 0.0
        return min(self.max_wait, self.initial_wait * 2.0 ** min(max(failures, 1) - 1, 64))

    def exhausted(self, attempts: int, elapsed: float) -> bool:
        """Whether `attempts` made over `elapsed` seconds use the policy up."""
        return attempts >= self.attempts or elapsed >= self.total_seconds

    def retrying(self, spent: float = 0.0) -> AsyncRetrying:
        """Tenacity's loop for one call; `spent`: seconds the call has taken already."""
        return AsyncRetrying(
            stop=stop_after_attempt(self.attempts)
            | stop_after_delay(max(0.0, self.total_seconds - spent)),
            wait=(
                wait_exponential_jitter(
                    initial=self.initial_wait, max=self.max_wait, jitter=self.initial_wait
                )
                if self.wait
                else wait_none()
            ),
            retry=retry_if_exception(is_transient),
            reraise=True,
        )


async def attempt(breaker: CircuitBreaker, send: Callable[[], Awaitable[Answer]]) -> Answer:
    """One attempt through the endpoint's breaker; a retryable status raises."""
    async with breaker.guard():
        answer = await send()
        if answer[0] in RETRYABLE_STATUS:
            raise RetryableStatus(answer[0])
        return answer


async def request(
    breaker: CircuitBreaker,
    policy: RetryPolicy,
    url: str,
    send: Callable[[], Awaitable[Answer]],
    *,
    idempotent: bool,
) -> Answer:
    """`send()` through `breaker`, retried under `policy` when `idempotent`.

    Transport failures and retryable statuses end as UnavailableError — saying whether any
    attempt may have reached the endpoint (a connection was made), not only the last.
    """
    started = time.monotonic()
    reached = False

    async def one() -> Answer:
        nonlocal reached
        try:
            return await attempt(breaker, send)
        except (httpx.ConnectError, CircuitOpenError):
            raise
        except Exception:
            reached = True
            raise

    try:
        try:
            return await one()
        except Exception as exc:
            if not idempotent or not is_transient(exc):
                raise
            first: BaseException | None = exc
        # Retries: tenacity's first attempt is the one that just failed (so its counts,
        # waits and time budget are the policy's), without its bookkeeping on calls that
        # succeed at once.
        async for tried in policy.retrying(spent=time.monotonic() - started):
            with tried:
                if first is not None:
                    failed, first = first, None
                    raise failed
                return await one()
    except RetryableStatus as exc:
        error = UnavailableError(f"cannot reach {url} (HTTP {exc.status_code})")
        error.may_have_arrived = reached
        raise error from exc
    except httpx.TransportError as exc:
        error = UnavailableError(unreachable(url, exc))
        error.may_have_arrived = reached
        raise error from exc
    raise AssertionError("unreachable: tenacity re-raises the last error")
