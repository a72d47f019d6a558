"""AgentClient over httpx.MockTransport: retries, breakers, cards, credentials, SSE."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest

from a2a_handoff.client.client import AgentClient
from a2a_handoff.client.replicas import never_arrived
from a2a_handoff.client.retry import RetryPolicy
from a2a_handoff.client.transport import Http11Transport
from a2a_handoff.errors import CircuitOpenError, RemoteError, UnavailableError
from a2a_handoff.protocol.models import Message, Role, StreamResponse, Task
from a2a_handoff.protocol.states import TaskState

pytestmark = pytest.mark.anyio

URL = "http://a.test:8000/"
OTHER = "http://a.test:8001/"
TASK = {"id": "t", "contextId": "c", "status": {"state": "TASK_STATE_WORKING"}}
CARD = {
    "name": "echo",
    "description": "Echoes",
    "supportedInterfaces": [{"url": URL}],
    "version": "1.0.0",
    "capabilities": {"streaming": True},
}


def ok(result: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": "1", "result": result}


def rpc_error(code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": "1", "error": {"code": code, "message": message}}


Step = int | dict[str, Any] | type[Exception] | Callable[[httpx.Request], httpx.Response]


class Script:
    """A mock endpoint: answers each request with the next step; the last one repeats.

    A step is an HTTP status (a plain-text answer), a JSON body (HTTP 200), an httpx
    transport error class (raised), or a function of the request.
    """

    def __init__(self, *steps: Step) -> None:
        self.steps = list(steps)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        step = self.steps.pop(0) if len(self.steps) > 1 else self.steps[0]
        if isinstance(step, int):
            return httpx.Response(step, text=f"HTTP {step}")
        if isinstance(step, dict):
            return httpx.Response(200, json=step)
        if isinstance(step, type):
            raise step("scripted failure", request=request)
        return step(request)

    def bodies(self) -> list[dict[str, Any]]:
        return [json.loads(r.content) for r in self.requests]


@asynccontextmanager
async def agent_client(
    handler: Callable[[httpx.Request], Any], **kwargs: Any
) -> AsyncIterator[AgentClient]:
    kwargs.setdefault("retry", RetryPolicy(wait=False))
    client = AgentClient(httpx.AsyncClient(transport=httpx.MockTransport(handler)), **kwargs)
    try:
        yield client
    finally:
        await client.aclose()


class FakeClock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def message(text: str = "hi") -> Message:
    return Message(message_id="m-1", role=Role.USER, parts=[{"text": text}])


# -- retries ------------------------------------------------------------------------------


async def test_idempotent_call_is_retried_on_transport_errors() -> None:
    script = Script(httpx.ConnectError, httpx.ConnectError, ok(TASK))
    async with agent_client(script) as client:
        task = await client.get_task(URL, "t")
    assert task.id == "t"
    assert len(script.requests) == 3
    assert {b["method"] for b in script.bodies()} == {"GetTask"}


async def test_a_retried_call_says_it_may_have_arrived_when_an_earlier_attempt_could_have() -> None:
    """The last attempt's connection refused does not hide an earlier one that was read
    (sent, no answer): the call may have arrived — what a handoff's expiry relies on."""
    script = Script(httpx.ReadError, httpx.ConnectError)
    async with agent_client(script) as client:
        with pytest.raises(UnavailableError) as caught:
            await client.get_task(URL, "t")
    assert caught.value.may_have_arrived
    assert not never_arrived(caught.value)
    refused_only = Script(httpx.ConnectError)
    async with agent_client(refused_only) as client:
        with pytest.raises(UnavailableError) as caught:
            await client.get_task(URL, "t")
    assert never_arrived(caught.value)


@pytest.mark.parametrize("status", [429, 502, 503, 504])
async def test_idempotent_call_is_retried_on_retryable_status(status: int) -> None:
    script = Script(status, status, ok(TASK))
    async with agent_client(script) as client:
        task = await client.get_task(URL, "t")
    assert task.status.state is TaskState.WORKING
    assert len(script.requests) == 3


