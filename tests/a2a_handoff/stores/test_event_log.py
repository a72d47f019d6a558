"""The event log's rows (`stores._event_log`): a status change written without pydantic when
nothing in it needs escaping — the same JSON as pydantic writes, read back as it was."""

from __future__ import annotations

import pytest

from a2a_handoff.protocol.models import (
    Message,
    Part,
    Role,
    StreamResponse,
    Task,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from a2a_handoff.protocol.steps import status_event
from a2a_handoff.stores._event_log import _status_json, from_log, log_json

STAMP = "2026-01-01T00:00:00.000Z"
ODD = ['q"uote', "back\\slash", "new\nline", "tab\t", "\x00", "\x1f", "\x7f", "\u2028", "\ud7ff"]
PLAIN = ["c1", "é-ctx", "名前", "\U0001f600", "a b", "01890a5d-ac96-774b-bcce-b302099a8057"]


def _task(context_id: str, state: TaskState = TaskState.WORKING, **status: object) -> Task:
    return Task(
        id="01890a5d-ac96-774b-bcce-b302099a8057",
        context_id=context_id,
        status=TaskStatus(state=state, **status),  # type: ignore[arg-type]
    )


@pytest.mark.parametrize("context_id", PLAIN + ODD)
@pytest.mark.parametrize("state", [TaskState.WORKING, TaskState.COMPLETED, TaskState.FAILED])
def test_a_status_row_is_the_json_pydantic_writes(context_id: str, state: TaskState) -> None:
    task = _task(context_id, state, timestamp=STAMP)
    item = status_event(task)
    row = log_json(item, task)
    assert row == item.dump_json()
    assert from_log(row, task) == item
    update = item.status_update
    assert update is not None
    fast = _status_json(update)
    assert (fast is not None) == (context_id in PLAIN)  # escaping left to pydantic
    if fast is not None:
        assert fast == row


def test_a_status_with_more_than_a_state_and_time_is_left_to_pydantic() -> None:
    said = Message(message_id="m", role=Role.AGENT, parts=[Part(text="done")])
    cases = [
        status_event(_task("c", timestamp=STAMP, message=said)),
        status_event(_task("c", timestamp=STAMP), metadata={"k": 1}),
        status_event(_task("c")),  # no timestamp: the member is left out
        StreamResponse(
            status_update=TaskStatusUpdateEvent(
                task_id="t\\",
                context_id="c",
                status=TaskStatus(state=TaskState.WORKING, timestamp=STAMP),
            )
        ),
        StreamResponse(
            status_update=TaskStatusUpdateEvent(
                task_id="t",
                context_id="c",
                status=TaskStatus(state=TaskState.WORKING, timestamp='"'),
            )
        ),
    ]
    for item in cases:
        update = item.status_update
        assert update is not None
        assert _status_json(update) is None
        task = _task("c", timestamp=STAMP)
        row = log_json(item, task)
        assert row == item.dump_json()
        assert from_log(row, task) == item


def test_the_hand_written_row_knows_every_member_of_a_status_change() -> None:
    # The row is written by hand for a status of a state and a time only: a member added to
    # these models must be taught to `_status_json` (or make it step aside), not dropped.
    assert set(TaskStatus.model_fields) == {"state", "message", "timestamp"}
    assert set(TaskStatusUpdateEvent.model_fields) == {
        "task_id",
        "context_id",
        "status",
        "metadata",
    }
    assert set(StreamResponse.model_fields) == {
        "task",
        "message",
        "status_update",
        "artifact_update",
    }
