"""A handoff's create answer read for what the source keeps: the successor's id, context and
state; a refusal, an error or anything that is not that shape read the general way."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import ValidationError

from a2a_handoff.client.answers import Created, created_task
from a2a_handoff.errors import RemoteError, UnavailableError
from a2a_handoff.protocol.extension import HANDOFF_EXTENSION_URI as URI
from a2a_handoff.protocol.models import Task
from a2a_handoff.protocol.states import TaskState

URL = "http://billing.test/"
MESSAGE = {"messageId": "m", "role": "ROLE_AGENT", "parts": [{"text": "Refund issued."}]}


def task(**members: Any) -> dict[str, Any]:
    status = {"state": "TASK_STATE_COMPLETED", "message": MESSAGE, "timestamp": "2026-01-01Z"}
    return {"id": "t1", "contextId": "c1", "status": status, **members}


def answer(result: Any, status: int = 200, **more: Any) -> tuple[int, bytes]:
    return status, json.dumps({"jsonrpc": "2.0", "id": 1, "result": result, **more}).encode()


def test_a_created_task_is_read_for_its_id_context_and_state() -> None:
    artifacts = [{"artifactId": "a", "parts": [{"data": {"amount": 49.99}}], "name": "refund"}]
    got = created_task(URL, answer({"task": task(artifacts=artifacts, metadata={URI: {}})}))
    assert got == Created("t1", "c1", TaskState.COMPLETED)


def test_a_refusal_is_read_whole_for_its_reason() -> None:
    refused = task(metadata={URI: {"rejected": "loop_detected"}})
    refused["status"]["state"] = "TASK_STATE_REJECTED"
    got = created_task(URL, answer({"task": refused}))
    assert isinstance(got, Task)
    assert got.status.state is TaskState.REJECTED
    assert got.metadata == {URI: {"rejected": "loop_detected"}}
    assert got.status.message is not None
    assert got.status.message.text == "Refund issued."


def test_an_error_member_is_the_targets_error_even_beside_a_result() -> None:
    error = {"code": -32001, "message": "no such skill"}
    with pytest.raises(RemoteError) as raised:
        created_task(URL, answer({"task": task()}, error=error))
    assert raised.value.code == -32001


@pytest.mark.parametrize(
    "result",
    [
        {"task": task(id="")},  # an empty id
        {"task": {**task(), "status": {"state": "TASK_STATE_NONSENSE"}}},
        {"task": {"id": "t1", "contextId": "c1"}},  # no status
        {"message": MESSAGE},  # not a task
        {"task": {**task(), "id": 7}},  # not a string
    ],
)
def test_what_is_not_a_task_is_refused_as_before(result: Any) -> None:
    with pytest.raises(ValidationError):
        created_task(URL, answer(result))


def test_other_statuses_and_bodies_go_the_general_way() -> None:
    with pytest.raises(UnavailableError, match="HTTP 500 without a result"):
        created_task(URL, answer({"task": task()}, status=500))
    with pytest.raises(UnavailableError, match="not JSON"):
        created_task(URL, (200, b"<html>"))


def test_snake_case_members_are_read_as_a_task_reads_them() -> None:
    snake = {"id": "t1", "context_id": "c1", "status": {"state": "TASK_STATE_WORKING"}}
    got = created_task(URL, answer({"task": snake}))
    assert isinstance(got, Task)
    assert (got.id, got.context_id, got.status.state) == ("t1", "c1", TaskState.WORKING)
