"""What only the Redis store promises: replicas share it, keys expire, a restart loses nothing."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from a2a_handoff.protocol.models import StreamResponse, utc_now
from a2a_handoff.protocol.states import TaskState
from a2a_handoff.stores.base import TaskQuery, TaskRecord
from a2a_handoff.stores.redis import RedisTaskStore
from tests.a2a_handoff.stores.test_behaviour import advance, create, new_task
from tests.redis_support import RedisServer

pytestmark = pytest.mark.anyio


async def test_a_follower_on_one_replica_sees_the_other_replicas_events_in_order(
    redis_server: RedisServer,
) -> None:
    url = redis_server.store_url()
    async with RedisTaskStore.from_url(url) as writer, RedisTaskStore.from_url(url) as reader:
        record = await create(writer)
        seen: list[int] = []

        async def follow() -> None:
            async for event in reader.follow(record.id):
                seen.append(event.seq)

        follower = asyncio.create_task(follow())
        await asyncio.sleep(0.05)
        for _ in range(20):  # many small steps, as a handler's progress would be
            record = await advance(writer, record, TaskState.WORKING)
        await advance(writer, record, TaskState.COMPLETED)
        await asyncio.wait_for(follower, 5)
    assert seen == list(range(1, 23))  # every event once, in order, ending at the terminal


async def test_idempotency_records_expire_after_their_window(redis_server: RedisServer) -> None:
    url = redis_server.store_url() + "&idempotency_ttl=0.3"
    async with RedisTaskStore.from_url(url) as store:
        first = await create(store, key="msg-1")
        assert await store.find("msg-1") == first.id
        again = await create(store, key="msg-1")
        assert again.id == first.id
        await asyncio.sleep(0.5)
        assert await store.find("msg-1") is None
        later = await create(store, key="msg-1")
        assert later.id != first.id
        assert await store.get(first.id) is not None  # the task itself stays


async def test_fifty_concurrent_creates_with_one_key_make_one_task_across_replicas(
    redis_server: RedisServer,
) -> None:
    url = redis_server.store_url()
    stores = [RedisTaskStore.from_url(url) for _ in range(5)]
    for store in stores:
        await store.open()
    try:
        results = await asyncio.gather(*(create(stores[i % 5], key="same") for i in range(50)))
        assert len({r.id for r in results}) == 1
        page = (await stores[0].list_tasks(TaskQuery(owner=None))).total_size
    finally:
        for store in stores:
            await store.aclose()
    assert page == 1


async def test_a_redis_restart_loses_nothing_acknowledged(tmp_path: Path) -> None:
    server = RedisServer(tmp_path / "redis").start()
    try:
        url = server.store_url()
        written: dict[str, int] = {}
        async with RedisTaskStore.from_url(url) as store:
            for i in range(30):
                record = await create(store, context_id=f"c{i % 3}", key=f"k{i}")
                if i % 2:
                    record = await advance(store, record, TaskState.WORKING, TaskState.COMPLETED)
                written[record.id] = record.version
        server.kill()  # SIGKILL right after the last acknowledged write
        server.start()
        async with RedisTaskStore.from_url(url) as store:
            for task_id, version in written.items():
                stored = await store.get(task_id)
                assert stored is not None
                assert stored.version == version
                assert [e.seq for e in await store.events(task_id)] == list(range(1, version + 1))
            assert await store.find("k7") is not None
            task = new_task()
            now = utc_now()
            fresh = TaskRecord(task, "alice", 1, now, now)
            await store.create(fresh, [StreamResponse(task=task)])  # it still takes writes
    finally:
        server.stop()
