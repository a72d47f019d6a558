"""The core every store has: tasks created once per key even when raced, their events
numbered 1, 2, 3 … and read back as written; and the store's declaration itself. The shapes
of a commit, one by one, are `commit_suite`'s."""

from __future__ import annotations

import asyncio
import inspect
import typing
from dataclasses import fields

from a2a_handoff.protocol.models import (
    Artifact,
    Part,
    StreamResponse,
    TaskArtifactUpdateEvent,
    utc_now,
)
from a2a_handoff.protocol.states import TaskState
from a2a_handoff.stores.base import Capabilities, Commit, TaskQuery, TaskRecord, TaskStore
from a2a_handoff.stores.conformance.samples import (
    Suite,
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

    async def test_concurrent_creates_with_one_key_make_one_task(self, store: TaskStore) -> None:
        results = await asyncio.gather(*(create(store, key="same") for _ in range(20)))
        assert len({r.id for r in results}) == 1
        assert (await store.list_tasks(TaskQuery(owner="alice"))).total_size == 1

    async def test_logged_events_read_back_as_emitted_though_stored_once(
        self, store: TaskStore
    ) -> None:
        task = new_task()
        now = utc_now()
        first = StreamResponse(task=task)
        record = await store.commit(Commit(TaskRecord(task, "alice", 1, now, now), [first]))
        events: list[StreamResponse] = []
        for i in range(3):  # artifacts added one a step, as a handler's would be
            artifact = Artifact(artifact_id=f"a{i}", parts=[Part(text="x" * 1000 + str(i))])
            task = task.model_copy(update={"artifacts": [*(task.artifacts or []), artifact]})
            update = TaskArtifactUpdateEvent(
                task_id=task.id, context_id=task.context_id, artifact=artifact, last_chunk=True
            )
            events.append(StreamResponse(artifact_update=update))
            next_step = record.advanced(task, 1, utc_now())
            await store.commit(Commit(next_step, [events[-1]], expected_version=record.version))
            record = next_step
        done = moved(task, TaskState.COMPLETED)
        finished = record.advanced(done, 1, utc_now())
        await store.commit(Commit(finished, [status(done)], expected_version=4))
        logged = [e.item for e in await store.events(task.id)]
        assert logged == [first, *events, status(done)]
        assert logged[0].task is not None
        assert logged[0].task.artifacts is None  # the task as created, not as it is now

    async def test_ping(self, store: TaskStore) -> None:
        assert await store.ping()
        assert await store.problem() is None
