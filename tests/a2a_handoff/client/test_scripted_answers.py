"""AgentClient against respx-scripted answers: which are retried and how often, what a call
that failed says about having arrived, and how each kind of answer is read."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from tenacity import AsyncRetrying

from a2a_handoff.client.replicas import never_arrived
from a2a_handoff.client.retry import RetryPolicy
from a2a_handoff.errors import (
    AuthenticationError,
    HandoffProcessingError,
    IdempotencyConflictError,
    InvalidParamsError,
    RemoteError,
    RpcError,
    TaskBusyError,
    TaskNotFoundError,
    UnavailableError,
)
from a2a_handoff.protocol.models import Message, Role
from tests.a2a_handoff.client.scripted import TASK, URL, html, ok, rpc_error, scripted

pytestmark = pytest.mark.anyio


@dataclass(frozen=True)
class RecordedPolicy(RetryPolicy):
    """The policy's own waits, recorded instead of slept (tenacity's sleep injected)."""

    slept: list[float] = field(default_factory=list)

    def retrying(self, spent: float = 0.0) -> AsyncRetrying:
        async def sleep(seconds: float) -> None:
            self.slept.append(seconds)

        return RetryPolicy.retrying(self, spent).copy(sleep=sleep)


# -- what is retried ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "failure",
    [httpx.ConnectError, httpx.ConnectTimeout, httpx.ReadTimeout, httpx.RemoteProtocolError]
    + [httpx.Response(status) for status in (429, 502, 503, 504)],
    ids=lambda f: str(f.status_code) if isinstance(f, httpx.Response) else f.__name__,
)
async def test_an_idempotent_call_is_retried_past_transient_failures(failure: Any) -> None:
    async with scripted() as (router, client):
        route = router.post(URL).mock(side_effect=[failure, failure, ok(TASK)])
        task = await client.get_task(URL, "t1")
    assert task.id == "t1"
    assert route.call_count == 3
    assert {json.loads(c.request.content)["method"] for c in route.calls} == {"GetTask"}


@pytest.mark.parametrize("status", [400, 401, 403, 404, 409, 413, 500])
async def test_other_statuses_are_not_retried(status: int) -> None:
    async with scripted() as (router, client):
        route = router.post(URL).mock(side_effect=[html(status), ok(TASK)])
        with pytest.raises(UnavailableError, match=f"HTTP {status}"):
            await client.get_task(URL, "t1")
    assert route.call_count == 1


async def test_an_application_error_is_never_retried_even_a_passing_one() -> None:
    """The client surfaces a JSON-RPC error at once, whatever its code: whether the target's
    own failure is worth a replay is the handoff's decision (`classify`), not the client's."""
    for error in (HandoffProcessingError(), TaskBusyError(), TaskNotFoundError("t1")):
        async with scripted() as (router, client):
            route = router.post(URL).mock(side_effect=[rpc_error(error.to_dict()), ok(TASK)])
            with pytest.raises(RemoteError) as raised:
                await client.get_task(URL, "t1")
        assert raised.value.code == error.code
        assert route.call_count == 1


async def test_attempts_are_capped_by_the_policy() -> None:
    async with scripted(retry=RetryPolicy(attempts=4, wait=False)) as (router, client):
        route = router.post(URL).mock(return_value=httpx.Response(503))
        with pytest.raises(UnavailableError, match=r"cannot reach .* \(HTTP 503\)"):
            await client.get_task(URL, "t1")
    assert route.call_count == 4


async def test_backoff_grows_to_its_cap_and_a_retry_after_never_stretches_it() -> None:
    """429 and 503 are retried after the policy's own waits, exponential (with jitter below
    `initial_wait`) and capped at `max_wait`: a `Retry-After: 3600` does not hold the call
    for an hour (the answer's headers do not reach the retry loop)."""
    policy = RecordedPolicy(attempts=6, initial_wait=0.1, max_wait=0.5)
    busy = httpx.Response(429, headers={"Retry-After": "3600"})
    async with scripted(retry=policy, breaker_threshold=100) as (router, client):
        route = router.post(URL).mock(return_value=busy)
        with pytest.raises(UnavailableError, match="HTTP 429"):
            await client.get_task(URL, "t1")
    assert route.call_count == 6
    assert len(policy.slept) == 5  # between attempts, none after the last
    assert all(0.0 <= s <= 0.5 for s in policy.slept)
    assert policy.slept[0] <= 0.2  # initial_wait and its jitter
    assert policy.slept[-1] == 0.5  # up to the cap


async def test_a_call_that_succeeds_at_once_never_waits() -> None:
    policy = RecordedPolicy()
    async with scripted(retry=policy) as (router, client):
        router.post(URL).mock(return_value=ok(TASK))
        await client.get_task(URL, "t1")
    assert policy.slept == []


# -- may it have arrived ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("failure", "arrived"),
    [
        (httpx.ConnectError, False),  # refused: the request never left
        (httpx.ReadTimeout, True),  # sent, no answer in time
        (httpx.RemoteProtocolError, True),  # the answer cut off
        (httpx.Response(503), True),  # answered: it got there
    ],
    ids=["refused", "read-timeout", "cut-off", "503"],
)
async def test_a_non_idempotent_call_is_tried_once_and_says_whether_it_may_have_arrived(
    failure: Any, arrived: bool
) -> None:
    async with scripted() as (router, client):
        route = router.post(URL).mock(side_effect=[failure, ok(TASK)])
        with pytest.raises(UnavailableError) as raised:
            await client.cancel(URL, "t1")  # CancelTask: not idempotent
    assert route.call_count == 1
    assert raised.value.may_have_arrived is arrived
    assert never_arrived(raised.value) is not arrived


