"""Store backends, chosen by URL: `sqlite:///path`, `memory://`, `redis://host:port/db`,
`postgresql://user@host:port/db`, or a scheme a third party registered (`register_scheme`);
what a store may offer beyond the contract is declared in `stores.capabilities`."""

from __future__ import annotations

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
from a2a_handoff.stores.capabilities import (
    Ephemeral,
    KeepsKeyFile,
    Pooled,
    RefusesLegacyKeys,
    Shared,
    ephemeral,
    shared,
)
from a2a_handoff.stores.leasing import LeaseStore
from a2a_handoff.stores.memory import MemoryTaskStore
from a2a_handoff.stores.schemes import open_store, register_scheme
from a2a_handoff.stores.sqlite import SqliteTaskStore

__all__ = [
    "Ephemeral",
    "HandoffStore",
    "KeepsKeyFile",
    "LeaseStore",
    "MemoryTaskStore",
    "OutboxEntry",
    "Pooled",
    "ReceivedEntry",
    "RefusesLegacyKeys",
    "Shared",
    "SqliteTaskStore",
    "Store",
    "TaskEvent",
    "TaskPage",
    "TaskQuery",
    "TaskRecord",
    "TaskStore",
    "ephemeral",
    "open_store",
    "register_scheme",
    "shared",
]
