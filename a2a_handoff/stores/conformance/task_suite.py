"""The core every store has: tasks created once per key, updated check-and-set, their events
numbered 1, 2, 3 … and read back as written; and the store's declaration itself."""

from __future__ import annotations

import asyncio
import inspect
import typing
from dataclasses import fields

import pytest

from a2a_handoff.errors import ConflictError
from a2a_handoff.protocol.models import (
    Artifact,
    Part,
    StreamResponse,
    TaskArtifactUpdateEvent,
    utc_now,
)
from a2a_handoff.protocol.states import TaskState
from a2a_handoff.stores.base import Capabilities, TaskQuery, TaskRecord, TaskStore
from a2a_handoff.stores.conformance.samples import (
    Suite,
    advance,
    create,
    moved,
    new_task,
    status,
    stored,
)


def members(protocol: type) -> dict[str, bool]:
    """What a protocol asks for, by name: True for a method to be awaited."""
    found: dict[str, bool] = {}
    for cls in reversed(protocol.__mro__):
        if cls.__module__ in ("typing", "builtins"):
            continue
        found |= dict.fromkeys(getattr(cls, "__annotations__", {}), False)
        found |= {
            name: inspect.iscoroutinefunction(value)
            for name, value in vars(cls).items()
            if not name.startswith("_")
        }
    return found


def missing(part: object, protocol: type) -> list[str]:
    """What of `protocol` `part` lacks, or has but not to be awaited when it should be."""
    return [
        name
        for name, awaited in sorted(members(protocol).items())
        if not hasattr(part, name)
        or (awaited and not inspect.iscoroutinefunction(getattr(part, name)))
    ]


class TaskSuite(Suite):
    """The core (`TaskStore`), for every store."""

    async def test_the_store_has_the_core_and_what_it_declares(self, store: TaskStore) -> None:
        assert missing(store, TaskStore) == []
        declared = store.capabilities
        assert isinstance(declared, Capabilities)
        protocols = typing.get_type_hints(Capabilities)
        for part in fields(Capabilities):
            value = getattr(declared, part.name)
            if value is not None:
                (protocol, _none) = typing.get_args(protocols[part.name])
                assert missing(value, protocol) == [], f"capabilities.{part.name}"

    async def test_create_then_get(self, store: TaskStore) -> None:
        record = await create(store)
        got = await stored(store, record.id)
        assert got.task == record.task
        assert (got.owner, got.version) == ("alice", 1)
        assert await store.get("nope") is None

    async def test_dedupe_key_returns_the_first_task(self, store: TaskStore) -> None:
        first = await create(store, key="k1")
        second = await create(store, key="k1")
        assert second.id == first.id
        assert await store.find("k1") == first.id
        page = await store.list_tasks(TaskQuery(owner="alice"))
        assert page.total_size == 1

    async def test_concurrent_creates_with_one_key_make_one_task(self, store: TaskStore) -> None:
        results = await asyncio.gather(*(create(store, key="same") for _ in range(20)))
        assert len({r.id for r in results}) == 1
        assert (await store.list_tasks(TaskQuery(owner="alice"))).total_size == 1

    async def test_a_dedupe_key_with_a_window_frees_itself_when_the_window_ends(
        self, store: TaskStore
    ) -> None:
        async def make(key: str) -> TaskRecord:
            task = new_task()
            now = utc_now()
            record = TaskRecord(task, "alice", 1, now, now)
            return await store.create(
                record, [StreamResponse(task=task)], dedupe_key=key, dedupe_ttl=0.4
            )

        first = await make("order-77")
        assert await store.find("order-77") == first.id
        assert (await make("order-77")).id == first.id  # within the window: the same task
        await asyncio.sleep(0.6)
        assert await store.find("order-77") is None
        later = await make("order-77")
        assert later.id != first.id
        assert await store.find("order-77") == later.id
        assert await store.get(first.id) is not None

    async def test_update_appends_events_with_next_seqs(self, store: TaskStore) -> None:
        record = await create(store)
        updated = await advance(store, record, TaskState.WORKING, TaskState.COMPLETED)
        got = await stored(store, record.id)
        assert got.version == 3
        assert got.state is TaskState.COMPLETED
        events = await store.events(record.id)
        assert [e.seq for e in events] == [1, 2, 3]
        assert events[0].item.task is not None
        assert events[-1].final
        assert [e.seq for e in await store.events(record.id, after=2)] == [3]
        assert updated.version == 3

    async def test_stale_update_conflicts_and_changes_nothing(self, store: TaskStore) -> None:
        record = await create(store)
        await advance(store, record, TaskState.WORKING)
        with pytest.raises(ConflictError):
            await advance(store, record, TaskState.FAILED)
        got = await stored(store, record.id)
        assert (got.version, got.state) == (2, TaskState.WORKING)
        assert len(await store.events(record.id)) == 2

    async def test_logged_events_read_back_as_emitted_though_stored_once(
        self, store: TaskStore
    ) -> None:
        task = new_task()
        now = utc_now()
        first = StreamResponse(task=task)
        record = await store.create(TaskRecord(task, "alice", 1, now, now), [first])
        events: list[StreamResponse] = []
        for i in range(3):  # artifacts added one a step, as a handler's would be
            artifact = Artifact(artifact_id=f"a{i}", parts=[Part(text="x" * 1000 + str(i))])
            task = task.model_copy(update={"artifacts": [*(task.artifacts or []), artifact]})
            update = TaskArtifactUpdateEvent(
                task_id=task.id, context_id=task.context_id, artifact=artifact, last_chunk=True
            )
            events.append(StreamResponse(artifact_update=update))
            next_step = record.advanced(task, 1, utc_now())
            await store.update(next_step, [events[-1]], expected_version=record.version)
            record = next_step
        done = moved(task, TaskState.COMPLETED)
        await store.update(record.advanced(done, 1, utc_now()), [status(done)], expected_version=4)
        logged = [e.item for e in await store.events(task.id)]
        assert logged == [first, *events, status(done)]
        assert logged[0].task is not None
        assert logged[0].task.artifacts is None  # the task as created, not as it is now

    async def test_ping(self, store: TaskStore) -> None:
        assert await store.ping()
        assert await store.problem() is None
