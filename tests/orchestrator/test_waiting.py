"""orchestrator.waiting: the backoff, the per-client cap, and how a wait follows a task — by
subscription where the card offers streaming, polling otherwise or once the subscription
fails. The agent is an httpx.MockTransport script (the transport injected); the waiting code
runs as it does in the gateway and the CLI."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from a2a_handoff.client.client import AgentClient
from a2a_handoff.client.retry import RetryPolicy
from orchestrator.waiting import Backoff, TooManyWaits, Waits, until_answered

pytestmark = pytest.mark.anyio

URL = "http://human.test:8000/"
QUICK = {"first": 0.001, "ceiling": 0.004}  # a backoff that keeps the test fast


def card(streaming: bool) -> dict[str, Any]:
    return {
        "name": "human",
        "description": "escalations",
        "supportedInterfaces": [{"url": URL}],
        "version": "1.0.0",
        "capabilities": {"streaming": streaming},
    }


def task(state: str, text: str = "permission to refund?") -> dict[str, Any]:
    message = {"messageId": "q", "role": "ROLE_AGENT", "parts": [{"text": text}]}
    return {"id": "t", "contextId": "c", "status": {"state": state, "message": message}}


WAITING, MOVED_ON = "TASK_STATE_INPUT_REQUIRED", "TASK_STATE_WORKING"


class Human:
    """A scripted human agent: its card, SubscribeToTask, and GetTask answers in turn."""

    def __init__(
        self,
        streaming: bool,
        polls: list[dict[str, Any]],
        stream: Callable[[], httpx.Response] | None = None,
    ) -> None:
        self.streaming = streaming
        self.polls = polls
        self.stream = stream
        self.methods: list[str] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if request.method == "GET":
            self.methods.append("card")
            return httpx.Response(200, json=card(self.streaming))
        method = json.loads(request.content)["method"]
        self.methods.append(method)
        if method == "SubscribeToTask":
            assert self.stream is not None
            return self.stream()
        assert method == "GetTask"
        answer = self.polls.pop(0) if len(self.polls) > 1 else self.polls[0]
        return httpx.Response(200, json={"jsonrpc": "2.0", "id": 1, "result": answer})


async def wait_at(human: Human, backoff: Backoff | None = None) -> str:
    http = httpx.AsyncClient(transport=httpx.MockTransport(human))
    client = AgentClient(http, retry=RetryPolicy(wait=False))
    try:
        answered = await until_answered(client, URL, "t", backoff or Backoff(**QUICK))
    finally:
        await client.aclose()
    return answered.status.state.name


def sse(*items: dict[str, Any]) -> httpx.Response:
    body = "".join(
        f"id: {i}\ndata: {json.dumps({'result': item})}\n\n" for i, item in enumerate(items, 1)
    )
    return httpx.Response(200, headers={"content-type": "text/event-stream"}, text=body)


def test_the_backoff_grows_to_its_ceiling_jittered_and_starts_over_when_reset() -> None:
    backoff = Backoff(first=0.25, ceiling=5.0, jitter=0.2)
    delays = [backoff.delay() for _ in range(8)]
    nominal = [0.25, 0.5, 1.0, 2.0, 4.0, 5.0, 5.0, 5.0]
    assert all(0.8 * n <= d <= 1.2 * n for d, n in zip(delays, nominal, strict=True)), delays
    backoff.reset()
    assert 0.2 <= backoff.delay() <= 0.3


def test_each_client_holds_at_most_its_cap_of_waits_and_a_wait_ended_frees_its_place() -> None:
    waits = Waits(2)
    with waits.hold("alice"), waits.hold("alice"):
        with (
            pytest.raises(TooManyWaits, match="already waits on 2 escalations"),
            waits.hold("alice"),
        ):
            pass
        with waits.hold("bob"):  # another client: a cap of its own
            assert waits.held("bob") == 1
    assert waits.held("alice") == 0
    with pytest.raises(RuntimeError), waits.hold("alice"):
        raise RuntimeError("a wait that failed")
    assert waits.held("alice") == 0  # freed all the same


async def test_a_streaming_agent_is_followed_by_its_stream_not_polled() -> None:
    moved = {"statusUpdate": {"taskId": "t", "contextId": "c", "status": {"state": MOVED_ON}}}
    human = Human(True, [task(MOVED_ON)], lambda: sse({"task": task(WAITING)}, moved))
    assert await wait_at(human) == "WORKING"
    # One GetTask, for the task as it is once it moved on: no poll while it waited.
    assert human.methods == ["card", "SubscribeToTask", "GetTask"]


@pytest.mark.parametrize(
    "refusal",
    [
        lambda: httpx.Response(503, text="too many streams"),
        lambda: httpx.Response(
            200, json={"jsonrpc": "2.0", "id": 1, "error": {"code": -32106, "message": "busy"}}
        ),
        lambda: sse({"task": task(WAITING)}),  # a stream that ended while the task waits
    ],
)
async def test_a_failed_subscription_falls_back_to_polling(
    refusal: Callable[[], httpx.Response],
) -> None:
    human = Human(True, [task(WAITING), task(WAITING), task(MOVED_ON)], refusal)
    assert await wait_at(human) == "WORKING"
    assert human.methods == ["card", "SubscribeToTask", "GetTask", "GetTask", "GetTask"]


async def test_an_agent_that_does_not_stream_is_polled_and_a_change_resets_the_backoff() -> None:
    class Counted(Backoff):
        resets = 0

        def reset(self) -> None:
            self.resets += 1
            super().reset()

    polls = [task(WAITING), task(WAITING), task(WAITING, "a note"), task(MOVED_ON)]
    human = Human(False, polls)
    backoff = Counted(**QUICK)
    assert await wait_at(human, backoff) == "WORKING"
    assert human.methods == ["card", "GetTask", "GetTask", "GetTask", "GetTask"]
    assert backoff.resets == 1  # the operator's note changed the task: poll soon again
