"""The `store` fixture: every store test runs on memory, SQLite, a real Redis and a real
PostgreSQL."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from a2a_handoff.stores import MemoryTaskStore, SqliteTaskStore, Store
from a2a_handoff.stores.postgres import PostgresTaskStore
from a2a_handoff.stores.redis import RedisTaskStore
from tests.postgres_support import PostgresDatabase
from tests.redis_support import RedisServer


@pytest.fixture(params=["memory", "sqlite", "redis", "postgres"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    backend: Store
    if request.param == "memory":
        backend = MemoryTaskStore()
    elif request.param == "sqlite":
        backend = SqliteTaskStore(tmp_path / "store.db")
    elif request.param == "postgres":
        database: PostgresDatabase = request.getfixturevalue("postgres_database")
        backend = PostgresTaskStore.from_url(database.store_url())
    else:
        redis: RedisServer = request.getfixturevalue("redis_server")
        backend = RedisTaskStore.from_url(redis.store_url())
    await backend.open()
    try:
        yield backend
    finally:
        await backend.aclose()
