"""Schema versions (`stores.versions`) on SQLite, PostgreSQL and Redis: a new store made at
the code's version, a store of the previous version reported behind, refused at open with
the command that upgrades it, upgraded (twice: the second finds nothing to do), and a store
ahead of the code used when its migrations are marked compatible."""

from __future__ import annotations

import sqlite3
import uuid
from pathlib import Path

import asyncpg
import pytest

from a2a_handoff.errors import StoreVersionError
from a2a_handoff.protocol.states import TaskState
from a2a_handoff.stores import SqliteTaskStore
from a2a_handoff.stores import _sqlite_schema as sqlite_schema
from a2a_handoff.stores._postgres_schema import MIGRATIONS, VERSION, VERSIONS
from a2a_handoff.stores._redis_scripts import LAYOUTS
from a2a_handoff.stores.conformance.samples import advance, create, stored
from a2a_handoff.stores.postgres import PostgresTaskStore
from a2a_handoff.stores.redis import RedisTaskStore
from a2a_handoff.stores.versions import Migration, compatible_from, upgrade_command
from tests.postgres_support import PostgresDatabase
from tests.redis_support import RedisServer

pytestmark = pytest.mark.anyio


def test_a_store_is_compatible_from_the_last_migration_older_code_cannot_read() -> None:
    steps = (
        Migration(1, "tables", "breaking"),
        Migration(2, "a column", "expand"),
        Migration(3, "an old column dropped", "contract"),
        Migration(4, "an index", "expand"),
    )
    assert [compatible_from(steps, v) for v in range(5)] == [0, 1, 1, 2, 2]
    with pytest.raises(ValueError, match="kind"):
        Migration(5, "?", "sideways")


def test_the_upgrade_command_leaves_a_password_out() -> None:
    command = upgrade_command("postgresql://app:s3cret@db:5432/a2a?schema=a2a_billing")
    assert "s3cret" not in command
    assert "postgresql://app:PASSWORD@db:5432/a2a?schema=a2a_billing" in command


# -- SQLite -------------------------------------------------------------------------------