async def test_an_idempotent_call_remembers_an_attempt_that_may_have_arrived() -> None:
    """The last attempt refused does not hide the earlier one that was sent."""
    async with scripted() as (router, client):
        route = router.post(URL).mock(side_effect=[httpx.ReadTimeout] + [httpx.ConnectError] * 4)
        with pytest.raises(UnavailableError) as raised:
            await client.get_task(URL, "t1")
    assert route.call_count == 5
    assert raised.value.may_have_arrived
    assert not never_arrived(raised.value)


async def test_an_answer_that_cannot_be_read_still_arrived() -> None:
    async with scripted() as (router, client):
        router.post(URL).mock(return_value=html(200))
        with pytest.raises(UnavailableError) as raised:
            await client.cancel(URL, "t1")
    assert not never_arrived(raised.value)


async def test_send_repeats_the_same_message_when_retried() -> None:
    message = Message(message_id="m-1", role=Role.USER, parts=[{"text": "refund"}])
    async with scripted() as (router, client):
        route = router.post(URL).mock(side_effect=[httpx.Response(502), ok({"task": TASK})])
        await client.send(URL, message)
    sent = [json.loads(c.request.content)["params"] for c in route.calls]
    assert len(sent) == 2
    assert sent[0] == sent[1]
    assert sent[0]["message"]["messageId"] == "m-1"


# -- how an answer is read ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("answer", "words"),
    [
        (html(200), "HTTP 200, not JSON"),
        (html(500), "HTTP 500, not JSON"),
        (httpx.Response(200, text="OK"), "not JSON"),
        (httpx.Response(200, content=b'{"jsonrpc":"2.0","id":1,"result":{"id":"t'), "not JSON"),
        (httpx.Response(200, content=b"\xff\xfe{}"), "not JSON"),
        (httpx.Response(200, content=b""), "not JSON"),
        (httpx.Response(200, json=[TASK]), "answered a non-object"),
        (httpx.Response(200, json={"jsonrpc": "2.0", "id": 1}), "HTTP 200 without a result"),
        (httpx.Response(500, json={"jsonrpc": "2.0", "result": TASK}), "HTTP 500 without"),
    ],
    ids=["html-200", "html-500", "text", "truncated", "not-utf8", "empty", "array", "bare", "500"],
)
async def test_an_answer_that_is_not_a_jsonrpc_result_is_unavailable(
    answer: httpx.Response, words: str
) -> None:
    async with scripted() as (router, client):
        route = router.post(URL).mock(return_value=answer)
        with pytest.raises(UnavailableError, match=words):
            await client.get_task(URL, "t1")
    assert route.call_count == 1  # an answer, however bad: not retried


async def test_the_body_decides_not_the_content_type() -> None:
    """The JSON-RPC reply is read from its bytes whatever Content-Type it came with."""
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "result": TASK}).encode()
    labelled = httpx.Response(200, content=body, headers={"Content-Type": "text/html"})
    async with scripted() as (router, client):
        router.post(URL).mock(return_value=labelled)
        assert (await client.get_task(URL, "t1")).id == "t1"


@pytest.mark.parametrize(
    "error",
    [
        TaskNotFoundError("Task not found: t1"),
        InvalidParamsError("params.id: required"),
        IdempotencyConflictError(),
        HandoffProcessingError(),
        AuthenticationError(),
    ],
    ids=lambda e: type(e).__name__,
)
async def test_our_errors_come_back_as_remote_errors_with_their_code_message_and_data(
    error: RpcError,
) -> None:
    """What a server of ours answers for each error of errors.py (its code, message and
    ErrorInfo), read back by the client, under that error's HTTP status."""
    async with scripted() as (router, client):
        router.post(URL).mock(return_value=rpc_error(error.to_dict(), error.http_status))
        with pytest.raises(RemoteError) as raised:
            await client.get_task(URL, "t1")
    assert (raised.value.code, raised.value.message) == (error.code, error.message)
    assert raised.value.data == error.to_dict().get("data")  # its ErrorInfo, if it has one
    assert raised.value.url == URL


async def test_an_error_member_wins_over_a_result_beside_it() -> None:
    both = {"jsonrpc": "2.0", "id": 1, "result": TASK, "error": {"code": -32001, "message": "no"}}
    async with scripted() as (router, client):
        router.post(URL).mock(return_value=httpx.Response(200, json=both))
        with pytest.raises(RemoteError, match="-32001: no"):
            await client.get_task(URL, "t1")


@pytest.mark.parametrize(
    "error",
    [{}, {"message": "boom"}, {"code": None, "message": "boom"}, {"code": "E42"}, {"code": [1]}],
    ids=["empty", "no-code", "null", "string", "list"],
)
async def test_an_error_without_an_integer_code_is_an_internal_error(error: dict[str, Any]) -> None:
    """JSON-RPC codes are integers; a target that sends another is read as having failed
    (-32603), never as a TypeError or ValueError out of the client."""
    async with scripted() as (router, client):
        router.post(URL).mock(return_value=rpc_error(error))
        with pytest.raises(RemoteError) as raised:
            await client.get_task(URL, "t1")
    assert raised.value.code == -32603
    assert raised.value.message == error.get("message", "")


async def test_a_stream_answered_with_json_is_no_stream() -> None:
    """A stream's answer must be text/event-stream: a JSON result is not one (a JSON-RPC
    error in its place is the target's error)."""
    message = Message(message_id="m-1", role=Role.USER, parts=[{"text": "hi"}])
    async with scripted() as (router, client):
        router.post(URL).mock(side_effect=[ok(TASK), rpc_error({"code": -32004, "message": "x"})])
        with pytest.raises(UnavailableError, match="did not answer with a stream"):
            [item async for item in client.stream(URL, message)]
        with pytest.raises(RemoteError, match="-32004"):
            [item async for item in client.stream(URL, message)]
