"""What only the shared stores (PostgreSQL, Redis) do: keep no keys, one schema or prefix per
agent, the owner recorded and another agent refused, the old default kept or refused; on
PostgreSQL a slow statement failing its call alone, and a schema of version 2 migrated with
its tasks."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator

import asyncpg
import pytest

from a2a_handoff.errors import StoreDownError, StoreError, StoreTimeoutError, StoreVersionError
from a2a_handoff.protocol.models import StreamResponse, TaskStatus
from a2a_handoff.protocol.states import TaskState
from a2a_handoff.stores import Store
from a2a_handoff.stores._owner import prefix_for, schema_for
from a2a_handoff.stores._postgres_schema import MIGRATIONS, VERSION
from a2a_handoff.stores.base import Commit, TaskQuery, TaskRecord
from a2a_handoff.stores.conformance.samples import create, new_task, status
from a2a_handoff.stores.postgres import PostgresTaskStore
from a2a_handoff.stores.redis import RedisTaskStore
from tests.postgres_support import PostgresDatabase
from tests.redis_support import RedisServer

pytestmark = pytest.mark.anyio


@pytest.fixture
def database() -> Iterator[PostgresDatabase]:
    """A database of the test's own: default schemas (`a2a_<name>`, `a2a`) are the point."""
    made = PostgresDatabase().create()
    try:
        yield made
    finally:
        made.drop()


@pytest.fixture
async def redis_db(redis_server: RedisServer) -> AsyncIterator[str]:
    """A Redis database of the test's own, emptied before and after: default prefixes."""
    import redis.asyncio as aioredis

    url = redis_server.url(db=12)
    client = aioredis.Redis.from_url(url)
    await client.flushdb()
    try:
        yield url
    finally:
        await client.flushdb()
        await client.aclose()


def postgres(url: str, agent: str) -> PostgresTaskStore:
    store = PostgresTaskStore.from_url(url)
    store.claim(agent)
    return store


def redis(url: str, agent: str) -> RedisTaskStore:
    store = RedisTaskStore.from_url(f"{url}?durability=none" if "?" not in url else url)
    store.claim(agent)
    return store


async def test_a_store_shared_by_replicas_keeps_no_keys(store: Store) -> None:
    # Whoever reaches Redis or PostgreSQL would read an agent's private keys there: those
    # stores declare no identity (the agent is given a key file); memory and SQLite do.
    declared = store.capabilities
    if store.shared:
        assert declared.identity is None
    else:
        assert declared.identity is not None
        assert declared.legacy_keys is None


def test_default_names_are_per_agent_and_safe() -> None:
    assert schema_for("billing") == "a2a_billing"
    assert prefix_for("billing") == "a2a:billing:"
    odd = schema_for("Billing-EU 2")
    assert odd.startswith("a2a_billing_eu_2_")
    assert odd != schema_for("billing_eu_2")  # names differing only in what was cleaned
    assert len(schema_for("x" * 200)) <= 48
    assert prefix_for("a:b") != prefix_for("a_b")


async def test_postgres_a_schema_is_one_agents(database: PostgresDatabase) -> None:
    url = database.url("shared")
    async with postgres(url, "billing") as billing:
        task = await create(billing)
        with pytest.raises(StoreError, match=r"belongs to agent 'billing'.*'logistics'"):
            await postgres(url, "logistics").open()
        async with postgres(url, "billing") as replica:  # a replica shares it
            assert await replica.get(task.id) is not None
    # Defaults: one schema per agent name, each owned by its agent.
    async with postgres(database.url(), "billing") as own, postgres(database.url(), "x") as x:
        assert (own.schema, x.schema) == ("a2a_billing", "a2a_x")
        assert await own.get(task.id) is None


async def test_postgres_the_old_default_is_kept_for_its_agent_or_refused(
    database: PostgresDatabase,
) -> None:
    # An earlier version's default schema: tasks, no owner recorded (opened unclaimed).
    old = PostgresTaskStore.from_url(database.url("a2a"))
    async with old:
        task = await create(old)
    with pytest.raises(StoreError, match=r"\?schema=a2a .*\?schema=a2a_billing"):
        await postgres(database.url(), "billing").open()
    async with postgres(database.url("a2a"), "billing") as explicit:  # says which: claimed
        assert await explicit.get(task.id) is not None
    async with postgres(database.url(), "billing") as kept:  # now it names billing: kept
        assert kept.schema == "a2a"
        assert await kept.get(task.id) is not None
    async with postgres(database.url(), "triage") as other:  # another agent: its own
        assert other.schema == "a2a_triage"


