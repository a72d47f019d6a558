"""Leases: taken by one holder at a time, renewed by it, free again when released or expired."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from a2a_handoff.stores import MemoryTaskStore, SqliteTaskStore, Store
from a2a_handoff.stores.redis import RedisTaskStore

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["memory", "sqlite", "redis"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    backend: Store
    if request.param == "memory":
        backend = MemoryTaskStore()
    elif request.param == "sqlite":
        backend = SqliteTaskStore(tmp_path / "leases.db")
    else:
        backend = RedisTaskStore.from_url(request.getfixturevalue("redis_server").store_url())
    await backend.open()
    try:
        yield backend
    finally:
        await backend.aclose()


async def test_a_lease_has_one_holder_until_released(store: Store) -> None:
    assert await store.acquire("outbox:h1", "a", 30)
    assert not await store.acquire("outbox:h1", "b", 30)
    assert await store.holder("outbox:h1") == "a"
    assert await store.acquire("outbox:h1", "a", 30)  # the holder renews
    await store.release("outbox:h1", "b")  # not b's to release
    assert await store.holder("outbox:h1") == "a"
    await store.release("outbox:h1", "a")
    assert await store.holder("outbox:h1") is None
    assert await store.acquire("outbox:h1", "b", 30)


async def test_an_expired_lease_can_be_taken_over(store: Store) -> None:
    assert await store.acquire("replica:a", "a", 0.2)
    assert not await store.acquire("replica:a", "b", 0.2)
    await asyncio.sleep(0.3)
    assert await store.holder("replica:a") is None
    assert await store.acquire("replica:a", "b", 0.2)
    assert await store.holder("replica:a") == "b"


async def test_leases_are_independent_by_name(store: Store) -> None:
    assert await store.acquire("task:1", "a", 30)
    assert await store.acquire("task:2", "b", 30)
    assert (await store.holder("task:1"), await store.holder("task:2")) == ("a", "b")
