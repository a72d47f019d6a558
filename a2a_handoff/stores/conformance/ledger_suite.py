"""The ledger (`capabilities.ledger`): the outbox of handoffs sent and the ledger of those
received, each step atomic with its task's update — both written, or neither."""

from __future__ import annotations

from dataclasses import replace

import pytest

from a2a_handoff.errors import ConflictError
from a2a_handoff.protocol.models import StreamResponse, utc_now
from a2a_handoff.protocol.states import TaskState
from a2a_handoff.stores.base import LedgerStore, ReceivedEntry, TaskRecord, TaskStore
from a2a_handoff.stores.conformance.samples import (
    Suite,
    create,
    declared,
    entry,
    new_task,
    step,
    stored,
)


class LedgerSuite(Suite):
    """`LedgerStore`, for every store that declares a ledger."""

    @pytest.fixture
    def ledger(self, store: TaskStore) -> LedgerStore:
        return declared(store.capabilities.ledger, "ledger")

    async def test_checkpoint_then_terminate_moves_the_task_and_the_entry_together(
        self, store: TaskStore, ledger: LedgerStore
    ) -> None:
        record = await create(store)
        working, events = step(record, TaskState.WORKING)
        await ledger.checkpoint(working, events, expected_version=1, entry=entry(record))
        assert [e.handoff_id for e in await ledger.outbox(status="pending")] == ["h1"]
        assert (await stored(store, record.id)).version == 2

        done, events = step(working, TaskState.TRANSFERRED)
        await ledger.terminate(
            done, events, expected_version=2, handoff_id="h1", status="done", detail="{}"
        )
        assert await ledger.outbox(status="pending") == []
        (closed,) = await ledger.outbox()
        assert (closed.status, closed.detail) == ("done", "{}")
        after = await stored(store, record.id)
        assert (after.state, after.version) == (TaskState.TRANSFERRED, 3)

    async def test_a_stale_checkpoint_writes_neither_task_nor_entry(
        self, store: TaskStore, ledger: LedgerStore
    ) -> None:
        record = await create(store)
        working, events = step(record, TaskState.WORKING)
        with pytest.raises(ConflictError):
            await ledger.checkpoint(
                replace(working, version=8), events, expected_version=7, entry=entry(record)
            )
        assert await ledger.outbox() == []
        assert (await stored(store, record.id)).version == 1

    async def test_terminating_an_entry_twice_conflicts_and_changes_nothing(
        self, store: TaskStore, ledger: LedgerStore
    ) -> None:
        record = await create(store)
        working, events = step(record, TaskState.WORKING)
        await ledger.checkpoint(working, events, expected_version=1, entry=entry(record))
        done, events = step(working, TaskState.TRANSFERRED)
        await ledger.terminate(
            done, events, expected_version=2, handoff_id="h1", status="done", detail=""
        )
        failed, events = step(working, TaskState.FAILED)
        with pytest.raises(ConflictError):  # stale version, and the entry is no longer pending
            await ledger.terminate(
                replace(failed, version=4),
                events,
                expected_version=3,
                handoff_id="h1",
                status="failed",
                detail="",
            )
        assert (await stored(store, record.id)).state is TaskState.TRANSFERRED
        assert [e.status for e in await ledger.outbox()] == ["done"]

    async def test_a_task_created_with_its_outbox_entry(
        self, store: TaskStore, ledger: LedgerStore
    ) -> None:
        task = new_task()
        now = utc_now()
        record = TaskRecord(task, "alice", 1, now, now)
        created = await store.create(
            record, [StreamResponse(task=task)], dedupe_key="k", outbox=entry(record, "h9")
        )
        assert created.id == record.id
        assert [e.task_id for e in await ledger.outbox(status="pending")] == [record.id]
        # The same key again: nothing written, the first task returned, no second entry.
        again = TaskRecord(new_task(), "alice", 1, now, now)
        first = await store.create(
            again, [StreamResponse(task=again.task)], dedupe_key="k", outbox=entry(again, "h10")
        )
        assert first.id == record.id
        assert [e.handoff_id for e in await ledger.outbox()] == ["h9"]

    async def test_outbox_filters_by_context_and_the_ledger_keeps_received(
        self, store: TaskStore, ledger: LedgerStore
    ) -> None:
        one, two = await create(store, context_id="c1"), await create(store, context_id="c2")
        for record, handoff_id, context in ((one, "ha", "c1"), (two, "hb", "c2")):
            working, events = step(record, TaskState.WORKING)
            await ledger.checkpoint(
                working, events, expected_version=1, entry=entry(record, handoff_id, context)
            )
        assert [e.handoff_id for e in await ledger.outbox(context_id="c2")] == ["hb"]
        received = ReceivedEntry(
            "h", "k" * 16, "c1", "triage", "t0", one.id, "accepted", "", utc_now()
        )
        await ledger.record_received(received)
        await ledger.record_received(replace(received, context_id="c2", outcome="duplicate"))
        assert await ledger.received("c1") == [received]
        assert len(await ledger.received()) == 2

    async def test_a_task_created_by_a_handoff_gets_its_ledger_row_in_the_same_write(
        self, store: TaskStore, ledger: LedgerStore
    ) -> None:
        now = utc_now()
        record = TaskRecord(new_task(), "alice", 1, now, now)
        accepted = ReceivedEntry(
            "h", "k" * 16, "c1", "triage", "t0", record.id, "accepted", "", now
        )
        created = await store.create(
            record, [StreamResponse(task=record.task)], dedupe_key="hk", received=accepted
        )
        assert created.id == record.id
        assert await ledger.received() == [accepted]
        # The key was taken: neither the second task nor its ledger row is written.
        again = TaskRecord(new_task(), "alice", 1, now, now)
        found = await store.create(
            again,
            [StreamResponse(task=again.task)],
            dedupe_key="hk",
            received=replace(accepted, task_id=again.id),
        )
        assert found.id == record.id
        assert await ledger.received() == [accepted]

    async def test_a_redirect_closes_the_old_entry_and_adds_the_new_one_at_once(
        self, store: TaskStore, ledger: LedgerStore
    ) -> None:
        record = await create(store)
        working, events = step(record, TaskState.WORKING)
        await ledger.checkpoint(working, events, expected_version=1, entry=entry(record, "h1"))
        again, events = step(working, TaskState.WORKING)
        await ledger.checkpoint(
            again,
            events,
            expected_version=2,
            entry=entry(record, "h2"),
            close=("h1", "failed", "rejected: on_reject → human"),
        )
        by_id = {e.handoff_id: e for e in await ledger.outbox()}
        assert (by_id["h1"].status, by_id["h1"].detail) == ("failed", "rejected: on_reject → human")
        assert [e.handoff_id for e in await ledger.outbox(status="pending")] == ["h2"]
        # Closing an entry that is no longer pending: nothing is written.
        third, events = step(again, TaskState.WORKING)
        with pytest.raises(ConflictError):
            await ledger.checkpoint(
                third,
                events,
                expected_version=3,
                entry=entry(record, "h3"),
                close=("h1", "failed", ""),
            )
        assert {e.handoff_id for e in await ledger.outbox()} == {"h1", "h2"}
        assert (await stored(store, record.id)).version == 3
