"""The PostgreSQL store's pool gives back every connection, whatever happens to its caller."""

from __future__ import annotations

import asyncio

import pytest

from a2a_handoff.stores.postgres import PostgresTaskStore
from tests.postgres_support import PostgresDatabase

pytestmark = pytest.mark.anyio


async def test_a_call_cancelled_while_it_waits_for_a_connection_leaks_none(
    postgres_database: PostgresDatabase,
) -> None:
    url = f"{postgres_database.store_url()}&pool_max=1&acquire_timeout=2"
    store = await PostgresTaskStore.from_url(url).open()
    try:
        async with store._conn():  # the pool's only connection, busy
            waiting = asyncio.create_task(store.get("some-task"))
            for _ in range(5):
                await asyncio.sleep(0)  # it waits for the connection
            waiting.cancel()  # as a caller that hung up, or a timeout, would
            with pytest.raises(asyncio.CancelledError):
                await waiting
        # The connection came back: the cancelled call's wait must not have taken it for good.
        assert await store.get("some-task") is None
        assert store.pool_use()["inUse"] == 0
    finally:
        await asyncio.wait_for(store.aclose(), 10)  # closing waits for every connection back
