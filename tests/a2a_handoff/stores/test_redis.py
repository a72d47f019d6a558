"""What only the Redis store promises: replicas share it, keys expire, a restart loses nothing,
and a Redis that may lose writes is refused unless the URL accepts the loss."""

from __future__ import annotations

import asyncio
import logging
import signal
from pathlib import Path

import pytest

from a2a_handoff.errors import StoreError
from a2a_handoff.protocol.models import StreamResponse, utc_now
from a2a_handoff.protocol.states import TaskState
from a2a_handoff.stores.base import Commit, TaskQuery, TaskRecord
from a2a_handoff.stores.conformance.samples import advance, create, new_task
from a2a_handoff.stores.redis import RedisTaskStore
from tests.integration.handoff_support import message
from tests.redis_support import RedisServer
from tests.support import AgentProcess

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
            await store.commit(Commit(fresh, [StreamResponse(task=task)]))  # it takes writes
    finally:
        server.stop()


async def test_a_redis_slow_to_answer_at_open_is_waited_for(tmp_path: Path) -> None:
    """A Redis that takes its connections but answers late (its fsync stalled by a busy
    disk) is waited for at open, where one timed-out PING made the agent exit."""
    server = RedisServer(tmp_path / "redis").start()
    assert server.proc is not None
    try:
        server.proc.send_signal(signal.SIGSTOP)  # connections accepted, nothing answered
        # Paused past the 2 s read timeout: the first PING times out before it is resumed.
        asyncio.get_running_loop().call_later(3.0, server.proc.send_signal, signal.SIGCONT)
        async with RedisTaskStore.from_url(server.store_url()) as store:
            record = await create(store)
            assert await store.get(record.id) == record
    finally:
        server.proc.send_signal(signal.SIGCONT)
        server.stop()


async def test_a_redis_that_may_lose_writes_is_refused_unless_the_url_accepts_the_loss(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    volatile = RedisServer(tmp_path / "volatile", extra=("--appendonly", "no")).start()
    evicting = RedisServer(tmp_path / "evicting", extra=("--maxmemory-policy", "allkeys-lru"))
    evicting.start()
    try:
        with pytest.raises(StoreError) as refused:
            await RedisTaskStore.from_url(volatile.store_url()).open()
        message = str(refused.value)
        assert "appendonly is 'no'" in message
        assert "appendonly yes appendfsync always" in message
        assert "durability=none" in message
        with pytest.raises(StoreError, match="maxmemory-policy is 'allkeys-lru'"):
            await RedisTaskStore.from_url(evicting.store_url()).open()
        # Accepted in the URL: it opens and works, and says so once, as a WARNING.
        url = volatile.store_url() + "&durability=none"
        with caplog.at_level(logging.WARNING, logger="a2a_handoff.stores"):
            async with RedisTaskStore.from_url(url) as one, RedisTaskStore.from_url(url) as two:
                record = await create(one, key="k")
                assert await two.find("k") == record.id
        said = [r for r in caplog.records if "durability=none" in r.getMessage()]
        assert len(said) == 1
        assert said[0].levelno == logging.WARNING
        assert "appendonly is 'no'" in said[0].getMessage()
        with pytest.raises(StoreError, match="durability must be"):
            RedisTaskStore.from_url(volatile.store_url() + "&durability=some")
    finally:
        volatile.stop()
        evicting.stop()


def test_an_agent_on_a_redis_without_an_append_only_file_does_not_start(tmp_path: Path) -> None:
    volatile = RedisServer(tmp_path / "volatile", extra=("--appendonly", "no")).start()
    try:
        agent = AgentProcess("echo", volatile.store_url())
        agent.log_path = tmp_path / "echo.log"
        agent.start(wait=False)
        assert agent.proc is not None
        assert agent.proc.wait(30) == 64
        said = agent.log_path.read_text()
        assert "appendonly is 'no'" in said
        assert "appendonly yes appendfsync always" in said
        # The same Redis, the loss accepted: it serves, having said so once.
        accepting = AgentProcess("echo", volatile.store_url() + "&durability=none")
        accepting.log_path = tmp_path / "accepting.log"
        accepting.start()
        try:
            done = accepting.rpc("SendMessage", message("hello"))
            assert done["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
        finally:
            accepting.stop()
        warnings = [
            line
            for line in accepting.log_path.read_text().splitlines()
            if "durability=none" in line
        ]
        assert len(warnings) == 1
        assert "WARNING" in warnings[0]
    finally:
        volatile.stop()
