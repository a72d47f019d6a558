"""`TaskStore.commit` in every shape a step takes — a task created (under a key, with its
outbox entry or the ledger row of the handoff that made it), a task moved (with an entry
added, closed, or both) — and, for each way a commit is refused, that nothing of it was
written: a step's writes land together or not at all."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

from a2a_handoff.errors import ConflictError, StoreError
from a2a_handoff.protocol.models import StreamResponse
from a2a_handoff.protocol.states import TaskState
from a2a_handoff.stores.base import Closing, Commit, LedgerStore, TaskQuery, TaskStore
from a2a_handoff.stores.conformance.samples import (
    Suite,
    create,
    creating,
    declared,
    entry,
    moved,
    moving,
    new_record,
    received,
    status,
    step,
    stored,
    unchanged,
)


class CommitSuite(Suite):
    """`TaskStore.commit`, for every store; its outbox and ledger parts for a store that
    declares a ledger, their refusal for one that does not."""

    @pytest.fixture
    def ledger(self, store: TaskStore) -> LedgerStore:
        return declared(store.capabilities.ledger, "ledger")

    # -- a task created -------------------------------------------------------------------

    async def test_a_commit_creates_a_task_with_its_first_events(self, store: TaskStore) -> None:
        record = new_record()
        working = moved(record.task, TaskState.WORKING)
        made = replace(record, task=working, version=2)
        written = await store.commit(
            Commit(made, [StreamResponse(task=record.task), status(working)])
        )
        assert written == made
        got = await stored(store, record.id)
        assert (got.task, got.owner, got.version) == (working, "alice", 2)
        logged = await store.events(record.id)
        assert [e.seq for e in logged] == [1, 2]
        assert logged[0].item.task == record.task

    async def test_a_taken_key_writes_nothing_and_names_the_task_it_made(
        self, store: TaskStore
    ) -> None:
        first = await create(store, key="k1")
        other = new_record()
        found = await store.commit(creating(other, dedupe_key="k1"))
        assert (found.id, found.version) == (first.id, 1)
        assert await store.get(other.id) is None
        assert await store.events(other.id) == []
        assert await store.find("k1") == first.id
        assert (await store.list_tasks(TaskQuery(owner="alice"))).total_size == 1

    async def test_a_taken_key_with_a_window_names_its_task_until_the_window_ends(
        self, store: TaskStore
    ) -> None:
        async def make() -> tuple[str, str]:
            record = new_record()
            written = await store.commit(creating(record, dedupe_key="order-77", dedupe_ttl=0.4))
            return record.id, written.id

        made, first = await make()
        assert first == made
        assert await store.find("order-77") == first
        other, found = await make()  # within the window: the same task, nothing written
        assert found == first
        assert await store.get(other) is None
        await asyncio.sleep(0.6)
        assert await store.find("order-77") is None
        made, later = await make()
        assert later == made != first
        assert await store.find("order-77") == later
        assert await store.get(first) is not None

    async def test_a_new_task_whose_id_is_taken_conflicts_and_writes_nothing(
        self, store: TaskStore
    ) -> None:
        record = await create(store)
        with pytest.raises(ConflictError):
            await store.commit(creating(record, dedupe_key="k2"))
        assert await store.find("k2") is None
        await unchanged(store, record)

    # -- a task moved ---------------------------------------------------------------------

    async def test_a_commit_moves_a_task_with_its_next_events(self, store: TaskStore) -> None:
        record = await create(store)
        working = moved(record.task, TaskState.WORKING)
        done = moved(working, TaskState.COMPLETED)
        updated = record.advanced(done, 2, record.updated_at)
        unit = Commit(updated, [status(working), status(done)], expected_version=1)
        assert await store.commit(unit) == updated
        got = await stored(store, record.id)
        assert (got.version, got.state) == (3, TaskState.COMPLETED)
        logged = await store.events(record.id)
        assert [e.seq for e in logged] == [1, 2, 3]
        assert logged[-1].final
        assert [e.seq for e in await store.events(record.id, after=2)] == [3]

    async def test_a_stale_commit_conflicts_and_writes_nothing(self, store: TaskStore) -> None:
        record = await create(store)
        working, unit = moving(record, TaskState.WORKING)
        await store.commit(unit)
        _failed, stale = moving(record, TaskState.FAILED)  # from version 1, now 2
        with pytest.raises(ConflictError):
            await store.commit(stale)
        await unchanged(store, working)

    async def test_a_commit_to_a_task_never_stored_conflicts(self, store: TaskStore) -> None:
        record = new_record()
        _working, unit = moving(record, TaskState.WORKING)
        with pytest.raises(ConflictError):
            await store.commit(unit)
        assert await store.get(record.id) is None
        assert await store.events(record.id) == []

    # -- with the outbox and the ledger ---------------------------------------------------

    async def test_a_checkpoint_adds_the_entry_with_the_move(
        self, store: TaskStore, ledger: LedgerStore
    ) -> None:
        record = await create(store)
        working, unit = moving(record, TaskState.WORKING, outbox=entry(record))
        assert await store.commit(unit) == working
        assert [e.handoff_id for e in await ledger.outbox(status="pending")] == ["h1"]
        await unchanged(store, working)

    async def test_a_terminate_closes_the_entry_with_the_move(
        self, store: TaskStore, ledger: LedgerStore
    ) -> None:
        record = await create(store)
        working, unit = moving(record, TaskState.WORKING, outbox=entry(record))
        await store.commit(unit)
        done, unit = moving(working, TaskState.TRANSFERRED, close=Closing("h1", "done", "{}"))
        await store.commit(unit)
        assert await ledger.outbox(status="pending") == []
        (closed,) = await ledger.outbox()
        assert (closed.status, closed.detail) == ("done", "{}")
        await unchanged(store, done)
        assert (await stored(store, record.id)).state is TaskState.TRANSFERRED

    async def test_a_redirect_closes_the_old_entry_and_adds_the_new_one_at_once(
        self, store: TaskStore, ledger: LedgerStore
    ) -> None:
        record = await create(store)
        working, unit = moving(record, TaskState.WORKING, outbox=entry(record, "h1"))
        await store.commit(unit)
        detail = "rejected: on_reject → human"
        again, unit = moving(
            working,
            TaskState.WORKING,
            outbox=entry(record, "h2"),
            close=Closing("h1", "failed", detail),
        )
        await store.commit(unit)
        by_id = {e.handoff_id: e for e in await ledger.outbox()}
        assert (by_id["h1"].status, by_id["h1"].detail) == ("failed", detail)
        assert [e.handoff_id for e in await ledger.outbox(status="pending")] == ["h2"]
        await unchanged(store, again)

    async def test_a_task_created_with_its_outbox_entry(
        self, store: TaskStore, ledger: LedgerStore
    ) -> None:
        record = new_record()
        created = await store.commit(creating(record, dedupe_key="k", outbox=entry(record, "h9")))
        assert created.id == record.id
        assert [e.task_id for e in await ledger.outbox(status="pending")] == [record.id]
        # The same key again: nothing written, the first task returned, no second entry.
        again = new_record()
        first = await store.commit(creating(again, dedupe_key="k", outbox=entry(again, "h10")))
        assert first.id == record.id
        assert [e.handoff_id for e in await ledger.outbox()] == ["h9"]
        assert await store.get(again.id) is None

    async def test_a_task_created_by_a_handoff_gets_its_ledger_row_in_the_same_write(
        self, store: TaskStore, ledger: LedgerStore
    ) -> None:
        record = new_record()
        accepted = received(record)
        created = await store.commit(creating(record, dedupe_key="hk", received=accepted))
        assert created.id == record.id
        assert await ledger.received() == [accepted]
        # The key was taken: neither the second task nor its ledger row is written.
        again = new_record()
        found = await store.commit(creating(again, dedupe_key="hk", received=received(again)))
        assert found.id == record.id
        assert await ledger.received() == [accepted]
        assert await store.get(again.id) is None

    # -- a refused commit writes nothing --------------------------------------------------

    async def test_a_stale_checkpoint_writes_neither_task_nor_entry(
        self, store: TaskStore, ledger: LedgerStore
    ) -> None:
        record = await create(store)
        working, events = step(record, TaskState.WORKING)
        stale = Commit(
            replace(working, version=8), events, expected_version=7, outbox=entry(record)
        )
        with pytest.raises(ConflictError):
            await store.commit(stale)
        assert await ledger.outbox() == []
        await unchanged(store, record)

    async def test_an_entry_added_twice_conflicts_and_writes_nothing(
        self, store: TaskStore, ledger: LedgerStore
    ) -> None:
        record = await create(store)
        working, unit = moving(record, TaskState.WORKING, outbox=entry(record, "h1"))
        await store.commit(unit)
        _again, unit = moving(working, TaskState.WORKING, outbox=entry(record, "h1"))
        with pytest.raises(ConflictError):
            await store.commit(unit)
        await unchanged(store, working)
        assert [e.handoff_id for e in await ledger.outbox()] == ["h1"]

    async def test_closing_an_entry_no_longer_pending_conflicts_and_writes_nothing(
        self, store: TaskStore, ledger: LedgerStore
    ) -> None:
        record = await create(store)
        working, unit = moving(record, TaskState.WORKING, outbox=entry(record, "h1"))
        await store.commit(unit)
        done, unit = moving(working, TaskState.TRANSFERRED, close=Closing("h1", "done"))
        await store.commit(unit)
        # Closed again (a terminate), closed by a redirect adding h2, one never there.
        for parts in (
            {"close": Closing("h1", "failed")},
            {"close": Closing("h1", "failed"), "outbox": entry(record, "h2")},
            {"close": Closing("h0", "failed")},
        ):
            _later, unit = moving(done, TaskState.TRANSFERRED, **parts)
            with pytest.raises(ConflictError):
                await store.commit(unit)
        await unchanged(store, done)
        assert [(e.handoff_id, e.status) for e in await ledger.outbox()] == [("h1", "done")]

    async def test_a_new_task_whose_entry_exists_writes_nothing_not_even_its_key(
        self, store: TaskStore, ledger: LedgerStore
    ) -> None:
        record = await create(store)
        _working, unit = moving(record, TaskState.WORKING, outbox=entry(record, "h1"))
        await store.commit(unit)
        other = new_record()
        refused = creating(
            other, dedupe_key="k3", outbox=entry(other, "h1"), received=received(other)
        )
        with pytest.raises(ConflictError):
            await store.commit(refused)
        assert await store.get(other.id) is None
        assert await store.events(other.id) == []
        assert await store.find("k3") is None
        assert await ledger.received() == []
        assert [e.task_id for e in await ledger.outbox()] == [record.id]

    async def test_a_store_without_a_ledger_refuses_a_commit_with_a_ledger_part(
        self, store: TaskStore
    ) -> None:
        if store.capabilities.ledger is not None:
            pytest.skip("the store declares a ledger: it takes every part of a commit")
        record = await create(store)
        refused = [
            moving(record, TaskState.WORKING, outbox=entry(record))[1],
            moving(record, TaskState.WORKING, close=Closing("h1", "done"))[1],
        ]
        other = new_record()
        refused.append(creating(other, dedupe_key="k4", received=received(other)))
        for unit in refused:
            with pytest.raises(StoreError, match="declares no ledger"):
                await store.commit(unit)
        await unchanged(store, record)
        assert await store.get(other.id) is None
        assert await store.find("k4") is None
