"""AgentClient's circuit breakers against respx-scripted agents: counted in requests that
reached the router, so "refused fast" means no request at all."""

from __future__ import annotations

import asyncio

import anyio
import httpx
import pytest

from a2a_handoff.client.client import AgentClient
from a2a_handoff.client.retry import RetryPolicy
from a2a_handoff.errors import CircuitOpenError, RemoteError, UnavailableError
from tests.a2a_handoff.client.scripted import (
    OTHER,
    TASK,
    URL,
    FakeClock,
    html,
    ok,
    rpc_error,
    scripted,
)

pytestmark = pytest.mark.anyio

ONCE = RetryPolicy(attempts=1, wait=False)


async def fail(client: AgentClient, url: str, times: int) -> None:
    for _ in range(times):
        with pytest.raises(UnavailableError):
            await client.get_task(url, "t1")


async def test_opens_after_threshold_failures_and_then_refuses_without_a_request() -> None:
    async with scripted(retry=ONCE, breaker_threshold=3) as (router, client):
        route = router.post(URL).mock(return_value=httpx.Response(503))
        await fail(client, URL, 2)
        assert client.breakers()["http://billing.test:8000"]["state"] == "closed"
        await fail(client, URL, 1)
        assert route.call_count == 3
        for _ in range(10):
            with pytest.raises(CircuitOpenError, match="failed 3 times in a row"):
                await client.get_task(URL, "t1")
        with pytest.raises(CircuitOpenError):  # non-idempotent calls too
            await client.cancel(URL, "t1")
        assert route.call_count == 3


async def test_the_breaker_counts_attempts_so_retries_open_it_mid_call() -> None:
    async with scripted(breaker_threshold=2) as (router, client):  # 5 attempts a call
        route = router.post(URL).mock(side_effect=httpx.ConnectError)
        with pytest.raises(CircuitOpenError):
            await client.get_task(URL, "t1")
    assert route.call_count == 2


@pytest.mark.parametrize(
    "answer",
    [html(500), html(404), rpc_error({"code": -32603, "message": "boom"})],
    ids=["html-500", "html-404", "jsonrpc-error"],
)
async def test_an_answer_even_an_error_page_shows_the_agent_up(answer: httpx.Response) -> None:
    async with scripted(retry=ONCE, breaker_threshold=2) as (router, client):
        route = router.post(URL).mock(return_value=answer)
        for _ in range(5):
            with pytest.raises((UnavailableError, RemoteError)):
                await client.get_task(URL, "t1")
        assert client.breakers()["http://billing.test:8000"]["state"] == "closed"
    assert route.call_count == 5


async def test_a_success_resets_the_count_of_failures() -> None:
    async with scripted(retry=ONCE, breaker_threshold=3) as (router, client):
        route = router.post(URL).mock(
            side_effect=[httpx.Response(502)] * 2 + [ok(TASK)] + [httpx.Response(502)] * 2
        )
        await fail(client, URL, 2)
        await client.get_task(URL, "t1")
        await fail(client, URL, 2)  # 2 in a row again: still closed
        assert client.breakers()["http://billing.test:8000"] == {
            "state": "closed",
            "consecutiveFailures": 2,
        }
    assert route.call_count == 5


async def test_after_the_cooldown_one_probe_goes_and_its_success_closes_the_breaker() -> None:
    clock = FakeClock()
    settings = {"retry": ONCE, "breaker_threshold": 2, "breaker_cooldown": 30, "clock": clock}
    async with scripted(**settings) as (router, client):
        route = router.post(URL).mock(side_effect=[httpx.ConnectError] * 2 + [ok(TASK)] * 3)
        await fail(client, URL, 2)
        clock.now += 29.9
        with pytest.raises(CircuitOpenError):
            await client.get_task(URL, "t1")
        assert route.call_count == 2
        clock.now += 0.1
        assert client.breakers()["http://billing.test:8000"]["state"] == "half_open"
        assert (await client.get_task(URL, "t1")).id == "t1"  # the probe
        assert client.breakers()["http://billing.test:8000"]["state"] == "closed"
        await client.get_task(URL, "t1")
        await client.get_task(URL, "t1")
    assert route.call_count == 5


async def test_a_failed_probe_opens_the_breaker_for_a_fresh_cooldown() -> None:
    clock = FakeClock()
    settings = {"retry": ONCE, "breaker_threshold": 2, "breaker_cooldown": 30, "clock": clock}
    async with scripted(**settings) as (router, client):
        route = router.post(URL).mock(return_value=httpx.Response(504))
        await fail(client, URL, 2)
        clock.now += 30
        await fail(client, URL, 1)  # the probe
        assert route.call_count == 3
        clock.now += 29
        with pytest.raises(CircuitOpenError):
            await client.get_task(URL, "t1")
        assert route.call_count == 3


async def test_while_the_probe_is_out_other_calls_are_refused_without_a_request() -> None:
    clock = FakeClock()
    answer = asyncio.Event()

    arrived: list[httpx.Request] = []
    probing = asyncio.Event()

    async def down_then_slow(request: httpx.Request) -> httpx.Response:
        arrived.append(request)
        if len(arrived) == 1:
            return httpx.Response(503)
        if len(arrived) == 2:  # the probe: answered once the others were refused
            probing.set()
            await answer.wait()
        return ok(TASK)

    settings = {"retry": ONCE, "breaker_threshold": 1, "breaker_cooldown": 5, "clock": clock}
    async with scripted(**settings) as (router, client):
        route = router.post(URL).mock(side_effect=down_then_slow)
        await fail(client, URL, 1)
        clock.now += 5
        probe = asyncio.create_task(client.get_task(URL, "t1"))
        with anyio.fail_after(5):
            await probing.wait()
        for _ in range(3):
            with pytest.raises(CircuitOpenError):
                await client.get_task(URL, "t1")
        answer.set()
        assert (await probe).id == "t1"
    assert len(arrived) == route.call_count == 2


async def test_each_agent_has_its_own_breaker() -> None:
    async with scripted(retry=ONCE, breaker_threshold=2) as (router, client):
        down = router.post(URL).mock(side_effect=httpx.ConnectError)
        up = router.post(OTHER).mock(return_value=ok(TASK))
        await fail(client, URL, 2)
        with pytest.raises(CircuitOpenError):
            await client.get_task(URL + "another/path", "t1")  # one endpoint, another path
        for _ in range(3):
            assert (await client.get_task(OTHER, "t1")).id == "t1"
        assert client.breakers() == {
            "http://billing.test:8000": {"state": "open", "consecutiveFailures": 2},
            "http://shipping.test:8000": {"state": "closed", "consecutiveFailures": 0},
        }
    assert (down.call_count, up.call_count) == (2, 3)
