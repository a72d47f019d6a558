"""A blocking answer held past the keep-alive interval: its head at once, spaces while it is
made, then its body unchanged (an error's too); a gone client drops the answer, not the work."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Coroutine
from typing import Any

import pytest
from starlette.requests import Request
from starlette.responses import Response

from a2a_handoff.errors import TaskNotFoundError
from a2a_handoff.server._call import Call
from a2a_handoff.server._compat03 import V03
from a2a_handoff.server._jsonrpc import JSON_RPC
from a2a_handoff.server._patience import KEEP_ALIVE, HeldAnswer, patiently
from a2a_handoff.server._rest import REST
from a2a_handoff.server.results import Caller
from tests.a2a_handoff.server.test_streams import Client

pytestmark = pytest.mark.anyio

RESULT = '{"task":{"id":"t-1","contextId":"c-1","status":{"state":"TASK_STATE_COMPLETED"}}}'


def _call(binding: Any = JSON_RPC) -> Call:
    return Call(7, {}, Caller(), Request({"type": "http"}), binding)


def _settling(
    delay: float, call: Call, failure: Exception | None = None
) -> tuple[asyncio.Future[None], Callable[[], Coroutine[Any, Any, Response]]]:
    """What a SendMessage waits for (its task settling), done after `delay`, and its answer."""
    loop = asyncio.get_running_loop()
    settled: asyncio.Future[None] = loop.create_future()
    loop.call_later(delay, settled.set_result, None)

    async def answer() -> Response:
        await asyncio.shield(settled)
        if failure is not None:
            raise failure
        return call.binding.answer(call, RESULT)

    return settled, answer


async def test_an_answer_ready_in_time_is_sent_as_it_is() -> None:
    call = _call()
    answer = await patiently(call, *_settling(0.0, call), 1.0)
    assert not isinstance(answer, HeldAnswer)
    assert json.loads(answer.body)["result"] == json.loads(RESULT)


@pytest.mark.parametrize("binding", [JSON_RPC, REST, V03])
async def test_a_late_answer_gets_its_head_at_once_then_spaces_then_its_body(
    binding: Any,
) -> None:
    call = _call(binding)
    answer = await patiently(call, *_settling(0.35, call), 0.1)
    assert isinstance(answer, HeldAnswer)
    client = Client()
    await answer({"type": "http"}, client.receive, client.send)
    start = client.sent[0]
    assert start["status"] == 200
    headers = dict(start["headers"])
    assert headers[b"content-type"] == b"application/json"
    assert b"content-length" not in headers  # chunked: the body is not known yet
    assert (b"a2a-version" in headers) == (binding is not V03)  # as the binding's own answer
    body = client.body()
    own = call.binding.answer(call, RESULT).body
    assert body.startswith(KEEP_ALIVE)
    assert body.lstrip(KEEP_ALIVE) == own  # the answer, byte for byte, after the spaces
    assert json.loads(body) == json.loads(own)
    assert client.sent[-1]["more_body"] is False


async def test_an_error_after_the_head_is_the_error_object_in_the_body() -> None:
    call = _call()
    answer = await patiently(call, *_settling(0.25, call, TaskNotFoundError("gone")), 0.1)
    client = Client()
    await answer({"type": "http"}, client.receive, client.send)
    error = json.loads(client.body())
    assert error["id"] == 7
    assert error["error"]["code"] == -32001


async def test_an_error_in_time_is_raised_for_the_endpoint_to_answer() -> None:
    call = _call()
    with pytest.raises(TaskNotFoundError):
        await patiently(call, *_settling(0.0, call, TaskNotFoundError("gone")), 1.0)


async def test_a_gone_client_drops_the_answer_but_not_what_it_waits_for() -> None:
    call = _call()
    work: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    async def waits() -> Response:
        await asyncio.shield(work)  # as SendMessage waits for its task
        return call.binding.answer(call, RESULT)

    answer = await patiently(call, work, waits, 0.05)
    assert isinstance(answer, HeldAnswer)
    client = Client()
    serving = asyncio.create_task(answer({"type": "http"}, client.receive, client.send))
    await asyncio.sleep(0.15)
    client.gone.set()
    await asyncio.wait_for(serving, 1.0)
    assert answer.answer.cancelled()
    assert not work.done()  # the work goes on
    assert client.sent[-1]["more_body"] is True  # no body: nobody to read it