async def test_send_is_retried_as_idempotent() -> None:
    script = Script(503, ok({"task": TASK}))
    async with agent_client(script) as client:
        result = await client.send(URL, message())
    assert isinstance(result, Task)
    assert len(script.requests) == 2
    assert script.bodies()[0]["params"] == script.bodies()[1]["params"]  # same message id


@pytest.mark.parametrize("failure", [503, httpx.ConnectError], ids=["503", "connect"])
async def test_non_idempotent_call_is_not_retried(failure: Step) -> None:
    script = Script(failure, ok(TASK))
    async with agent_client(script) as client:
        with pytest.raises(UnavailableError):
            await client.cancel(URL, "t")
    assert len(script.requests) == 1


@pytest.mark.parametrize("status", [500, 400])
async def test_500_and_400_are_not_retried(status: int) -> None:
    script = Script(status, ok(TASK))
    async with agent_client(script) as client:
        with pytest.raises(UnavailableError, match=str(status)):
            await client.get_task(URL, "t")
    assert len(script.requests) == 1


async def test_attempts_are_capped() -> None:
    script = Script(503)
    async with agent_client(script, retry=RetryPolicy(attempts=3, wait=False)) as client:
        with pytest.raises(UnavailableError, match="503"):
            await client.get_task(URL, "t")
    assert len(script.requests) == 3


async def calls_until_the_time_runs_out(total_seconds: float, each: float) -> int:
    """Requests a GetTask makes to an endpoint answering 503 after `each` seconds."""
    requests = 0

    async def slow(request: httpx.Request) -> httpx.Response:
        nonlocal requests
        requests += 1
        await asyncio.sleep(each)
        return httpx.Response(503)

    policy = RetryPolicy(attempts=1000, total_seconds=total_seconds, wait=False)
    async with agent_client(slow, retry=policy, breaker_threshold=1000) as client:
        with pytest.raises(UnavailableError, match="503"):
            await client.get_task(URL, "t")
    return requests


async def test_total_time_is_capped() -> None:
    started = time.monotonic()
    requests = await calls_until_the_time_runs_out(0.1, each=0.05)
    assert time.monotonic() - started < 1.0
    assert 2 <= requests <= 5


async def test_the_time_budget_counts_the_first_attempt() -> None:
    # 0.4 s of the 0.5 s are gone after the first attempt: one retry starts, no third.
    assert await calls_until_the_time_runs_out(0.5, each=0.4) == 2


async def test_params_that_are_not_json_are_refused_before_sending() -> None:
    script = Script(ok(TASK))
    async with agent_client(script) as client:
        with pytest.raises(ValueError, match="JSON"):
            await client.call(URL, "GetTask", {"id": "t", "n": float("nan")})
    assert script.requests == []


async def test_calls_go_direct_unless_the_url_carries_credentials() -> None:
    # The direct transport gets plain http URLs; one with user info goes through httpx,
    # which turns it into Basic authentication.
    script = Script(ok(TASK))
    direct = Http11Transport(fallback=httpx.MockTransport(script))
    client = AgentClient(httpx.AsyncClient(transport=httpx.MockTransport(script)), direct=direct)
    try:
        await client.get_task("http://user:secret@a.test:8000/", "t")
        (sent,) = script.requests
        assert sent.headers["authorization"].startswith("Basic ")
        with pytest.raises(UnavailableError, match="connection refused"):  # direct: a real socket
            await client.call("http://127.0.0.1:1/", "GetTask", {"id": "t"})
        assert len(script.requests) == 1
    finally:
        await client.aclose()


async def test_jsonrpc_error_surfaces_as_remote_error_and_is_not_retried() -> None:
    script = Script(rpc_error(-32001, "Task not found: t"), ok(TASK))
    async with agent_client(script) as client:
        with pytest.raises(RemoteError) as caught:
            await client.get_task(URL, "t")
    assert caught.value.code == -32001
    assert caught.value.message == "Task not found: t"
    assert caught.value.url == URL
    assert len(script.requests) == 1


