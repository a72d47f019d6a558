"""Reading many tasks and following one: `list_tasks` filtered and paged (every task once,
within a page's byte budget), `follow` giving the backlog, then live events, to the end."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

from a2a_handoff.errors import InvalidParamsError
from a2a_handoff.protocol.models import (
    Artifact,
    Part,
    StreamResponse,
    TaskArtifactUpdateEvent,
    TaskStatus,
)
from a2a_handoff.protocol.states import TaskState
from a2a_handoff.stores.base import Commit, TaskQuery, TaskRecord, TaskStore
from a2a_handoff.stores.conformance.samples import Suite, advance, collect, create, new_task, status


def at(second: int) -> str:
    return f"2026-01-01T00:00:0{second}.000Z"


async def pages(store: TaskStore, query: TaskQuery, total: int) -> list[str]:
    """The ids of every page of `query`, page after page; each page tells `total`."""
    seen: list[str] = []
    token: str | None = None
    while True:
        page = await store.list_tasks(replace(query, page_token=token))
        assert page.total_size == total
        seen += [r.id for r in page.records]
        token = page.next_page_token or None
        if token is None:
            return seen


class ListingSuite(Suite):
    """`list_tasks` and `follow`, for every store."""

    async def test_list_filters_by_owner_context_and_state(self, store: TaskStore) -> None:
        a1 = await create(store, "alice", "c1")
        await create(store, "alice", "c2")
        await create(store, "bob", "c1")
        await advance(store, a1, TaskState.WORKING, TaskState.COMPLETED)
        assert (await store.list_tasks(TaskQuery(owner="alice"))).total_size == 2
        in_c1 = await store.list_tasks(TaskQuery(owner="alice", context_id="c1"))
        assert [r.id for r in in_c1.records] == [a1.id]
        done = await store.list_tasks(TaskQuery(owner="alice", state=TaskState.COMPLETED))
        assert [r.id for r in done.records] == [a1.id]
        everyone = await store.list_tasks(TaskQuery(owner=None))
        assert everyone.total_size == 3

    async def test_a_client_shown_transferred_as_completed_filters_on_completed(
        self, store: TaskStore
    ) -> None:
        moved = await advance(store, await create(store), TaskState.WORKING, TaskState.TRANSFERRED)
        done = await advance(store, await create(store), TaskState.WORKING, TaskState.COMPLETED)
        await advance(store, await create(store), TaskState.WORKING)
        for shown_as_completed, state, expected in (
            (True, TaskState.COMPLETED, {moved.id, done.id}),
            (True, TaskState.TRANSFERRED, set()),
            (False, TaskState.COMPLETED, {done.id}),
            (False, TaskState.TRANSFERRED, {moved.id}),
        ):
            query = TaskQuery(owner="alice", state=state, transfers_as_completed=shown_as_completed)
            page = await store.list_tasks(query)
            assert {r.id for r in page.records} == expected, (shown_as_completed, state)
            assert page.total_size == len(expected)

    async def test_status_timestamp_filter_goes_by_the_status_time_on_every_page(
        self, store: TaskStore
    ) -> None:
        async def made(owner: str, delegate: str = "") -> TaskRecord:
            task = new_task().model_copy(
                update={"status": TaskStatus(state=TaskState.WORKING, timestamp=at(1))}
            )
            record = TaskRecord(task, owner, 1, at(1), at(1), delegate)
            return await store.commit(Commit(record, [StreamResponse(task=task)]))

        old = await made("alice")
        # Updated later without a status change (an artifact): its status is still old.
        quiet = await made("alice")
        artifact = StreamResponse(
            artifact_update=TaskArtifactUpdateEvent(
                task_id=quiet.id,
                context_id=quiet.task.context_id,
                artifact=Artifact(artifact_id="a", parts=[Part(text="more")]),
            )
        )
        quieter = TaskRecord(quiet.task, "alice", 2, at(1), at(5))
        await store.commit(Commit(quieter, [artifact], expected_version=1))
        moved_ids = []
        for owner, delegate in (("alice", ""), ("alice", ""), ("triage", "alice"), ("bob", "")):
            record = await made(owner, delegate)
            task = record.task.model_copy(
                update={"status": TaskStatus(state=TaskState.COMPLETED, timestamp=at(4))}
            )
            later = TaskRecord(task, owner, 2, at(1), at(4), delegate)
            await store.commit(Commit(later, [status(task)], expected_version=1))
            moved_ids.append(record.id)
        alices = set(moved_ids[:3])
        query = TaskQuery(owner="alice", status_after=at(3), page_size=2)
        assert sorted(await pages(store, query, 3)) == sorted(alices)
        everything = await store.list_tasks(TaskQuery(owner="alice", status_after=at(0)))
        assert {r.id for r in everything.records} == {old.id, quiet.id, *alices}
        assert all(r.task.status.timestamp == at(4) for r in everything.records if r.id in alices)
        nothing = await store.list_tasks(TaskQuery(owner="alice", status_after=at(4)))
        assert (nothing.records, nothing.total_size) == ([], 0)
        everyone = await store.list_tasks(TaskQuery(owner=None, status_after=at(3)))
        assert {r.id for r in everyone.records} == set(moved_ids)

    async def test_pages_cover_every_task_once(self, store: TaskStore) -> None:
        ids = {(await create(store)).id for _ in range(7)}
        seen = await pages(store, TaskQuery(owner="alice", page_size=3), 7)
        assert sorted(seen) == sorted(ids)

    async def test_a_page_stops_at_its_byte_budget_and_the_next_goes_on(
        self, store: TaskStore
    ) -> None:
        ids = {(await create(store)).id for _ in range(7)}
        first = (await store.list_tasks(TaskQuery(owner="alice", page_size=1))).records[0]
        size = len(first.task_json())
        for budget, most in ((size * 5 // 2, 2), (1, 1), (size * 100, 7)):
            seen: list[str] = []
            token: str | None = None
            while True:
                query = TaskQuery(owner="alice", page_size=5, page_token=token, page_bytes=budget)
                page = await store.list_tasks(query)
                assert page.total_size == 7
                left = 7 - len(seen)
                assert len(page.records) == min(most, 5, left), (budget, len(page.records))
                seen += [r.id for r in page.records]
                if not page.next_page_token:
                    break
                token = page.next_page_token
            assert sorted(seen) == sorted(ids), budget

    async def test_foreign_page_token_is_invalid_params(self, store: TaskStore) -> None:
        with pytest.raises(InvalidParamsError, match="pageToken"):
            await store.list_tasks(TaskQuery(owner="alice", page_token="not-ours"))

    async def test_follow_gives_backlog_then_live_events_until_terminal(
        self, store: TaskStore
    ) -> None:
        record = await create(store)
        record = await advance(store, record, TaskState.WORKING)
        follower = asyncio.create_task(collect(store.follow(record.id)))
        late = asyncio.create_task(collect(store.follow(record.id, after=2)))
        await asyncio.sleep(0.05)
        record = await advance(store, record, TaskState.WORKING)
        await advance(store, record, TaskState.COMPLETED)
        events = await asyncio.wait_for(follower, 5)
        assert [e.seq for e in events] == [1, 2, 3, 4]
        assert [e.seq for e in await asyncio.wait_for(late, 5)] == [3, 4]

    async def test_follow_of_a_terminal_task_ends_after_the_backlog(self, store: TaskStore) -> None:
        record = await create(store)
        await advance(store, record, TaskState.COMPLETED)
        events = await asyncio.wait_for(collect(store.follow(record.id)), 5)
        assert [e.seq for e in events] == [1, 2]
        assert await asyncio.wait_for(collect(store.follow(record.id, after=2)), 5) == []

    async def test_a_slow_follower_loses_nothing(self, store: TaskStore) -> None:
        record = await create(store)
        stream = store.follow(record.id)
        first = await anext(stream)
        assert first.seq == 1
        for _ in range(300):  # more than a live buffer holds: the follower reads the store
            record = await advance(store, record, TaskState.WORKING)
        await advance(store, record, TaskState.COMPLETED)
        rest = await asyncio.wait_for(collect(stream), 10)
        assert [e.seq for e in rest] == list(range(2, 303))