async def test_redis_a_prefix_is_one_agents(redis_db: str) -> None:
    url = f"{redis_db}?durability=none&prefix=shared:"
    async with redis(url, "billing") as billing:
        task = await create(billing)
        with pytest.raises(StoreError, match=r"belongs to agent 'billing'.*'logistics'"):
            await redis(url, "logistics").open()
        async with redis(url, "billing") as replica:
            assert await replica.get(task.id) is not None
    async with redis(redis_db, "billing") as own, redis(redis_db, "x") as x:
        assert (own.prefix, x.prefix) == ("a2a:billing:", "a2a:x:")
        assert await own.get(task.id) is None


async def test_redis_the_old_default_is_kept_for_its_agent_or_refused(redis_db: str) -> None:
    old = RedisTaskStore.from_url(f"{redis_db}?durability=none&prefix=a2a:")
    async with old:
        task = await create(old)
    with pytest.raises(StoreError, match=r"\?prefix=a2a: .*\?prefix=a2a:billing:"):
        await redis(redis_db, "billing").open()
    async with redis(f"{redis_db}?durability=none&prefix=a2a:", "billing"):
        pass
    async with redis(redis_db, "billing") as kept:
        assert kept.prefix == "a2a:"
        assert await kept.get(task.id) is not None
    async with redis(redis_db, "triage") as other:
        assert other.prefix == "a2a:triage:"


async def test_postgres_a_slow_statement_fails_its_call_alone(
    postgres_database: PostgresDatabase,
) -> None:
    url = f"{postgres_database.store_url()}&command_timeout=0.3"
    async with PostgresTaskStore.from_url(url) as store:
        record = await create(store)
        other = await create(store)
        # Another session holds the task's row: the update waits on it past its limit.
        blocker = await asyncpg.connect(postgres_database.url())
        try:
            async with blocker.transaction():
                await blocker.execute(
                    f"SELECT 1 FROM {store.s}.tasks WHERE id = $1 FOR UPDATE", record.id
                )
                task = record.task.model_copy(
                    update={"status": TaskStatus(state=TaskState.WORKING)}
                )
                later = TaskRecord(task, "alice", 2, record.created_at, record.updated_at)
                with pytest.raises(StoreTimeoutError, match="limit") as slow:
                    await store.commit(Commit(later, [status(task)], expected_version=1))
                assert not isinstance(slow.value, StoreDownError)
                # The store is not down: other calls go on, /health says so.
                assert not store.guard.down
                assert await store.problem() is None
                assert await store.get(other.id) is not None
        finally:
            await blocker.close()
        await store.commit(Commit(later, [status(task)], expected_version=1))  # it goes through


async def test_postgres_a_schema_of_version_2_gets_the_status_time_of_its_tasks(
    postgres_database: PostgresDatabase,
) -> None:
    schema = f"v2_{uuid.uuid4().hex[:8]}"
    conn = await asyncpg.connect(postgres_database.url())
    task = new_task()
    stamp = task.status.timestamp
    assert stamp is not None
    try:
        async with conn.transaction():
            await conn.execute(f'CREATE SCHEMA "{schema}"')
            for step in MIGRATIONS[:2]:
                await conn.execute(step(f'"{schema}"'))
            await conn.execute(f'CREATE TABLE "{schema}".schema_version (version integer)')
            await conn.execute(f'INSERT INTO "{schema}".schema_version VALUES (2)')
            # A task as version 2 wrote it: its status's time only in its body.
            await conn.fetchval(
                f'SELECT "{schema}".create_task($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11,'
                " $12, $13, $14, $15)",
                task.id,
                "alice",
                "",
                task.context_id,
                task.status.state.value,
                1,
                stamp,
                stamp,
                task.dump_json(),
                [StreamResponse(task=task).model_dump_json()],
                None,
                None,
                None,
                None,
                "none",
            )
    finally:
        await conn.close()
    store = postgres(postgres_database.url(schema), "billing")
    with pytest.raises(StoreVersionError, match="db upgrade"):  # refused until upgraded
        await store.open()
    assert (await store.upgrade()).current == VERSION
    async with store:
        before = "2000-01-01T00:00:00.000Z"
        page = await store.list_tasks(TaskQuery(owner="alice", status_after=before))
        assert [r.id for r in page.records] == [task.id]
        assert (await store.list_tasks(TaskQuery(owner="alice", status_after=stamp))).records == []
        await create(store)  # the new functions take writes
        async with store._conn() as check:
            assert await check.fetchval(f"SELECT name FROM {store.s}.agent") == "billing"


async def test_a_store_opened_before_its_claim_keeps_its_place_and_checks_its_owner(
    postgres_database: PostgresDatabase, redis_server: RedisServer
) -> None:
    for url, make in (
        (postgres_database.store_url(), PostgresTaskStore.from_url),
        (f"{redis_server.store_url()}&durability=none", RedisTaskStore.from_url),
    ):
        async with make(url) as store:  # opened, then claimed (as an app given it open)
            store.claim("billing")
            await store.open()
            async with make(url) as other:
                other.claim("logistics")
                with pytest.raises(StoreError, match=r"belongs to agent 'billing'"):
                    await other.open()
