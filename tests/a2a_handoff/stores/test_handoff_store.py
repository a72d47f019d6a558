"""The outbox and the ledger, on every backend: each step atomic with its task's update."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

from a2a_handoff.errors import ConflictError
from a2a_handoff.protocol.models import StreamResponse, utc_now
from a2a_handoff.protocol.states import TaskState
from a2a_handoff.stores import Store
from a2a_handoff.stores.base import OutboxEntry, ReceivedEntry, TaskRecord
from tests.a2a_handoff.stores.test_behaviour import create, moved, new_task, status

pytestmark = pytest.mark.anyio


def entry(record: TaskRecord, handoff_id: str = "h1", context_id: str = "ctx") -> OutboxEntry:
    now = utc_now()
    return OutboxEntry(
        handoff_id=handoff_id, task_id=record.id, context_id=context_id, owner=record.owner,
        target_name="billing", target_url="http://127.0.0.1:1/", envelope="{}",
        status="pending", detail="", created_at=now, updated_at=now,
    )  # fmt: skip


def step(record: TaskRecord, state: TaskState) -> tuple[TaskRecord, list[StreamResponse]]:
    task = moved(record.task, state)
    return record.advanced(task, 1, utc_now()), [status(task)]


async def test_checkpoint_then_terminate_moves_the_task_and_the_entry_together(
    store: Store,
) -> None:
    record = await create(store)
    working, events = step(record, TaskState.WORKING)
    await store.checkpoint(working, events, expected_version=1, entry=entry(record))
    assert [e.handoff_id for e in await store.outbox(status="pending")] == ["h1"]
    assert (await store.get(record.id)).version == 2  # type: ignore[union-attr]

    done, events = step(working, TaskState.TRANSFERRED)
    await store.terminate(
        done, events, expected_version=2, handoff_id="h1", status="done", detail="{}"
    )
    assert await store.outbox(status="pending") == []
    (closed,) = await store.outbox()
    assert (closed.status, closed.detail) == ("done", "{}")
    stored = await store.get(record.id)
    assert stored is not None
    assert (stored.state, stored.version) == (TaskState.TRANSFERRED, 3)


async def test_a_stale_checkpoint_writes_neither_task_nor_entry(store: Store) -> None:
    record = await create(store)
    working, events = step(record, TaskState.WORKING)
    with pytest.raises(ConflictError):
        await store.checkpoint(
            replace(working, version=8), events, expected_version=7, entry=entry(record)
        )
    assert await store.outbox() == []
    assert (await store.get(record.id)).version == 1  # type: ignore[union-attr]


async def test_terminating_an_entry_twice_conflicts_and_changes_nothing(store: Store) -> None:
    record = await create(store)
    working, events = step(record, TaskState.WORKING)
    await store.checkpoint(working, events, expected_version=1, entry=entry(record))
    done, events = step(working, TaskState.TRANSFERRED)
    await store.terminate(done, events, expected_version=2, handoff_id="h1", status="done",
                          detail="")  # fmt: skip
    failed, events = step(working, TaskState.FAILED)
    with pytest.raises(ConflictError):  # stale version, and the entry is no longer pending
        await store.terminate(
            replace(failed, version=4), events, expected_version=3, handoff_id="h1",
            status="failed", detail="",
        )  # fmt: skip
    stored = await store.get(record.id)
    assert stored is not None
    assert stored.state is TaskState.TRANSFERRED
    assert [e.status for e in await store.outbox()] == ["done"]


async def test_a_task_created_with_its_outbox_entry(store: Store) -> None:
    task = new_task()
    now = utc_now()
    record = TaskRecord(task, "alice", 1, now, now)
    stored = await store.create(
        record, [StreamResponse(task=task)], dedupe_key="k", outbox=entry(record, "h9")
    )
    assert stored.id == record.id
    assert [e.task_id for e in await store.outbox(status="pending")] == [record.id]
    # The same key again: nothing written, the first task returned, no second entry.
    again = TaskRecord(new_task(), "alice", 1, now, now)
    first = await store.create(
        again, [StreamResponse(task=again.task)], dedupe_key="k", outbox=entry(again, "h10")
    )
    assert first.id == record.id
    assert [e.handoff_id for e in await store.outbox()] == ["h9"]


async def test_outbox_filters_by_context_and_the_ledger_keeps_received(store: Store) -> None:
    one, two = await create(store, context_id="c1"), await create(store, context_id="c2")
    for record, handoff_id, context in ((one, "ha", "c1"), (two, "hb", "c2")):
        working, events = step(record, TaskState.WORKING)
        await store.checkpoint(
            working, events, expected_version=1, entry=entry(record, handoff_id, context)
        )
    assert [e.handoff_id for e in await store.outbox(context_id="c2")] == ["hb"]
    received = ReceivedEntry("h", "k" * 16, "c1", "triage", "t0", one.id, "accepted", "", utc_now())
    await store.record_received(received)
    await store.record_received(replace(received, context_id="c2", outcome="duplicate"))
    assert await store.received("c1") == [received]
    assert len(await store.received()) == 2


async def test_a_task_created_by_a_handoff_gets_its_ledger_row_in_the_same_write(
    store: Store,
) -> None:
    now = utc_now()
    record = TaskRecord(new_task(), "alice", 1, now, now)
    accepted = ReceivedEntry("h", "k" * 16, "c1", "triage", "t0", record.id, "accepted", "", now)
    created = await store.create(
        record, [StreamResponse(task=record.task)], dedupe_key="hk", received=accepted
    )
    assert created.id == record.id
    assert await store.received() == [accepted]
    # The key was taken: neither the second task nor its ledger row is written.
    again = TaskRecord(new_task(), "alice", 1, now, now)
    found = await store.create(
        again,
        [StreamResponse(task=again.task)],
        dedupe_key="hk",
        received=replace(accepted, task_id=again.id),
    )
    assert found.id == record.id
    assert await store.received() == [accepted]


async def test_a_redirect_closes_the_old_entry_and_adds_the_new_one_at_once(store: Store) -> None:
    record = await create(store)
    working, events = step(record, TaskState.WORKING)
    await store.checkpoint(working, events, expected_version=1, entry=entry(record, "h1"))
    again, events = step(working, TaskState.WORKING)
    await store.checkpoint(
        again, events, expected_version=2, entry=entry(record, "h2"),
        close=("h1", "failed", "rejected: on_reject → human"),
    )  # fmt: skip
    by_id = {e.handoff_id: e for e in await store.outbox()}
    assert (by_id["h1"].status, by_id["h1"].detail) == ("failed", "rejected: on_reject → human")
    assert [e.handoff_id for e in await store.outbox(status="pending")] == ["h2"]
    # Closing an entry that is no longer pending: nothing is written.
    third, events = step(again, TaskState.WORKING)
    with pytest.raises(ConflictError):
        await store.checkpoint(
            third, events, expected_version=3, entry=entry(record, "h3"),
            close=("h1", "failed", ""),
        )  # fmt: skip
    assert {e.handoff_id for e in await store.outbox()} == {"h1", "h2"}
    assert (await store.get(record.id)).version == 3  # type: ignore[union-attr]


async def test_a_dedupe_key_with_a_window_frees_itself_when_the_window_ends(
    store: Store,
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