async def test_jsonrpc_error_with_http_error_status_is_still_remote_error() -> None:
    def unauthorized(request: httpx.Request) -> httpx.Response:
        return httpx.Response(401, json=rpc_error(-32101, "Authentication required"))

    script = Script(unauthorized)
    async with agent_client(script) as client:
        with pytest.raises(RemoteError) as caught:
            await client.get_task(URL, "t")
    assert (caught.value.code, caught.value.message) == (-32101, "Authentication required")
    assert len(script.requests) == 1


# -- breakers -----------------------------------------------------------------------------


async def trip(client: AgentClient, url: str, threshold: int) -> None:
    for _ in range(threshold):
        with pytest.raises(UnavailableError):
            await client.get_task(url, "t")


async def test_open_breaker_fails_fast_without_a_request() -> None:
    script = Script(503)
    policy = RetryPolicy(attempts=1, wait=False)
    async with agent_client(script, retry=policy, breaker_threshold=3) as client:
        await trip(client, URL, 3)
        assert len(script.requests) == 3
        with pytest.raises(CircuitOpenError):
            await client.get_task(URL, "t")
        with pytest.raises(CircuitOpenError):
            await client.cancel(URL, "t")
    assert len(script.requests) == 3


async def test_circuit_open_error_is_never_retried() -> None:
    script = Script(503)
    async with agent_client(script, breaker_threshold=3) as client:  # 5 attempts a call
        with pytest.raises(CircuitOpenError):  # attempts 1-3 open it; the 4th is refused
            await client.get_task(URL, "t")
        assert len(script.requests) == 3
        breaker = client.breaker(URL)
        guard = breaker.guard
        guarded = 0

        def counting_guard() -> Any:
            nonlocal guarded
            guarded += 1
            return guard()

        breaker.guard = counting_guard  # type: ignore[method-assign]
        with pytest.raises(CircuitOpenError):
            await client.get_task(URL, "t")
    assert guarded == 1  # one refusal, no retry of it
    assert len(script.requests) == 3


async def test_error_answers_do_not_open_the_breaker() -> None:
    script = Script(rpc_error(-32001, "Task not found"))
    async with agent_client(script, breaker_threshold=2) as client:
        for _ in range(5):
            with pytest.raises(RemoteError):
                await client.get_task(URL, "t")
        assert client.breakers()["http://a.test:8000"]["state"] == "closed"
    assert len(script.requests) == 5


async def test_breakers_are_per_endpoint() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.port == 8000:
            return httpx.Response(503)
        return httpx.Response(200, json=ok(TASK))

    policy = RetryPolicy(attempts=1, wait=False)
    async with agent_client(handler, retry=policy, breaker_threshold=2) as client:
        await trip(client, URL, 2)
        with pytest.raises(CircuitOpenError):
            await client.get_task(URL + "other/path", "t")  # same endpoint, other path
        assert (await client.get_task(OTHER, "t")).id == "t"
        assert client.breakers() == {
            "http://a.test:8000": {"state": "open", "consecutiveFailures": 2},
            "http://a.test:8001": {"state": "closed", "consecutiveFailures": 0},
        }


async def test_one_probe_after_the_cooldown() -> None:
    clock = FakeClock()
    script = Script(503, 503, ok(TASK))
    policy = RetryPolicy(attempts=1, wait=False)
    async with agent_client(
        script, retry=policy, breaker_threshold=2, breaker_cooldown=30, clock=clock
    ) as client:
        await trip(client, URL, 2)
        clock.now += 29.9
        with pytest.raises(CircuitOpenError):
            await client.get_task(URL, "t")
        assert len(script.requests) == 2
        clock.now += 0.1
        assert client.breakers()["http://a.test:8000"]["state"] == "half_open"
        assert (await client.get_task(URL, "t")).id == "t"
        assert len(script.requests) == 3  # exactly one probe request
        assert client.breakers()["http://a.test:8000"] == {
            "state": "closed",
            "consecutiveFailures": 0,
        }


