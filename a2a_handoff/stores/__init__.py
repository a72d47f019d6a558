"""Store backends, chosen by URL: `sqlite:///path`, `memory://`, `redis://host:port/db`,
`postgresql://user@host:port/db`."""

from __future__ import annotations

from a2a_handoff.errors import StoreError
from a2a_handoff.stores.base import (
    HandoffStore,
    OutboxEntry,
    ReceivedEntry,
    Store,
    TaskEvent,
    TaskPage,
    TaskQuery,
    TaskRecord,
    TaskStore,
)
from a2a_handoff.stores.leasing import LeaseStore
from a2a_handoff.stores.memory import MemoryTaskStore
from a2a_handoff.stores.sqlite import SqliteTaskStore

__all__ = [
    "HandoffStore",
    "LeaseStore",
    "MemoryTaskStore",
    "OutboxEntry",
    "ReceivedEntry",
    "SqliteTaskStore",
    "Store",
    "TaskEvent",
    "TaskPage",
    "TaskQuery",
    "TaskRecord",
    "TaskStore",
    "open_store",
]


def open_store(url: str) -> Store:
    """The (unopened) store a URL names: `create_app` opens and closes it."""
    if url.startswith("sqlite:"):
        return SqliteTaskStore.from_url(url)
    if url in ("memory://", "memory:"):
        return MemoryTaskStore()
    if url.startswith(("redis://", "rediss://", "unix://")):
        from a2a_handoff.stores.redis import RedisTaskStore  # the optional `redis` extra

        return RedisTaskStore.from_url(url)
    if url.startswith(("postgresql://", "postgres://")):
        from a2a_handoff.stores.postgres import PostgresTaskStore  # the `postgres` extra

        return PostgresTaskStore.from_url(url)
    raise StoreError(
        f"unknown store URL {url!r}: use sqlite:///PATH, memory://, redis://HOST:PORT/DB"
        " or postgresql://USER@HOST:PORT/DB"
    )
