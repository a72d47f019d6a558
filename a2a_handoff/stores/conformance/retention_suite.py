"""Retention (`capabilities.retention`): finished tasks older than a cutoff deleted with
everything kept for them, in batches; running and recent tasks kept, and a task whose
idempotency key is still live, whose handoff is pending or whose push deliveries go on.
Deterministic: the tasks are written with timestamps in the past, the cutoff between them
and now."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from a2a_handoff.protocol.models import StreamResponse, Task, utc_now
from a2a_handoff.protocol.states import TaskState
from a2a_handoff.stores.base import (
    Closing,
    Commit,
    PushConfigRecord,
    ReceivedEntry,
    RetentionStore,
    TaskRecord,
    TaskStore,
)
from a2a_handoff.stores.conformance.samples import (
    Suite,
    advance,
    create,
    declared,
    entry,
    moved,
    new_task,
    received,
    status,
)

OLD = "2020-01-01T00:00:00.000Z"
CUTOFF = "2021-01-01T00:00:00.000Z"
FINISHED = [
    TaskState.COMPLETED,
    TaskState.FAILED,
    TaskState.CANCELED,
    TaskState.REJECTED,
    TaskState.TRANSFERRED,
]


async def aged(
    store: TaskStore,
    state: TaskState = TaskState.COMPLETED,
    *,
    context_id: str = "ctx",
    task: Task | None = None,
    close: str | None = None,
    **parts: Any,
) -> TaskRecord:
    """`task` (a new one by default) created and moved to `state` at `OLD` (created with
    `parts`: a dedupe key, an outbox entry, a ledger row; its move closing the entry
    `close`, when given)."""
    task = task or new_task(context_id)
    await store.commit(
        Commit(TaskRecord(task, "alice", 1, OLD, OLD), [StreamResponse(task=task)], **parts)
    )
    later = moved(task, state)
    closing = Closing(close, "done") if close is not None else None
    record = TaskRecord(later, "alice", 2, OLD, OLD)
    await store.commit(Commit(record, [status(later)], expected_version=1, close=closing))
    return record


class RetentionSuite(Suite):
    """`RetentionStore.purge_finished`, for every store that declares retention."""

    @pytest.fixture
    def retention(self, store: TaskStore) -> RetentionStore:
        return declared(store.capabilities.retention, "retention")

    async def test_finished_tasks_past_the_cutoff_go_and_running_or_recent_ones_stay(
        self, store: TaskStore, retention: RetentionStore
    ) -> None:
        old = [await aged(store, state) for state in FINISHED]
        running = await aged(store, TaskState.WORKING)
        waiting = await aged(store, TaskState.INPUT_REQUIRED)
        recent = await advance(store, await create(store), TaskState.COMPLETED)
        assert await retention.purge_finished(CUTOFF, 100) == len(old)
        for record in old:
            assert await store.get(record.id) is None
            assert await store.events(record.id) == []
        for record in (running, waiting, recent):
            kept = await store.get(record.id)
            assert kept is not None
            assert kept.version == record.version
            assert [e.seq for e in await store.events(record.id)] == [1, 2]
        assert await retention.purge_finished(CUTOFF, 100) == 0

    async def test_a_finished_task_goes_with_its_push_configs_outbox_and_ledger_rows(
        self, store: TaskStore, retention: RetentionStore
    ) -> None:
        ledger = declared(store.capabilities.ledger, "ledger")
        push = store.capabilities.push
        task = new_task("c-old")
        first = TaskRecord(task, "alice", 1, OLD, OLD)
        added, taken = entry(first, "h-old", "c-old"), received(first, "h-in")
        # A handoff received (its ledger row) that handed the task on (its outbox entry).
        record = await aged(store, task=task, close="h-old", outbox=added, received=taken)
        other = await aged(store, context_id="c-old")
        await ledger.record_received(received(other, "h-refused"))  # a row written alone
        if push is not None:  # its deliveries all made
            done = PushConfigRecord(
                record.id, "p1", "{}", done=True, created_at=OLD, updated_at=OLD
            )
            await push.put_push_config(done)
            await push.save_push_progress(done)
        kept = await aged(store, TaskState.WORKING, context_id="c-old")
        assert await retention.purge_finished(CUTOFF, 100) == 2
        assert {e.task_id for e in await ledger.outbox(context_id="c-old")} == set()
        assert [e.task_id for e in await ledger.received("c-old")] == []
        if push is not None:
            assert await push.push_configs(record.id) == []
            assert await push.active_push_configs() == []
        assert await store.get(other.id) is None
        assert await store.get(kept.id) is not None

    async def test_ledger_rows_of_handoffs_that_made_no_task_go_once_old(
        self, store: TaskStore, retention: RetentionStore
    ) -> None:
        ledger = declared(store.capabilities.ledger, "ledger")
        refused = ReceivedEntry(
            "h1", "k" * 16, "c-ref", "triage", "t0", "t-none", "rejected", "", OLD
        )
        await ledger.record_received(refused)
        await ledger.record_received(replace(refused, handoff_id="h2", at=utc_now()))
        assert await retention.purge_finished(CUTOFF, 100) == 1
        assert [e.handoff_id for e in await ledger.received("c-ref")] == ["h2"]
        assert [e.handoff_id for e in await ledger.received()] == ["h2"]

    async def test_a_task_whose_idempotency_key_is_live_is_kept_and_found(
        self, store: TaskStore, retention: RetentionStore
    ) -> None:
        live = await aged(store, dedupe_key="k-live", dedupe_ttl=3600.0)
        gone = await aged(store)
        assert await retention.purge_finished(CUTOFF, 100) == 1
        assert await store.get(gone.id) is None
        assert await store.get(live.id) is not None
        assert await store.find("k-live") == live.id  # a retry still finds its task

    async def test_a_task_with_a_handoff_still_pending_is_kept(
        self, store: TaskStore, retention: RetentionStore
    ) -> None:
        ledger = declared(store.capabilities.ledger, "ledger")
        task = new_task("c-pend")
        pending = entry(TaskRecord(task, "alice", 1, OLD, OLD), "h-pend", "c-pend")
        record = await aged(store, TaskState.TRANSFERRED, task=task, outbox=pending)
        assert await retention.purge_finished(CUTOFF, 100) == 0
        assert await store.get(record.id) is not None
        assert [e.handoff_id for e in await ledger.outbox(status="pending")] == ["h-pend"]

    async def test_a_task_with_push_deliveries_still_to_make_is_kept(
        self, store: TaskStore, retention: RetentionStore
    ) -> None:
        push = declared(store.capabilities.push, "push configs")
        record = await aged(store, TaskState.FAILED)
        active = PushConfigRecord(record.id, "p1", "{}", created_at=OLD, updated_at=OLD)
        await push.put_push_config(active)
        assert await retention.purge_finished(CUTOFF, 100) == 0
        await push.save_push_progress(replace(active, done=True))  # delivered: it may go
        assert await retention.purge_finished(CUTOFF, 100) == 1
        assert await push.push_configs(record.id) == []

    async def test_a_purge_deletes_at_most_its_limit_and_the_next_goes_on(
        self, store: TaskStore, retention: RetentionStore
    ) -> None:
        old = [await aged(store) for _ in range(5)]
        assert [await retention.purge_finished(CUTOFF, 2) for _ in range(4)] == [2, 2, 1, 0]
        assert [await store.get(r.id) for r in old] == [None] * 5