# -- cards and headers --------------------------------------------------------------------


async def test_cards_are_cached_and_fresh_refetches() -> None:
    script = Script(CARD)
    async with agent_client(script) as client:
        first = await client.card(URL)
        second = await client.card(URL)
        assert first.name == second.name == "echo"
        assert len(script.requests) == 1
        assert script.requests[0].method == "GET"
        assert script.requests[0].url == "http://a.test:8000/.well-known/agent-card.json"
        await client.card(URL, fresh=True)
        assert len(script.requests) == 2


async def test_card_cache_expires_after_ttl() -> None:
    script = Script(CARD)
    async with agent_client(script, card_ttl=0) as client:
        await client.card(URL)
        await client.card(URL)
    assert len(script.requests) == 2


async def test_credentials_go_only_to_their_url() -> None:
    script = Script(ok(TASK))
    async with agent_client(script, credentials={URL: "s3cret"}) as client:
        await client.get_task(URL, "t")
        await client.get_task(OTHER, "t")
        await client.get_task("http://b.test:8000/", "t")
    keys = [r.headers.get("X-API-Key") for r in script.requests]
    assert keys == ["s3cret", None, None]


async def test_a2a_version_is_always_sent() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        method = json.loads(request.content)["method"]
        if method in {"SendStreamingMessage", "SubscribeToTask"}:
            return sse_response([(1, {"task": TASK})])
        if method == "SendMessage":
            return httpx.Response(200, json=ok({"task": TASK}))
        return httpx.Response(200, json=ok(TASK))

    script = Script(handler)
    async with agent_client(script, credentials={URL: "k"}) as client:
        await client.get_task(URL, "t")
        await client.send(URL, message())
        await client.cancel(URL, "t")
        await client.call(OTHER, "ListTasks", {}, idempotent=True)
        [_ async for _ in client.stream(URL, message())]
        [_ async for _ in client.subscribe(URL, "t")]
    assert len(script.requests) == 6
    assert all(r.headers.get("A2A-Version") == "1.0" for r in script.requests)


# -- SSE ----------------------------------------------------------------------------------


def sse_event(seq: int | None, result: dict[str, Any]) -> str:
    head = f"id: {seq}\n" if seq is not None else ""
    return f"{head}data: {json.dumps(ok(result))}\n\n"


def status(state: str) -> dict[str, Any]:
    return {"statusUpdate": {"taskId": "t", "contextId": "c", "status": {"state": state}}}


def sse_response(events: list[tuple[int | None, dict[str, Any]]]) -> httpx.Response:
    body = ": ping\n\n" + "".join(sse_event(seq, result) for seq, result in events)
    return httpx.Response(200, headers={"content-type": "text/event-stream"}, text=body)


async def test_stream_yields_seq_and_items_in_order_and_skips_pings() -> None:
    body = (
        ": ping\n\n"
        + sse_event(1, {"task": TASK})
        + ": ping\n\n"
        + ": keep-alive\n"
        + sse_event(2, status("TASK_STATE_WORKING"))
        + sse_event(3, status("TASK_STATE_COMPLETED"))
    )

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            200, headers={"content-type": "text/event-stream; charset=utf-8"}, text=body
        )

    script = Script(handler)
    async with agent_client(script) as client:
        items = [pair async for pair in client.stream(URL, message())]
    assert [seq for seq, _ in items] == [1, 2, 3]
    assert all(isinstance(item, StreamResponse) for _, item in items)
    assert items[0][1].task is not None
    assert items[0][1].task.id == "t"
    states = [item.status_update.status.state for _, item in items[1:] if item.status_update]
    assert states == [TaskState.WORKING, TaskState.COMPLETED]
    request = script.requests[0]
    assert request.headers["Accept"] == "text/event-stream"
    assert json.loads(request.content)["method"] == "SendStreamingMessage"
    assert json.loads(request.content)["params"]["message"]["messageId"] == "m-1"