def previous_sqlite(path: Path) -> None:
    """A file as the previous version made it: the first migration only."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        sqlite_schema.apply(conn, upto=sqlite_schema.VERSION - 1)
    finally:
        conn.close()


async def test_sqlite_a_new_file_is_made_at_the_code_version(tmp_path: Path) -> None:
    store = SqliteTaskStore(tmp_path / "new.db")
    before = await store.schema_status()
    assert (before.exists, before.behind, before.usable) == (False, False, True)
    async with store:
        await create(store)
    after = await store.schema_status()
    assert (after.current, after.code, after.pending) == (2, 2, ())


async def test_sqlite_a_previous_version_is_refused_then_upgraded_once(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    previous_sqlite(path)
    store = SqliteTaskStore(path)
    status = await store.schema_status()
    assert (status.current, status.behind) == (1, True)
    assert [(m.version, m.kind) for m in status.pending] == [(2, "expand")]
    with pytest.raises(StoreVersionError) as refused:
        await store.open()
    assert f"python -m a2a_handoff db upgrade --store 'sqlite:///{path}'" in str(refused.value)
    upgraded = await store.upgrade()
    assert (upgraded.current, upgraded.pending) == (2, ())
    with sqlite3.connect(path) as conn:
        indexes = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
    assert {"tasks_by_state_time", "outbox_by_task", "dedupe_by_task"} <= indexes
    again = await store.upgrade()
    assert again == upgraded  # nothing to do
    async with store:
        record = await advance(store, await create(store), TaskState.COMPLETED)
        assert (await stored(store, record.id)).version == 2


async def test_sqlite_a_file_ahead_is_used_only_when_marked_compatible(tmp_path: Path) -> None:
    path = tmp_path / "ahead.db"
    async with SqliteTaskStore(path):
        pass
    with sqlite3.connect(path) as conn:  # a later version's expand step: compatible from 1
        conn.execute("UPDATE schema_version SET version = 3, compatible_from = 1")
    store = SqliteTaskStore(path)
    assert (await store.schema_status()).ahead
    async with store:
        await create(store)
    with sqlite3.connect(path) as conn:  # a later breaking step: only its code reads it
        conn.execute("UPDATE schema_version SET compatible_from = 3")
    with pytest.raises(StoreVersionError, match="newer than this code"):
        await SqliteTaskStore(path).open()
    with pytest.raises(StoreVersionError, match="newer than this code"):
        await SqliteTaskStore(path).upgrade()


# -- PostgreSQL ---------------------------------------------------------------------------


async def previous_postgres(database: PostgresDatabase) -> str:
    """A schema as the previous version made it (its migrations, its one-column version
    table); its URL."""
    schema = f"v{uuid.uuid4().hex[:10]}"
    conn = await asyncpg.connect(database.url())
    try:
        async with conn.transaction():
            await conn.execute(f'CREATE SCHEMA "{schema}"')
            for step in MIGRATIONS[: VERSION - 1]:
                await conn.execute(step(f'"{schema}"'))
            await conn.execute(f'CREATE TABLE "{schema}".schema_version (version integer)')
            await conn.execute(f'INSERT INTO "{schema}".schema_version VALUES ({VERSION - 1})')
    finally:
        await conn.close()
    return database.url(schema)


async def test_postgres_a_new_schema_is_made_at_the_code_version(
    postgres_database: PostgresDatabase,
) -> None:
    url = postgres_database.store_url()
    assert not (await PostgresTaskStore.from_url(url).schema_status()).exists
    async with PostgresTaskStore.from_url(url) as store:
        await create(store)
    status = await PostgresTaskStore.from_url(url).schema_status()
    assert (status.current, status.code, status.pending) == (len(VERSIONS), VERSION, ())
    assert status.compatible_from == 3  # the write functions changed at 3


async def test_postgres_a_previous_version_is_refused_then_upgraded_once(
    postgres_database: PostgresDatabase,
) -> None:
    url = await previous_postgres(postgres_database)
    store = PostgresTaskStore.from_url(url)
    status = await store.schema_status()
    assert (status.current, status.behind) == (VERSION - 1, True)
    assert [m.name for m in status.pending] == [VERSIONS[-1].name]
    assert VERSIONS[-1].kind == "expand"
    with pytest.raises(StoreVersionError) as refused:
        await store.open()
    assert f"python -m a2a_handoff db upgrade --store '{url}'" in str(refused.value)
    conn = await asyncpg.connect(postgres_database.url())
    try:  # one index there already, as a build cut short may leave it: built around
        await conn.execute(f"CREATE INDEX outbox_by_task ON {store.s}.outbox (task_id)")
        upgraded = await store.upgrade()
        valid = await conn.fetch(
            "SELECT c.relname, i.indisvalid FROM pg_index i JOIN pg_class c"
            " ON c.oid = i.indexrelid JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = $1 AND c.relname LIKE '%_by_task'",
            store.schema,
        )
    finally:
        await conn.close()
    assert sorted(valid) == [
        (name, True) for name in ("dedupe_by_task", "outbox_by_task", "received_by_task")
    ]
    assert (upgraded.current, upgraded.pending, upgraded.usable) == (VERSION, (), True)
    assert await store.upgrade() == upgraded
    async with store:
        record = await advance(store, await create(store), TaskState.COMPLETED)
        assert (await stored(store, record.id)).version == 2


async def test_postgres_a_schema_ahead_is_used_when_marked_compatible(
    postgres_database: PostgresDatabase,
) -> None:
    url = postgres_database.store_url()
    async with PostgresTaskStore.from_url(url) as store:
        schema = store.s
    conn = await asyncpg.connect(postgres_database.url())
    try:
        await conn.execute(f"UPDATE {schema}.schema_version SET version = {VERSION + 1}")
        async with PostgresTaskStore.from_url(url) as store:  # compatible from 3: used
            await create(store)
        await conn.execute(f"UPDATE {schema}.schema_version SET compatible_from = {VERSION + 1}")
        with pytest.raises(StoreVersionError, match="newer than this code"):
            await PostgresTaskStore.from_url(url).open()
    finally:
        await conn.close()


# -- Redis: the key layout ----------------------------------------------------------------


async def test_redis_a_layout_1_store_is_refused_then_moved_to_layout_2(
    redis_server: RedisServer,
) -> None:
    url = f"{redis_server.store_url()}&durability=none"
    async with RedisTaskStore.from_url(url) as store:
        record = await create(store)
        prefix, client = store.prefix, store._redis
        # As layout 1 kept it: no version, pending handoffs in a set.
        await client.delete(f"{prefix}layout", f"{prefix}layout:compat")
        await client.sadd(f"{prefix}ob:pending", "h1")
        await client.zadd(f"{prefix}ob:ids", {"h1": 1.0})
        await client.hset(f"{prefix}ob:h1", mapping={"context_id": "c", "status": "pending"})
    store = RedisTaskStore.from_url(url)
    status = await store.schema_status()
    assert (status.current, status.code, status.behind) == (1, len(LAYOUTS), True)
    with pytest.raises(StoreVersionError, match="db upgrade --store"):
        await store.open()
    upgraded = await store.upgrade()
    assert (upgraded.current, upgraded.pending) == (2, ())
    assert await store.upgrade() == upgraded
    async with store:
        assert await store._redis.zrange(f"{prefix}ob:pend", 0, -1) == ["h1"]
        assert not await store._redis.exists(f"{prefix}ob:pending")
        assert await store.get(record.id) is not None


async def test_redis_a_new_prefix_gets_the_code_layout(redis_server: RedisServer) -> None:
    url = f"{redis_server.store_url()}&durability=none"
    assert not (await RedisTaskStore.from_url(url).schema_status()).exists
    async with RedisTaskStore.from_url(url):
        pass
    status = await RedisTaskStore.from_url(url).schema_status()
    assert (status.current, status.pending, status.usable) == (2, (), True)
