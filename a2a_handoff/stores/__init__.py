"""Store backends, chosen by URL: `sqlite:///path`, `memory://`, `redis://host:port/db`,
`postgresql://user@host:port/db`, or a scheme a third-party backend registered
(`register_scheme`).

The contract a backend fulfils is `stores.base`'s: a small core (`TaskStore`, whose one write
is `commit`, of a step's `Commit`) and the capabilities it declares (`Capabilities`); the
behaviour tests every backend passes are the kit `stores.conformance` (imported by tests only:
it needs pytest).
"""

from __future__ import annotations

from a2a_handoff.stores.base import (
    Capabilities,
    Closing,
    Commit,
    FileStore,
    IdentityStore,
    LedgerStore,
    LegacyKeys,
    OutboxEntry,
    PooledStore,
    PushStore,
    ReceivedEntry,
    RetentionStore,
    SchemaStore,
    Store,
    TaskEvent,
    TaskPage,
    TaskQuery,
    TaskRecord,
    TaskStore,
)
from a2a_handoff.stores.leasing import LeaseStore
from a2a_handoff.stores.memory import MemoryTaskStore
from a2a_handoff.stores.schemes import (
    StoreFactory,
    open_store,
    register_scheme,
    registered_schemes,
)
from a2a_handoff.stores.sqlite import SqliteTaskStore
from a2a_handoff.stores.versions import Migration, SchemaStatus, check_usable

__all__ = [
    "Capabilities",
    "Closing",
    "Commit",
    "FileStore",
    "IdentityStore",
    "LeaseStore",
    "LedgerStore",
    "LegacyKeys",
    "MemoryTaskStore",
    "Migration",
    "OutboxEntry",
    "PooledStore",
    "PushStore",
    "ReceivedEntry",
    "RetentionStore",
    "SchemaStatus",
    "SchemaStore",
    "SqliteTaskStore",
    "Store",
    "StoreFactory",
    "TaskEvent",
    "TaskPage",
    "TaskQuery",
    "TaskRecord",
    "TaskStore",
    "check_usable",
    "open_store",
    "register_scheme",
    "registered_schemes",
]