async def test_stream_answered_with_jsonrpc_error_raises_remote_error() -> None:
    script = Script(rpc_error(-32004, "Streaming is not supported"))
    async with agent_client(script) as client:
        with pytest.raises(RemoteError) as caught:
            [_ async for _ in client.stream(URL, message())]
    assert (caught.value.code, caught.value.message) == (-32004, "Streaming is not supported")


async def test_error_event_inside_a_stream_raises_remote_error() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        body = (
            sse_event(1, {"task": TASK}) + f"id: 2\ndata: {json.dumps(rpc_error(-32603, 'x'))}\n\n"
        )
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, text=body)

    seen: list[int | None] = []

    async def consume(client: AgentClient) -> None:
        async for seq, _ in client.stream(URL, message()):
            seen.append(seq)

    async with agent_client(Script(handler)) as client:
        with pytest.raises(RemoteError) as caught:
            await consume(client)
    assert seen == [1]
    assert caught.value.code == -32603


async def test_subscribe_resumes_after_a_dropped_stream_with_last_event_id() -> None:
    events = [
        (1, {"task": TASK}),
        (2, status("TASK_STATE_WORKING")),
        (
            3,
            {
                "artifactUpdate": {
                    "taskId": "t",
                    "contextId": "c",
                    "artifact": {"artifactId": "a", "parts": [{"text": "out"}]},
                }
            },
        ),
        (4, status("TASK_STATE_COMPLETED")),
    ]

    async def drops_after_two() -> AsyncIterator[bytes]:
        for seq, result in events[:2]:
            yield sse_event(seq, result).encode()
        yield b": ping\n\n"
        raise httpx.ReadError("connection reset mid-body")

    def handler(request: httpx.Request) -> httpx.Response:
        headers = {"content-type": "text/event-stream"}
        if "Last-Event-ID" not in request.headers:
            return httpx.Response(200, headers=headers, content=drops_after_two())
        after = int(request.headers["Last-Event-ID"])
        body = "".join(sse_event(seq, result) for seq, result in events if seq > after)
        return httpx.Response(200, headers=headers, text=body)

    script = Script(handler)
    async with agent_client(script) as client:
        items = [pair async for pair in client.subscribe(URL, "t")]
    assert [seq for seq, _ in items] == [1, 2, 3, 4]
    assert [item.dump() for _, item in items] == [
        StreamResponse.model_validate(result).dump() for _, result in events
    ]
    assert len(script.requests) == 2
    assert "Last-Event-ID" not in script.requests[0].headers
    assert script.requests[1].headers["Last-Event-ID"] == "2"
    assert [json.loads(r.content)["method"] for r in script.requests] == ["SubscribeToTask"] * 2
    assert json.loads(script.requests[1].content)["params"] == {"id": "t"}


async def test_subscribe_gives_up_after_its_resumes() -> None:
    async def drops() -> AsyncIterator[bytes]:
        yield sse_event(1, {"task": TASK}).encode()
        raise httpx.ReadError("reset")

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=drops())

    script = Script(handler)
    async with agent_client(script) as client:
        with pytest.raises(UnavailableError, match="connection broke mid-answer"):
            [_ async for _ in client.subscribe(URL, "t", resumes=2)]
    assert len(script.requests) == 3


# -- replicas -----------------------------------------------------------------------------


class Replicas:
    """Two mock replicas behind one address: per-port scripts, requests recorded."""

    def __init__(self, first: Script, second: Script) -> None:
        self.scripts = {8000: first, 8001: second}

    def __call__(self, request: httpx.Request) -> httpx.Response:
        return self.scripts[request.url.port or 80](request)


BOTH = f"{URL},{OTHER}"


async def test_a_refused_replica_is_skipped_and_the_next_one_answers() -> None:
    down, up = Script(httpx.ConnectError), Script(ok(TASK))
    async with agent_client(Replicas(down, up)) as client:
        task = await client.get_task(BOTH, "t")
        assert task.id == "t"
        again = await client.get_task(BOTH, "t")
    assert again.id == "t"
    # The replica that answered is preferred from then on: the dead one is not tried again.
    assert len(up.requests) == 2
    assert len(down.requests) == RetryPolicy().attempts


