"""One behaviour suite, run against every store backend."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from a2a_handoff.agent import TaskContext
from a2a_handoff.client.client import AgentClient
from a2a_handoff.errors import (
    ConflictError,
    InvalidParamsError,
    RpcError,
    StoreError,
    TaskBusyError,
)
from a2a_handoff.handoff.settings import HandoffSettings
from a2a_handoff.outcomes import InputRequired
from a2a_handoff.protocol.models import (
    Artifact,
    Message,
    Part,
    Role,
    StreamResponse,
    Task,
    TaskArtifactUpdateEvent,
    TaskStatus,
    TaskStatusUpdateEvent,
    utc_now,
)
from a2a_handoff.protocol.states import TaskState
from a2a_handoff.runtime.tasks import TaskManager
from a2a_handoff.stores import SqliteTaskStore, Store, TaskStore, open_store
from a2a_handoff.stores.base import TaskEvent, TaskQuery, TaskRecord
from a2a_handoff.stores.postgres import PostgresTaskStore
from a2a_handoff.stores.redis import RedisTaskStore
from a2a_handoff.trust.agent_trust import AgentTrust
from a2a_handoff.trust.trustlist import TrustList
from tests.redis_support import RedisServer

pytestmark = pytest.mark.anyio


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


async def create(
    store: TaskStore, owner: str = "alice", context_id: str = "ctx", key: str | None = None
) -> TaskRecord:
    task = new_task(context_id)
    now = utc_now()
    return await store.create(
        TaskRecord(task, owner, 1, now, now), [StreamResponse(task=task)], dedupe_key=key
    )


async def advance(store: TaskStore, record: TaskRecord, *states: TaskState) -> TaskRecord:
    task = record.task
    events = []
    for state in states:
        task = moved(task, state)
        events.append(status(task))
    updated = TaskRecord(
        task, record.owner, record.version + len(events), record.created_at, utc_now()
    )
    await store.update(updated, events, expected_version=record.version)
    return updated


async def test_create_then_get(store: TaskStore) -> None:
    record = await create(store)
    got = await store.get(record.id)
    assert got is not None
    assert got.task == record.task
    assert (got.owner, got.version) == ("alice", 1)
    assert await store.get("nope") is None


async def test_dedupe_key_returns_the_first_task(store: TaskStore) -> None:
    first = await create(store, key="k1")
    second = await create(store, key="k1")
    assert second.id == first.id
    assert await store.find("k1") == first.id
    page = await store.list_tasks(TaskQuery(owner="alice"))
    assert page.total_size == 1


async def test_concurrent_creates_with_one_key_make_one_task(store: TaskStore) -> None:
    results = await asyncio.gather(*(create(store, key="same") for _ in range(20)))
    assert len({r.id for r in results}) == 1
    assert (await store.list_tasks(TaskQuery(owner="alice"))).total_size == 1


async def test_update_appends_events_with_next_seqs(store: TaskStore) -> None:
    record = await create(store)
    updated = await advance(store, record, TaskState.WORKING, TaskState.COMPLETED)
    got = await store.get(record.id)
    assert got is not None
    assert got.version == 3
    assert got.state is TaskState.COMPLETED
    events = await store.events(record.id)
    assert [e.seq for e in events] == [1, 2, 3]
    assert events[0].item.task is not None
    assert events[-1].final
    assert [e.seq for e in await store.events(record.id, after=2)] == [3]
    assert updated.version == 3


async def test_stale_update_conflicts_and_changes_nothing(store: TaskStore) -> None:
    record = await create(store)
    await advance(store, record, TaskState.WORKING)
    with pytest.raises(ConflictError):
        await advance(store, record, TaskState.FAILED)
    got = await store.get(record.id)
    assert got is not None
    assert (got.version, got.state) == (2, TaskState.WORKING)
    assert len(await store.events(record.id)) == 2


async def test_list_filters_by_owner_context_and_state(store: TaskStore) -> None:
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
    store: TaskStore,
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
    store: TaskStore,
) -> None:
    at = "2026-01-01T00:00:0{}.000Z".format

    async def made(owner: str, delegate: str = "") -> TaskRecord:
        task = new_task().model_copy(
            update={"status": TaskStatus(state=TaskState.WORKING, timestamp=at(1))}
        )
        record = TaskRecord(task, owner, 1, at(1), at(1), delegate)
        return await store.create(record, [StreamResponse(task=task)])

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
    await store.update(
        TaskRecord(quiet.task, "alice", 2, at(1), at(5)), [artifact], expected_version=1
    )
    moved_ids = []
    for owner, delegate in (("alice", ""), ("alice", ""), ("triage", "alice"), ("bob", "")):
        record = await made(owner, delegate)
        task = record.task.model_copy(
            update={"status": TaskStatus(state=TaskState.COMPLETED, timestamp=at(4))}
        )
        later = TaskRecord(task, owner, 2, at(1), at(4), delegate)
        await store.update(later, [status(task)], expected_version=1)
        moved_ids.append(record.id)
    alices = set(moved_ids[:3])
    seen: list[str] = []
    token: str | None = None
    while True:
        query = TaskQuery(owner="alice", status_after=at(3), page_size=2, page_token=token)
        page = await store.list_tasks(query)
        assert page.total_size == 3
        seen += [r.id for r in page.records]
        token = page.next_page_token or None
        if token is None:
            break
    assert sorted(seen) == sorted(alices)
    assert all(r.task.status.timestamp == at(4) for r in page.records)
    everything = await store.list_tasks(TaskQuery(owner="alice", status_after=at(0)))
    assert {r.id for r in everything.records} == {old.id, quiet.id, *alices}
    nothing = await store.list_tasks(TaskQuery(owner="alice", status_after=at(4)))
    assert (nothing.records, nothing.total_size) == ([], 0)
    everyone = await store.list_tasks(TaskQuery(owner=None, status_after=at(3)))
    assert {r.id for r in everyone.records} == set(moved_ids)


async def test_pages_cover_every_task_once(store: TaskStore) -> None:
    ids = {(await create(store)).id for _ in range(7)}
    seen: list[str] = []
    token: str | None = None
    while True:
        page = await store.list_tasks(TaskQuery(owner="alice", page_size=3, page_token=token))
        assert page.total_size == 7
        seen += [r.id for r in page.records]
        if not page.next_page_token:
            break
        token = page.next_page_token
    assert sorted(seen) == sorted(ids)


async def test_a_page_stops_at_its_byte_budget_and_the_next_goes_on(store: TaskStore) -> None:
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


async def test_foreign_page_token_is_invalid_params(store: TaskStore) -> None:
    with pytest.raises(InvalidParamsError, match="pageToken"):
        await store.list_tasks(TaskQuery(owner="alice", page_token="not-ours"))


async def collect(stream: AsyncIterator[TaskEvent]) -> list[TaskEvent]:
    return [event async for event in stream]


async def test_follow_gives_backlog_then_live_events_until_terminal(store: TaskStore) -> None:
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


async def test_follow_of_a_terminal_task_ends_after_the_backlog(store: TaskStore) -> None:
    record = await create(store)
    await advance(store, record, TaskState.COMPLETED)
    assert [e.seq for e in await asyncio.wait_for(collect(store.follow(record.id)), 5)] == [1, 2]
    assert await asyncio.wait_for(collect(store.follow(record.id, after=2)), 5) == []


async def test_a_slow_follower_loses_nothing(store: TaskStore) -> None:
    record = await create(store)
    stream = store.follow(record.id)
    first = await anext(stream)
    assert first.seq == 1
    for _ in range(300):  # more than the live buffer holds: the follower re-reads the store
        record = await advance(store, record, TaskState.WORKING)
    await advance(store, record, TaskState.COMPLETED)
    rest = await asyncio.wait_for(collect(stream), 10)
    assert [e.seq for e in rest] == list(range(2, 303))


async def test_ping(store: TaskStore) -> None:
    assert await store.ping()


async def test_sqlite_survives_reopen(tmp_path: Path) -> None:
    path = tmp_path / "durable.db"
    async with SqliteTaskStore(path) as first:
        record = await create(first, key="k")
        await advance(first, record, TaskState.WORKING)
    async with SqliteTaskStore(path) as second:
        got = await second.get(record.id)
        assert got is not None
        assert got.version == 2
        assert await second.find("k") == record.id
        assert len(await second.events(record.id)) == 2


async def test_sqlite_one_failing_write_does_not_fail_its_batch(tmp_path: Path) -> None:
    async with SqliteTaskStore(tmp_path / "batch.db") as store:
        record = await create(store)
        stale = advance(store, record, TaskState.FAILED)
        fresh = [create(store) for _ in range(5)]
        good = advance(store, record, TaskState.WORKING)
        results = await asyncio.gather(good, stale, *fresh, return_exceptions=True)
        assert isinstance(results[1], ConflictError)
        assert not any(isinstance(r, BaseException) for i, r in enumerate(results) if i != 1)
        assert (await store.list_tasks(TaskQuery(owner="alice"))).total_size == 6


async def test_open_store_reads_prefix_and_window_from_a_redis_url(
    redis_server: RedisServer,
) -> None:
    base, tag = redis_server.url(), uuid.uuid4().hex[:8]
    one = open_store(f"{base}?prefix=one-{tag}:&idempotency_ttl=60")
    two = open_store(f"{base}?prefix=two-{tag}:")
    assert isinstance(one, RedisTaskStore)
    assert isinstance(two, RedisTaskStore)
    assert (one.prefix, one.idempotency_ttl) == (f"one-{tag}:", 60.0)
    assert (two.prefix, two.idempotency_ttl) == (f"two-{tag}:", 24 * 3600.0)
    async with one, two:  # two agents on one Redis: neither sees the other's keys
        record = await create(one, key="k")
        assert await one.find("k") == record.id
        assert await two.get(record.id) is None
        assert await two.find("k") is None
        assert (await two.list_tasks(TaskQuery(owner=None))).total_size == 0
    with pytest.raises(StoreError, match="idempotency_ttl"):
        open_store(f"{base}?idempotency_ttl=a-day")
    with pytest.raises(StoreError, match="idempotency_ttl"):
        open_store(f"{base}?idempotency_ttl=0")
    # redis-py's own options survive ours being taken out of the URL.
    kept = open_store(f"{base}?prefix=x:&socket_timeout=5")
    assert isinstance(kept, RedisTaskStore)
    assert kept.url == f"{base}?socket_timeout=5"


class AskAgain:
    """Takes every message and asks for the next one (the task waits for input each time)."""

    async def handle(self, ctx: TaskContext) -> InputRequired:
        await asyncio.sleep(0.01)  # a little work, so concurrent follow-ups overlap it
        return InputRequired(f"got {ctx.text}; next?")


def user_message(text: str, task_id: str | None = None) -> Message:
    return Message(message_id=str(uuid.uuid4()), role=Role.USER, parts=[Part(text=text)],
                   task_id=task_id)  # fmt: skip


async def replica_of(store: Store) -> Store:
    """Another replica's view of the same store: its own connections for Redis and
    PostgreSQL, the same object otherwise (two task managers on one store, as two processes
    sharing it would be)."""
    if isinstance(store, RedisTaskStore):
        return await RedisTaskStore(store.url, prefix=store.prefix).open()
    if isinstance(store, PostgresTaskStore):
        return await PostgresTaskStore(store.dsn, schema=store.schema).open()
    return store


async def outcome(manager: TaskManager, message: Message) -> TaskRecord | RpcError:
    try:
        submission = await manager.send(message, "alice")
        return await asyncio.shield(submission.settled)
    except RpcError as error:
        return error


async def test_concurrent_follow_ups_from_two_replicas_are_serialized(store: Store) -> None:
    other = await replica_of(store)
    settings = HandoffSettings(agent_name="asker", agent_url="http://127.0.0.1:1/")
    async with httpx.AsyncClient() as http:
        client = AgentClient(http)
        trust = AgentTrust("asker", store, TrustList())  # no handoffs here: nothing to sign
        replicas = [TaskManager(AskAgain(), s, settings, client, trust) for s in (store, other)]
        first = await outcome(replicas[0], user_message("start"))
        assert isinstance(first, TaskRecord), first
        accepted: list[tuple[int, str]] = []  # (the version it left, its text)
        refused: list[str] = []
        for round_ in range(6):
            texts = [f"answer {round_}.{i}" for i in range(6)]
            results = await asyncio.gather(
                *(outcome(replicas[i % 2], user_message(t, first.id)) for i, t in enumerate(texts))
            )
            for text, result in zip(texts, results, strict=True):
                if isinstance(result, TaskRecord):
                    assert result.state is TaskState.INPUT_REQUIRED
                    accepted.append((result.version, text))
                else:
                    assert isinstance(result, TaskBusyError), result
                    assert "busy" in result.message
                    refused.append(text)
        for replica in replicas:
            await replica.aclose()
    try:
        stored = await store.get(first.id)
        assert stored is not None
        users = [m.text for m in stored.task.history or () if m.role is Role.USER]
        # Every message answered with success is there, in the order it was accepted; no
        # refused one is.
        assert users == ["start", *(text for _, text in sorted(accepted))]
        assert len(accepted) >= 6  # one a round at least
        assert refused  # the rounds did overlap
    finally:
        if other is not store:
            await other.aclose()


async def test_logged_events_read_back_as_emitted_though_stored_once(store: Store) -> None:
    task = new_task()
    now = utc_now()
    first = StreamResponse(task=task)
    record = await store.create(TaskRecord(task, "alice", 1, now, now), [first])
    events: list[StreamResponse] = []
    for i in range(3):  # artifacts added one a step, as a handler's would be
        artifact = Artifact(artifact_id=f"a{i}", parts=[Part(text="x" * 1000 + str(i))])
        task = task.model_copy(update={"artifacts": [*(task.artifacts or []), artifact]})
        update = TaskArtifactUpdateEvent(task_id=task.id, context_id=task.context_id,
                                         artifact=artifact, last_chunk=True)  # fmt: skip
        events.append(StreamResponse(artifact_update=update))
        step = record.advanced(task, 1, utc_now())
        await store.update(step, [events[-1]], expected_version=record.version)
        record = step
    done = moved(task, TaskState.COMPLETED)
    await store.update(record.advanced(done, 1, utc_now()), [status(done)], expected_version=4)
    logged = [e.item for e in await store.events(task.id)]
    assert logged == [first, *events, status(done)]
    assert logged[0].task is not None
    assert logged[0].task.artifacts is None  # the task as created, not as it is now


# -- the agent's identity ----------------------------------------------------------------------


async def test_an_identity_is_kept_per_agent_and_changed_check_and_set(store: Store) -> None:
    from a2a_handoff.trust.keys import Identity, load_or_create

    agent = f"agent-{uuid.uuid4().hex[:6]}"
    keys = store.capabilities.identity
    if store.shared:
        # A shared store keeps no private keys: whoever reaches it would read them.
        assert keys is None
        return
    assert keys is not None
    assert await keys.load_identity(agent) is None
    made = await load_or_create(keys, agent)
    again = await load_or_create(keys, agent)
    assert again.signing_key.kid == made.signing_key.kid
    document = made.to_document()
    rotated = made.rotated().to_document()
    assert await keys.save_identity(agent, rotated, document)
    assert not await keys.save_identity(agent, document, document)  # stale: refused
    assert not await keys.save_identity(agent, document, None)  # exists already
    stored = await keys.load_identity(agent)
    assert stored is not None
    assert len(Identity.from_document(stored).active) == 2


async def test_a_burst_of_300_concurrent_calls_on_redis_fails_none(
    redis_server: RedisServer,
) -> None:
    # redis-py 8 caps a pool at 100 connections and fails the 101st concurrent call at once:
    # a burst of handoffs under load met "Too many connections" (the chaos test).
    # What the burst waits on: 300 new connections, each connected and answered. All 300 are
    # taken from the pool before any is answered (gather starts every call before the loop
    # polls a socket), so the cap is met however fast Redis is. The store's own timeouts
    # (connect 1 s, read 2 s) are for a Redis that hangs, not a loaded test machine: here they
    # are long, so a slow machine makes the test slower, never red.
    slow = "socket_connect_timeout=60&socket_timeout=60"
    store = open_store(f"{redis_server.url()}?prefix=burst-{uuid.uuid4().hex[:8]}:&{slow}")
    async with store:
        record = await create(store, key="k")
        results = await asyncio.gather(
            *(store.get(record.id) for _ in range(300)), return_exceptions=True
        )
    assert [r for r in results if isinstance(r, BaseException)] == []
    assert all(r is not None and r.id == record.id for r in results)
