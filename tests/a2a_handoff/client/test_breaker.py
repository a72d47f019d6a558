"""The circuit breaker's rules, one test each, on an injected fake clock."""

from __future__ import annotations

import asyncio

import pytest

from a2a_handoff.client.breaker import BreakerState, CircuitBreaker
from a2a_handoff.errors import CircuitOpenError

pytestmark = pytest.mark.anyio

THRESHOLD = 3
COOLDOWN = 10.0


class FakeClock:
    """A clock that only moves when the test moves it."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class Boom(Exception):
    pass


def make_breaker(clock: FakeClock, **kwargs: object) -> CircuitBreaker:
    args: dict[str, object] = {"threshold": THRESHOLD, "cooldown": COOLDOWN, **kwargs}
    return CircuitBreaker("http://target.test", clock=clock, **args)  # type: ignore[arg-type]


def state(breaker: CircuitBreaker) -> BreakerState:
    """The state now (a call, so type checkers do not narrow it across clock moves)."""
    return breaker.state


async def succeed(breaker: CircuitBreaker) -> str:
    async with breaker.guard():
        return "ok"


async def fail(breaker: CircuitBreaker) -> None:
    with pytest.raises(Boom):
        async with breaker.guard():
            raise Boom


async def open_breaker(breaker: CircuitBreaker) -> None:
    for _ in range(breaker.threshold):
        await fail(breaker)
    assert state(breaker) is BreakerState.OPEN


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


async def test_closed_breaker_passes_calls(clock: FakeClock) -> None:
    breaker = make_breaker(clock)
    for _ in range(10):
        assert await succeed(breaker) == "ok"
    assert state(breaker) is BreakerState.CLOSED
    assert breaker.failures == 0


async def test_opens_after_exactly_threshold_consecutive_failures(clock: FakeClock) -> None:
    breaker = make_breaker(clock)
    for count in range(1, THRESHOLD):
        await fail(breaker)
        assert breaker.failures == count
        assert state(breaker) is BreakerState.CLOSED  # N-1 failures do not open it
    await fail(breaker)
    assert breaker.failures == THRESHOLD
    assert state(breaker) is BreakerState.OPEN


async def test_a_success_in_between_resets_the_count(clock: FakeClock) -> None:
    breaker = make_breaker(clock)
    for _ in range(THRESHOLD - 1):
        await fail(breaker)
    await succeed(breaker)
    assert breaker.failures == 0
    for _ in range(THRESHOLD - 1):
        await fail(breaker)
    assert state(breaker) is BreakerState.CLOSED  # 2 + 2 failures, never 3 in a row


async def test_open_breaker_fails_fast_without_running_the_call(clock: FakeClock) -> None:
    breaker = make_breaker(clock)
    await open_breaker(breaker)
    ran = False
    clock.advance(COOLDOWN - 0.001)
    with pytest.raises(CircuitOpenError, match=r"target\.test"):
        async with breaker.guard():
            ran = True
    assert not ran
    assert state(breaker) is BreakerState.OPEN
    assert breaker.failures == THRESHOLD  # a refused call is not another failure


async def test_after_cooldown_exactly_one_probe_goes_through(clock: FakeClock) -> None:
    breaker = make_breaker(clock)
    await open_breaker(breaker)
    clock.advance(COOLDOWN)
    assert state(breaker) is BreakerState.HALF_OPEN
    release = asyncio.Event()
    entered = 0

    async def guarded() -> str:
        nonlocal entered
        async with breaker.guard():
            entered += 1
            await release.wait()
            return "probed"

    tasks = [asyncio.create_task(guarded()) for _ in range(10)]
    await asyncio.sleep(0)  # let every task reach the breaker
    await asyncio.sleep(0)
    assert entered == 1
    assert state(breaker) is BreakerState.HALF_OPEN  # the probe is out
    release.set()
    results = await asyncio.gather(*tasks, return_exceptions=True)
    assert results.count("probed") == 1
    refused = [r for r in results if isinstance(r, CircuitOpenError)]
    assert len(refused) == 9


async def test_probe_success_closes_the_breaker(clock: FakeClock) -> None:
    breaker = make_breaker(clock)
    await open_breaker(breaker)
    clock.advance(COOLDOWN)
    assert await succeed(breaker) == "ok"
    assert state(breaker) is BreakerState.CLOSED
    assert breaker.failures == 0
    assert await succeed(breaker) == "ok"  # and calls pass again, no probe limit


async def test_probe_failure_reopens_with_a_fresh_cooldown(clock: FakeClock) -> None:
    breaker = make_breaker(clock)
    await open_breaker(breaker)
    clock.advance(COOLDOWN + 5)  # the probe goes 5 s after the cool-down ended
    await fail(breaker)
    assert state(breaker) is BreakerState.OPEN
    clock.advance(COOLDOWN - 1)  # long past the first cool-down, short of the fresh one
    with pytest.raises(CircuitOpenError):
        await succeed(breaker)
    clock.advance(1)
    assert state(breaker) is BreakerState.HALF_OPEN
    assert await succeed(breaker) == "ok"
    assert state(breaker) is BreakerState.CLOSED


async def test_cancelled_call_is_neither_success_nor_failure(clock: FakeClock) -> None:
    breaker = make_breaker(clock)
    for _ in range(THRESHOLD - 1):
        await fail(breaker)
    started = asyncio.Event()

    async def hangs() -> None:
        async with breaker.guard():
            started.set()
            await asyncio.Event().wait()

    task = asyncio.create_task(hangs())
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert breaker.failures == THRESHOLD - 1  # not reset (no success), not raised (no failure)
    assert state(breaker) is BreakerState.CLOSED
    await fail(breaker)  # so one more failure reaches the threshold
    assert state(breaker) is BreakerState.OPEN


async def test_cancelled_probe_frees_the_probe_slot(clock: FakeClock) -> None:
    breaker = make_breaker(clock)
    await open_breaker(breaker)
    clock.advance(COOLDOWN)
    started = asyncio.Event()

    async def hangs() -> None:
        async with breaker.guard():
            started.set()
            await asyncio.Event().wait()

    probe = asyncio.create_task(hangs())
    await started.wait()
    with pytest.raises(CircuitOpenError):  # the slot is taken while the probe is out
        await succeed(breaker)
    probe.cancel()
    with pytest.raises(asyncio.CancelledError):
        await probe
    assert breaker.failures == THRESHOLD
    assert state(breaker) is BreakerState.HALF_OPEN
    assert await succeed(breaker) == "ok"  # the next call is the probe
    assert state(breaker) is BreakerState.CLOSED


async def test_late_failure_of_an_earlier_call_does_not_free_the_probe_slot(
    clock: FakeClock,
) -> None:
    """While the probe is out, calls fail fast — even if a call admitted earlier fails now."""
    breaker = make_breaker(clock)
    straggler_may_fail = asyncio.Event()
    straggler_started = asyncio.Event()

    async def straggler() -> None:
        async with breaker.guard():  # admitted while closed
            straggler_started.set()
            await straggler_may_fail.wait()
            raise Boom

    late = asyncio.create_task(straggler())
    await straggler_started.wait()
    await open_breaker(breaker)
    clock.advance(COOLDOWN)
    probe_started = asyncio.Event()

    async def probe() -> None:
        async with breaker.guard():
            probe_started.set()
            await asyncio.Event().wait()

    probing = asyncio.create_task(probe())
    await probe_started.wait()
    straggler_may_fail.set()
    with pytest.raises(Boom):
        await late
    clock.advance(COOLDOWN)
    entered = False
    try:
        with pytest.raises(CircuitOpenError):  # the probe is still out: no second probe
            async with breaker.guard():
                entered = True
    finally:
        probing.cancel()
        with pytest.raises(asyncio.CancelledError):
            await probing
    assert not entered


async def test_is_failure_false_counts_as_success_but_is_raised(clock: FakeClock) -> None:
    breaker = make_breaker(clock, is_failure=lambda exc: not isinstance(exc, LookupError))
    for _ in range(THRESHOLD - 1):
        await fail(breaker)
    with pytest.raises(KeyError):
        async with breaker.guard():
            raise KeyError("the target answered: no such task")
    assert breaker.failures == 0
    assert state(breaker) is BreakerState.CLOSED
    await open_breaker(breaker)
    clock.advance(COOLDOWN)
    with pytest.raises(KeyError):  # a probe answered with a non-failure closes the breaker
        async with breaker.guard():
            raise KeyError("still an answer")
    assert state(breaker) is BreakerState.CLOSED


async def test_snapshot_shape(clock: FakeClock) -> None:
    breaker = make_breaker(clock)
    assert breaker.snapshot() == {"state": "closed", "consecutiveFailures": 0}
    await fail(breaker)
    assert breaker.snapshot() == {"state": "closed", "consecutiveFailures": 1}
    for _ in range(THRESHOLD - 1):
        await fail(breaker)
    assert breaker.snapshot() == {"state": "open", "consecutiveFailures": THRESHOLD}
    clock.advance(COOLDOWN)
    assert breaker.snapshot() == {"state": "half_open", "consecutiveFailures": THRESHOLD}


@pytest.mark.parametrize(
    "kwargs", [{"threshold": 0}, {"threshold": -1}, {"cooldown": -0.1}], ids=str
)
def test_constructor_rejects_bad_settings(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="threshold"):
        CircuitBreaker("x", **kwargs)  # type: ignore[arg-type]


def test_constructor_accepts_threshold_one() -> None:
    assert CircuitBreaker("x", threshold=1, cooldown=0).threshold == 1