async def test_a_non_idempotent_call_fails_over_only_when_it_never_arrived() -> None:
    refused, up = Script(httpx.ConnectError), Script(ok(TASK))
    async with agent_client(Replicas(refused, up)) as client:
        assert (await client.cancel(BOTH, "t")).id == "t"
    assert len(refused.requests) == 1
    assert len(up.requests) == 1

    # A read timeout may come after the replica acted: sending it elsewhere could do it twice.
    slow, other = Script(httpx.ReadTimeout), Script(ok(TASK))
    async with agent_client(Replicas(slow, other)) as client:
        with pytest.raises(UnavailableError):
            await client.cancel(BOTH, "t")
    assert len(other.requests) == 0


async def test_an_open_breaker_moves_calls_to_the_next_replica_without_a_request() -> None:
    down, up = Script(503), Script(ok(TASK))
    async with agent_client(Replicas(down, up), breaker_threshold=2) as client:
        await client.get_task(BOTH, "t")  # 503 twice: the first replica's breaker opens
        client._preferred.clear()  # start from the first replica again
        sent = len(down.requests)
        assert (await client.cancel(BOTH, "t")).id == "t"
    assert len(down.requests) == sent  # skipped: its breaker is open
    assert len(up.requests) == 2


async def test_a_stream_fails_over_before_its_first_event_with_the_same_message() -> None:
    down = Script(httpx.ConnectError)
    up = Script(lambda _: sse_response([(1, {"task": TASK}), (2, status("TASK_STATE_COMPLETED"))]))
    async with agent_client(Replicas(down, up)) as client:
        items = [seq async for seq, _ in client.stream(BOTH, message())]
    assert items == [1, 2]
    sent = [json.loads(r.content)["params"]["message"]["messageId"] for r in up.requests]
    assert sent == ["m-1"]


async def test_credentials_of_an_address_go_to_each_of_its_replicas() -> None:
    first, second = Script(httpx.ConnectError), Script(ok(TASK))
    async with agent_client(Replicas(first, second), credentials={BOTH: "k1"}) as client:
        await client.get_task(BOTH, "t")
    assert first.requests[0].headers["X-API-Key"] == "k1"
    assert second.requests[0].headers["X-API-Key"] == "k1"


# -- card signatures: checked for a trusted agent whose keys are known ------------------------


async def test_a_trusted_agents_card_must_carry_its_signature() -> None:
    from a2a_handoff.protocol.agent_card import build_card
    from a2a_handoff.trust.card_signature import sign_card
    from a2a_handoff.trust.keys import Identity
    from a2a_handoff.trust.trustlist import TrustedAgent, TrustList

    billing = Identity.generate("billing")
    body = build_card("billing", URL).dump()
    signed = sign_card(body, billing.signing_key, URL + ".well-known/jwks.json")
    impostor = sign_card(body, Identity.generate("mallory").signing_key, "http://m.test/")
    trust = TrustList([TrustedAgent("billing", URL, pinned=billing.public_keys)])
    async with agent_client(Script(signed, impostor, body), trust=trust, card_ttl=0) as client:
        assert (await client.card(URL)).name == "billing"
        for _ in ("signed by another key", "not signed"):
            with pytest.raises(UnavailableError, match="not signed by its keys"):
                await client.card(URL)
    # An agent the client holds no keys for: its card is taken as it is.
    async with agent_client(Script(body), trust=TrustList()) as client:
        assert (await client.card(URL)).name == "billing"


async def test_credentials_go_to_their_own_origin_only() -> None:
    script = Script(ok({"id": "t"}))
    key = {"http://a.test:8000": "key-a"}
    async with agent_client(script, credentials=key) as client:
        await client.call(URL, "GetTask", {"id": "t"})
        await client.call("http://b.test:8000/", "GetTask", {"id": "t"})
    assert script.requests[0].headers.get("x-api-key") == "key-a"
    assert "x-api-key" not in script.requests[1].headers
