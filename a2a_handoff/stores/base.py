"""The store contract: a small core every backend implements, and named capabilities a
backend declares when it has them.

The core (`TaskStore`) keeps tasks and their event logs (as the values of `stores.records`),
and writes each step of a task as one value, a `Commit` (task, events, idempotency key,
outbox and ledger rows), in one transaction: `commit` is the only write of a step.
Beyond it a store declares, in `capabilities`, what else it offers: each part is the object
that does it (the store itself, mostly) or None. Code that needs a part asks for it there,
typed, never by probing the store's attributes or its class:

    pool = store.capabilities.pool  # PooledStore | None
    if pool is not None:
        report["storePool"] = pool.pool_use()

| capability    | protocol        | what it is                                                  |
| ------------- | --------------- | ----------------------------------------------------------- |
| `ledger`      | `LedgerStore`   | the outbox of handoffs sent, the ledger of those received   |
| `push`        | `PushStore`     | push-notification configs and their delivery progress      |
| `leases`      | `LeaseStore`    | named, expiring claims replicas race for (`stores.leasing`) |
| `identity`    | `IdentityStore` | the agent's signing keys; never a shared store's            |
| `pool`        | `PooledStore`   | a connection pool's use, for /health                        |
| `file`        | `FileStore`     | a local file, one process's own unless opened shared        |
| `legacy_keys` | `LegacyKeys`    | keys an older version left in a shared store                |
| `schema`      | `SchemaStore`   | its schema's version and migrations (`stores.versions`)     |
| `retention`   | `RetentionStore`| finished tasks purged once old enough                       |

`Store` is what an agent's server takes today: the core with the ledger, push configs and
leases (each declared too). The behaviour every backend must show is a test kit's,
`stores.conformance`: a backend's tests run it by giving it one `store` fixture.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from a2a_handoff.stores.leasing import LeaseStore as LeaseStore
from a2a_handoff.stores.leasing import LocalLeases as LocalLeases
from a2a_handoff.stores.records import PAGE_BYTES as PAGE_BYTES
from a2a_handoff.stores.records import Closing as Closing
from a2a_handoff.stores.records import Commit as Commit
from a2a_handoff.stores.records import HandoffStats as HandoffStats
from a2a_handoff.stores.records import OutboxEntry as OutboxEntry
from a2a_handoff.stores.records import PushConfigRecord as PushConfigRecord
from a2a_handoff.stores.records import ReceivedEntry as ReceivedEntry
from a2a_handoff.stores.records import TaskEvent as TaskEvent
from a2a_handoff.stores.records import TaskPage as TaskPage
from a2a_handoff.stores.records import TaskQuery as TaskQuery
from a2a_handoff.stores.records import TaskRecord as TaskRecord
from a2a_handoff.stores.records import check_ledger as check_ledger
from a2a_handoff.stores.versions import SchemaStatus as SchemaStatus
from a2a_handoff.trust.keys import IdentityStore as IdentityStore


class TaskStore(Protocol):
    """The core: tasks and their event logs, and what else the store offers."""

    @property
    def capabilities(self) -> Capabilities:
        """The parts beyond the core this store has (see the module docstring)."""
        ...

    def claim(self, agent: str) -> None:
        """Serve the agent named `agent` (its card's name), before `open`. A shared store
        (PostgreSQL, Redis) takes its default schema or key prefix from the name, and `open`
        records the agent as the owner there or refuses one of another name
        (`stores._owner`); a store of one process's own (memory, SQLite) has nothing to do."""
        ...

    async def open(self) -> TaskStore:
        """Connect and create what is missing; idempotent. Returns the store."""
        ...

    async def commit(self, unit: Commit) -> TaskRecord:
        """Write one step — `unit`'s task record, its events, and the idempotency key, outbox
        entry, closed entry and ledger row it carries — in ONE transaction; the record as
        stored.

        A new task (`unit.creates`) whose dedupe key is taken (and not expired) is not
        written, nor is anything else of the commit: the task that key names is returned
        instead, so compare ids to tell. ConflictError, nothing written, when the task to
        move is not at `expected_version` (or a new one's id exists), the entry to add
        exists already or the entry to close is no longer pending. StoreError, nothing
        written, for an outbox, close or received part on a store whose `capabilities`
        declare no ledger (`records.check_ledger`). Event seqs continue the task's log:
        `unit.first_seq`, … . A caller is answered only once the commit is durable.
        """
        ...

    async def get(self, task_id: str) -> TaskRecord | None:
        """The stored task, or None."""
        ...

    async def find(self, dedupe_key: str) -> str | None:
        """The id of the task created under `dedupe_key`, or None."""
        ...

    async def list_tasks(self, query: TaskQuery) -> TaskPage:
        """Tasks of one owner, most recently updated first, filtered and paged."""
        ...

    async def events(self, task_id: str, after: int = 0) -> list[TaskEvent]:
        """The committed events with seq > `after`, in order."""
        ...

    def follow(self, task_id: str, after: int = 0) -> AsyncGenerator[TaskEvent, None]:
        """The task's events with seq > `after`: the backlog, then live ones as they commit.

        Ends after the event that makes the task terminal (at once if it already is).
        Events are yielded only once committed, in seq order, without gaps or repeats.
        """
        ...

    async def ping(self) -> bool:
        """Whether the store answers."""
        ...

    async def problem(self) -> str | None:
        """None while the store answers and takes writes; else what is wrong, in a few words
        (`unreachable: …`, `failing writes: …`)."""
        ...

    async def aclose(self) -> None:
        """Release connections; idempotent."""
        ...


class LedgerStore(Protocol):
    """The outbox of handoffs sent and the ledger of handoffs received, read; written by a
    step's `TaskStore.commit` (an entry added or closed, a handoff received, with the task),
    or, for a handoff refused or replayed (no task written), by `record_received`."""

    async def outbox(
        self, *, status: str | None = None, context_id: str | None = None
    ) -> list[OutboxEntry]:
        """Entries sent, oldest first."""
        ...

    async def record_received(self, entry: ReceivedEntry) -> None:
        """Add a ledger row alone: a handoff refused or replayed, which writes no task."""
        ...

    async def received(self, context_id: str | None = None) -> list[ReceivedEntry]:
        """Handoffs received, oldest first."""
        ...

    async def sent_page(
        self, *, owner: str | None, context_id: str | None, after: str, limit: int
    ) -> tuple[list[OutboxEntry], str]:
        """Up to `limit` entries sent, oldest first, after the cursor `after` ("": from the
        start), of `owner` (None: anyone's) and `context_id`; with the cursor after the last
        one ("" when there is no more). Reads O(log n + limit) rows."""
        ...

    async def received_page(
        self, *, context_id: str | None, after: str, limit: int
    ) -> tuple[list[ReceivedEntry], str]:
        """Up to `limit` handoffs received, oldest first, after the cursor `after`; with the
        next cursor ("" when there is no more)."""
        ...

    async def handoff_stats(self, stale_before: str) -> HandoffStats:
        """Pending entries (how many, how many created before `stale_before`, the oldest)
        and the last one completed: from indexes or kept values, never a scan."""
        ...


class PushStore(Protocol):
    """Push-notification configs, per task, and their delivery progress."""

    async def put_push_config(self, record: PushConfigRecord) -> PushConfigRecord:
        """Add `record`, or replace the config of the one with its ids (keeping its
        progress); the stored record."""
        ...

    async def push_configs(
        self, task_id: str, config_id: str | None = None
    ) -> list[PushConfigRecord]:
        """The task's configs (only `config_id`'s, when given), oldest first."""
        ...

    async def delete_push_config(self, task_id: str, config_id: str) -> None:
        """Remove the config (nothing when it is not there)."""
        ...

    async def save_push_progress(self, record: PushConfigRecord) -> bool:
        """Store `record`'s cursor, failing_since, history and done; False (nothing
        written) when the config was deleted meanwhile."""
        ...

    async def active_push_configs(self) -> list[PushConfigRecord]:
        """Every config not `done`, from an index: what deliveries are left to make."""
        ...

    async def active_push_count(self, principal: str) -> int:
        """How many configs not `done` the tasks `principal` owns have, in every tenant (a
        caller's push cap: an owner is a principal within a tenant, `records.tenant_owner`)."""
        ...


class PooledStore(Protocol):
    """A store on a pool of connections, which /health reports."""

    def pool_use(self) -> dict[str, int]:
        """Connections open, in use, and the bound: `{"open", "inUse", "max"}`."""
        ...


class FileStore(Protocol):
    """A store in a local file, one process's own unless opened for sharing."""

    @property
    def path(self) -> Path:
        """The file."""
        ...

    def check_free(self) -> None:
        """StoreError naming the process that serves the file, if one does: what `open`
        would refuse, said before a server starts."""
        ...


class LegacyKeys(Protocol):
    """Private keys an older version kept in a shared store, until moved into a key file."""

    async def legacy_identity(self, agent: str) -> str | None:
        """The identity document kept for `agent`, if any."""
        ...

    async def drop_legacy_identity(self, agent: str, document: str) -> bool:
        """Delete it if it is still `document` (once moved); whether it was deleted."""
        ...

    async def refuse_legacy_identity(self, agent: str) -> None:
        """TrustError while the store still holds `agent`'s keys: the agent does not start
        until they are moved out."""
        ...


class SchemaStore(Protocol):
    """A store whose schema (or key layout) is versioned: where it stands, and the migrations
    that bring it to this code's version (`stores.versions`). Both work on a store not
    opened (they connect on their own), and `upgrade` on one an agent serves (a shared
    store: under a lock, once)."""

    @property
    def store_url(self) -> str:
        """The store's URL naming its schema or key prefix: what `db upgrade --store` takes."""
        ...

    async def schema_status(self) -> SchemaStatus:
        """The store's version, the code's, and the migrations pending."""
        ...

    async def upgrade(self) -> SchemaStatus:
        """Run the pending migrations (each in one transaction, in order); the status after.
        Nothing to do for a store up to date. StoreVersionError for one ahead of this code."""
        ...


class RetentionStore(Protocol):
    """Finished tasks deleted once old enough, with everything kept for them."""

    async def purge_finished(self, before: str, limit: int) -> int:
        """Delete up to `limit` tasks in a terminal state (TRANSFERRED included) last updated
        before `before` (a stamp of `utc_now()`'s form), each with its events, push configs
        and their progress, its outbox entries and its ledger rows; then, up to `limit` in
        all, the ledger rows of handoffs that made no task (refused) received before
        `before`. How many tasks and such rows.

        Never a task whose idempotency key has not expired yet (a retry inside the window
        must still find the task it made), nor one with a handoff still pending or a push
        config with deliveries still to make. One
        transaction per call: a caller purging much calls again, between other work."""
        ...


@dataclass(frozen=True, slots=True)
class Capabilities:
    """What a store offers beyond the core: each part as the object that does it, or None.

    A backend declares its own (`capabilities` of `TaskStore`); type checkers hold each
    part to its protocol, and the conformance kit tests each declared part.
    """

    ledger: LedgerStore | None = None
    push: PushStore | None = None
    leases: LeaseStore | None = None
    identity: IdentityStore | None = None
    pool: PooledStore | None = None
    file: FileStore | None = None
    legacy_keys: LegacyKeys | None = None
    schema: SchemaStore | None = None
    retention: RetentionStore | None = None


class Store(TaskStore, LedgerStore, PushStore, LeaseStore, Protocol):
    """What an agent's server takes: the core, the outbox and ledger, push configs and
    leases in one backend (declared in its `capabilities` too)."""
