"""Stores under the runtime and backend by backend: two replicas' task managers on one store,
a SQLite file reopened, a Redis URL's options, a burst of calls on Redis. The behaviour every
backend shows is the conformance kit's (`test_conformance.py`)."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import httpx
import pytest

from a2a_handoff.agent import TaskContext
from a2a_handoff.client.client import AgentClient
from a2a_handoff.errors import ConflictError, RpcError, StoreError, TaskBusyError
from a2a_handoff.handoff.settings import HandoffSettings
from a2a_handoff.outcomes import InputRequired
from a2a_handoff.protocol.models import Message, Part, Role
from a2a_handoff.protocol.states import TaskState
from a2a_handoff.runtime.tasks import TaskManager
from a2a_handoff.stores import SqliteTaskStore, Store, open_store
from a2a_handoff.stores.base import TaskQuery, TaskRecord
from a2a_handoff.stores.conformance.samples import advance, create, new_task
from a2a_handoff.stores.postgres import PostgresTaskStore
from a2a_handoff.stores.redis import RedisTaskStore
from a2a_handoff.trust.agent_trust import AgentTrust
from a2a_handoff.trust.trustlist import TrustList
from tests.redis_support import RedisServer

__all__ = ["new_task"]  # for the server's tests

pytestmark = pytest.mark.anyio


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
    return Message(
        message_id=str(uuid.uuid4()), role=Role.USER, parts=[Part(text=text)], task_id=task_id
    )


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
