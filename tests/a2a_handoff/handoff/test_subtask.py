"""`SubTasks.stop`: a sub-task the delegating side stopped waiting for is canceled, and what
it came to is told truly — CANCELED, the outcome it reached first, or unknown when the
delegate does not answer. The delegate is a scripted peer (httpx's mock transport)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, cast

import httpx
import pytest

from a2a_handoff.client.client import AgentClient
from a2a_handoff.client.retry import RetryPolicy
from a2a_handoff.delegated import timed_out
from a2a_handoff.handoff.subtask import SubTasks
from a2a_handoff.protocol.agent_card import build_card
from a2a_handoff.protocol.extension import HANDOFF_EXTENSION_URI as URI
from a2a_handoff.protocol.models import Task
from a2a_handoff.protocol.states import TaskState
from a2a_handoff.trust.agent_trust import AgentTrust

pytestmark = pytest.mark.anyio
URL = "http://billing.test/"
CARD = build_card("billing", URL).model_dump(by_alias=True, exclude_none=True)


def task(state: str, **ext: Any) -> dict[str, Any]:
    found: dict[str, Any] = {"id": "sub-1", "contextId": "c", "status": {"state": state}}
    if ext:
        found["metadata"] = {URI: ext}
    return found


def delegate(answers: dict[str, list[Any]]) -> Callable[[httpx.Request], httpx.Response]:
    """A delegate answering each method with the next of its scripted answers: a result
    (dict), an error (int: its code), or an exception type (the connection fails)."""

    def handle(request: httpx.Request) -> httpx.Response:
        if request.method == "GET":  # its card: read before a first call (its tenant)
            return httpx.Response(200, json=CARD)
        method = json.loads(request.content)["method"]
        script = answers[method]
        answer = script.pop(0) if len(script) > 1 else script[0]
        if isinstance(answer, type):
            raise answer("down", request=request)
        if isinstance(answer, int):
            body = {"jsonrpc": "2.0", "id": 1, "error": {"code": answer, "message": "no"}}
        else:
            body = {"jsonrpc": "2.0", "id": 1, "result": answer}
        return httpx.Response(200, json=body)

    return handle


async def stop(answers: dict[str, list[Any]], within: float = 2.0) -> Task | None:
    http = httpx.AsyncClient(transport=httpx.MockTransport(delegate(answers)))
    client = AgentClient(http, retry=RetryPolicy(wait=False))
    try:
        subtasks = SubTasks(client, cast(AgentTrust, None), pace=0.01)  # nothing is signed
        return await subtasks.stop(URL, "sub-1", within)
    finally:
        await client.aclose()


async def test_a_sub_task_still_working_is_canceled() -> None:
    final = await stop({"CancelTask": [task("TASK_STATE_CANCELED")]})
    assert final is not None
    assert final.status.state is TaskState.CANCELED


async def test_a_sub_task_that_ended_first_is_read_and_its_outcome_kept() -> None:
    final = await stop(
        {"CancelTask": [-32002], "GetTask": [task("TASK_STATE_COMPLETED", steps={"refund": {}})]}
    )
    assert final is not None
    assert final.status.state is TaskState.COMPLETED
    outcome = timed_out("billing", "k", 0, 3.0, "sub-1", final)
    assert outcome.state is TaskState.COMPLETED  # adopted: not "no answer"


async def test_a_delegate_back_within_the_grace_is_asked_again() -> None:
    final = await stop(
        {
            "CancelTask": [httpx.ConnectError, httpx.ConnectError, -32002],
            "GetTask": [task("TASK_STATE_COMPLETED")],
        }
    )
    assert final is not None
    assert final.status.state is TaskState.COMPLETED


async def test_a_delegate_that_never_answers_leaves_the_state_unknown() -> None:
    final = await stop({"CancelTask": [httpx.ConnectError]}, within=0.3)
    assert final is None
    outcome = timed_out("billing", "k", 0, 3.0, "sub-1", final)
    assert outcome.state is TaskState.FAILED
    assert outcome.text == (
        "no answer from billing within 3 s, and its task sub-1 could not be canceled"
        " (billing did not answer): whether it did the work is unknown"
    )


def test_a_canceled_sub_task_says_whether_it_had_recorded_work() -> None:
    clean = Task.model_validate(task("TASK_STATE_CANCELED"))
    said = timed_out("billing", "k", 0, 3.0, "sub-1", clean)
    assert said.state is TaskState.CANCELED
    assert said.text == (
        "no answer from billing within 3 s: its task sub-1 was canceled before it recorded any work"
    )
    worked = Task.model_validate(
        task("TASK_STATE_CANCELED", steps={"refund": {}}, toolCalls={"charge-1": {}})
    )
    said = timed_out("billing", "k", 0, 3.0, "sub-1", worked)
    assert said.text.endswith("after it recorded work (step refund, tool call charge-1)")
