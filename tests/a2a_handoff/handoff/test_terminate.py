"""`reopened`: a refused handoff its handler waits on puts the task back to WORKING and
closes the entry failed, in one write; a task that ended meanwhile is left as it is."""

from __future__ import annotations

import pytest

from a2a_handoff.canonical import canonical
from a2a_handoff.handoff.sender import HandoffSender
from a2a_handoff.handoff.terminate import reopened
from a2a_handoff.protocol.extension import ext_metadata
from a2a_handoff.protocol.models import StreamResponse, Task, TaskStatus, utc_now
from a2a_handoff.protocol.states import TaskState
from a2a_handoff.protocol.steps import status_event
from a2a_handoff.stores.base import Commit, TaskRecord
from a2a_handoff.stores.memory import MemoryTaskStore
from tests.a2a_handoff.handoff.test_delivery import envelope

pytestmark = pytest.mark.anyio


async def _handing_off(store: MemoryTaskStore) -> tuple[TaskRecord, str]:
    task = Task(id="t0", context_id="c1", status=TaskStatus(state=TaskState.WORKING))
    env = envelope()
    marked, event, entry = HandoffSender.handing_off(
        task, env, canonical(env.dump()).decode(), "alice"
    )
    now = utc_now()
    record = TaskRecord(marked, "alice", 2, now, now)
    await store.commit(Commit(record, [StreamResponse(task=task), event], outbox=entry))
    return record, entry.handoff_id


async def test_a_refusal_reopens_the_task_and_closes_the_entry_in_one_write() -> None:
    store = MemoryTaskStore()
    record, handoff_id = await _handing_off(store)
    assert ext_metadata(record.task)["state"] == "HANDING_OFF"
    (entry,) = await store.outbox(status="pending")

    back = await reopened(store, entry, "billing rejected the handoff: untrusted_source")

    assert back is not None
    stored = await store.get("t0")
    assert stored == back
    assert stored.state is TaskState.WORKING
    ext = ext_metadata(stored.task)
    assert "state" not in ext  # no longer handing off: cancelable, and an orphan if it dies
    assert ext["refused"] == {
        "handoffId": handoff_id,
        "reason": "billing rejected the handoff: untrusted_source",
    }
    assert stored.task.history[-1].text == "billing rejected the handoff: untrusted_source"
    assert await store.outbox(status="pending") == []
    (closed,) = await store.outbox(status="failed")
    assert closed.detail == "billing rejected the handoff: untrusted_source"


async def test_a_task_that_ended_meanwhile_is_not_reopened() -> None:
    store = MemoryTaskStore()
    record, _ = await _handing_off(store)
    (entry,) = await store.outbox(status="pending")
    task = record.task.model_copy(update={"status": TaskStatus(state=TaskState.FAILED)})
    failed = record.advanced(task, 1, utc_now())
    await store.commit(Commit(failed, [status_event(task)], expected_version=record.version))

    assert await reopened(store, entry, "too late") == failed
    assert (await store.get("t0")) == failed
    assert await store.outbox(status="pending") == [entry]  # left for the outbox's rules
