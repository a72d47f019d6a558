"""What the suites share: their base (`Suite`), what they write (tasks made and moved as a
server would, their events, the commits that write them, outbox and ledger rows) and the part
of the contract a test needs, or the test skipped."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any, TypeVar

import pytest

from a2a_handoff.protocol.models import (
    Message,
    Part,
    Role,
    StreamResponse,
    Task,
    TaskStatus,
    TaskStatusUpdateEvent,
    utc_now,
)
from a2a_handoff.protocol.states import TaskState
from a2a_handoff.stores.base import (
    Commit,
    OutboxEntry,
    ReceivedEntry,
    TaskEvent,
    TaskRecord,
    TaskStore,
)

T = TypeVar("T")


class Suite:
    """What every suite's tests share: run by anyio's pytest plugin, on asyncio (the suites
    and the project's backends use asyncio's own calls)."""

    pytestmark = pytest.mark.anyio

    @pytest.fixture
    def anyio_backend(self) -> str:
        return "asyncio"


def declared(part: T | None, name: str) -> T:
    """The part of the contract a store declared (`capabilities.<name>`); the test asking
    for it is skipped, with the reason, for a store that declares none."""
    if part is None:
        pytest.skip(f"the store declares no {name}")
    return part


def new_task(context_id: str = "ctx", state: TaskState = TaskState.SUBMITTED) -> Task:
    task_id = str(uuid.uuid4())
    message = Message(
        message_id=str(uuid.uuid4()),
        role=Role.USER,
        parts=[Part(text="hi")],
        task_id=task_id,
        context_id=context_id,
    )
    return Task(
        id=task_id,
        context_id=context_id,
        status=TaskStatus(state=state, timestamp=utc_now()),
        history=[message],
    )


def moved(task: Task, state: TaskState) -> Task:
    return task.model_copy(update={"status": TaskStatus(state=state, timestamp=utc_now())})


def status(task: Task) -> StreamResponse:
    return StreamResponse(
        status_update=TaskStatusUpdateEvent(
            task_id=task.id, context_id=task.context_id, status=task.status
        )
    )


def new_record(owner: str = "alice", context_id: str = "ctx") -> TaskRecord:
    """A new task of `owner`, not stored: version 1, its first event the Task."""
    now = utc_now()
    return TaskRecord(new_task(context_id), owner, 1, now, now)


def creating(record: TaskRecord, **parts: Any) -> Commit:
    """The commit that creates `record`'s task with its first event, and `parts` (a dedupe
    key, an outbox entry, a received row, …)."""
    return Commit(record, [StreamResponse(task=record.task)], **parts)


async def create(
    store: TaskStore, owner: str = "alice", context_id: str = "ctx", key: str | None = None
) -> TaskRecord:
    """A new task of `owner`, created with its first event (under `key`, when given)."""
    return await store.commit(creating(new_record(owner, context_id), dedupe_key=key))


async def advance(store: TaskStore, record: TaskRecord, *states: TaskState) -> TaskRecord:
    """The task moved through `states`, an event each, in one update."""
    task = record.task
    events = []
    for state in states:
        task = moved(task, state)
        events.append(status(task))
    updated = TaskRecord(
        task, record.owner, record.version + len(events), record.created_at, utc_now()
    )
    await store.commit(Commit(updated, events, expected_version=record.version))
    return updated


async def stored(store: TaskStore, task_id: str) -> TaskRecord:
    """The stored task, which must be there."""
    record = await store.get(task_id)
    assert record is not None, f"task {task_id} is not stored"
    return record


async def collect(stream: AsyncIterator[TaskEvent]) -> list[TaskEvent]:
    return [event async for event in stream]


def entry(record: TaskRecord, handoff_id: str = "h1", context_id: str = "ctx") -> OutboxEntry:
    """A pending outbox entry: `record`'s task handed to an agent named billing."""
    now = utc_now()
    return OutboxEntry(
        handoff_id=handoff_id,
        task_id=record.id,
        context_id=context_id,
        owner=record.owner,
        target_name="billing",
        target_url="http://127.0.0.1:1/",
        envelope="{}",
        status="pending",
        detail="",
        created_at=now,
        updated_at=now,
    )


def step(record: TaskRecord, state: TaskState) -> tuple[TaskRecord, list[StreamResponse]]:
    """The record one status event later, and that event."""
    task = moved(record.task, state)
    return record.advanced(task, 1, utc_now()), [status(task)]


def moving(record: TaskRecord, state: TaskState, **parts: Any) -> tuple[TaskRecord, Commit]:
    """The record one status event later, and the commit that moves it there from `record`
    with `parts` (an outbox entry to add, one to close)."""
    later, events = step(record, state)
    return later, Commit(later, events, expected_version=record.version, **parts)


def received(record: TaskRecord, handoff_id: str = "h") -> ReceivedEntry:
    """The ledger row of a handoff accepted as `record`'s task."""
    return ReceivedEntry(
        handoff_id,
        "k" * 16,
        record.task.context_id,
        "triage",
        "t0",
        record.id,
        "accepted",
        "",
        utc_now(),
    )


async def unchanged(store: TaskStore, record: TaskRecord) -> None:
    """The store holds `record`'s task as `record` is, with its events and no more: what a
    refused commit must leave."""
    got = await stored(store, record.id)
    assert (got.version, got.state) == (record.version, record.state)
    assert [e.seq for e in await store.events(record.id)] == list(range(1, record.version + 1))
