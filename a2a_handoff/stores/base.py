"""Store interfaces: small async protocols, one per concern, with backends beside them.

A task is stored as a `TaskRecord` (the task snapshot plus its owner and version) and an
append-only event log. Every write is one atomic step: the new snapshot and the events it
produced go together, and the version is the sequence number of the task's last event, so
`version` doubles as the check-and-set token and as the `Last-Event-ID` of streams.
Leases (`LeaseStore`, `LocalLeases`) live in `stores.leasing`.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from a2a_handoff.protocol.models import StreamResponse, Task
from a2a_handoff.protocol.states import TaskState
from a2a_handoff.stores.leasing import LeaseStore as LeaseStore
from a2a_handoff.stores.leasing import LocalLeases as LocalLeases
from a2a_handoff.trust.keys import IdentityStore


@dataclass(frozen=True, slots=True)
class TaskRecord:
    """A task as stored: the internal snapshot (TRANSFERRED allowed), its owner and version."""

    task: Task
    owner: str
    version: int
    created_at: str
    updated_at: str
    delegate: str = ""  # a principal the owner acts for (a handoff's user); sees the task too
    json: str = field(default="", compare=False)  # the task's JSON, when already serialized

    @property
    def id(self) -> str:
        return self.task.id

    def visible_to(self, principal: str) -> bool:
        return principal == self.owner or (bool(self.delegate) and principal == self.delegate)

    def advanced(self, task: Task, events: int, now: str, json: str = "") -> TaskRecord:
        """The record after a step of `events` events that left the task as `task`."""
        version = self.version + events
        return TaskRecord(task, self.owner, version, self.created_at, now, self.delegate, json)

    def task_json(self) -> str:
        return self.json or self.task.dump_json()

    @property
    def state(self) -> TaskState:
        return self.task.status.state


@dataclass(frozen=True, slots=True)
class TaskEvent:
    """One entry of a task's event log; `seq` is 1, 2, 3, … per task."""

    seq: int
    item: StreamResponse

    @property
    def final(self) -> bool:
        """True for the event that leaves the task in a terminal state."""
        update = self.item.status_update
        if update is not None:
            return update.status.state.terminal
        task = self.item.task
        return task is not None and task.status.state.terminal


PAGE_BYTES = 8 * 1024 * 1024
"""What a page of `list_tasks` holds at most, in stored task JSON (one task at least)."""


@dataclass(frozen=True, slots=True)
class TaskQuery:
    owner: str | None  # None: every owner's tasks (the library's own sweeps, never a caller)
    # A task matches `owner` as its owner or its delegate.
    context_id: str | None = None
    state: TaskState | None = None
    page_size: int = 50
    page_bytes: int = PAGE_BYTES  # a page stops before its tasks' JSON passes this (one task
    # at least): what one call reads and parses is bounded, whatever its tasks weigh
    page_token: str | None = None
    status_after: str | None = None  # only tasks whose status changed after this (a stamp
    # of `utc_now()`'s form); a status changes no later than its task's updated_at
    transfers_as_completed: bool = False  # the caller is shown TRANSFERRED as COMPLETED
    # (no handoff extension): `state` COMPLETED matches TRANSFERRED tasks too, and
    # TRANSFERRED matches none

    @property
    def states(self) -> frozenset[TaskState] | None:
        """The stored states `state` matches (None: any)."""
        if self.state is None:
            return None
        if not self.transfers_as_completed:
            return frozenset({self.state})
        if self.state is TaskState.TRANSFERRED:
            return frozenset()
        if self.state is TaskState.COMPLETED:
            return frozenset({TaskState.COMPLETED, TaskState.TRANSFERRED})
        return frozenset({self.state})


@dataclass(frozen=True, slots=True)
class TaskPage:
    records: list[TaskRecord] = field(default_factory=list)
    next_page_token: str = ""
    total_size: int = 0


@dataclass(frozen=True, slots=True)
class OutboxEntry:
    """A handoff this agent sends: `pending` until the target took it, then `done` or `failed`.

    The outbox doubles as the ledger of handoffs sent.
    """

    handoff_id: str
    task_id: str
    context_id: str
    owner: str
    target_name: str
    target_url: str
    envelope: str
    status: str
    detail: str
    created_at: str
    updated_at: str


@dataclass(frozen=True, slots=True)
class HandoffStats:
    """What /health reports of the outbox, each answered from an index or a kept value."""

    pending: int = 0
    stale: int = 0  # pending since before the `stale_before` asked about
    oldest_pending: str | None = None
    last_done: str | None = None


@dataclass(frozen=True, slots=True)
class ReceivedEntry:
    """One handoff message this agent received, and what it did with it."""

    handoff_id: str
    idempotency_key: str
    context_id: str
    source_agent: str
    source_task_id: str
    task_id: str
    outcome: str  # accepted | rejected | duplicate
    reason: str
    at: str


class TaskStore(Protocol):
    """Tasks and their event logs."""

    def claim(self, agent: str) -> None:
        """Serve the agent named `agent` (its card's name), before `open`. A shared store
        (PostgreSQL, Redis) takes its default schema or key prefix from the name, and `open`
        records the agent as the owner there or refuses one of another name
        (`stores._owner`); a store of one process's own (memory, SQLite) has nothing to do."""
        ...

    async def open(self) -> TaskStore:
        """Connect and create what is missing; idempotent. Returns the store."""
        ...

    async def create(
        self,
        record: TaskRecord,
        events: Sequence[StreamResponse],
        *,
        dedupe_key: str | None = None,
        outbox: OutboxEntry | None = None,
        dedupe_ttl: float | None = None,
        received: ReceivedEntry | None = None,
    ) -> TaskRecord:
        """Insert a task and its first events atomically.

        With a `dedupe_key` already taken, nothing is written and the task that key names is
        returned instead: compare ids to tell. Event seqs are 1…len(events); `record.version`
        must equal len(events). With `outbox`, that pending handoff entry is added in the
        same transaction: a task created and checkpointed at once. With `dedupe_ttl`, the key
        deduplicates for that many seconds only (a replay window); after it, `find` no longer
        names the task and the key may be taken by a new one. With `received`, that ledger
        row (the handoff that created the task) is added in the same transaction.
        """
        ...

    async def update(
        self, record: TaskRecord, events: Sequence[StreamResponse], *, expected_version: int
    ) -> None:
        """Replace the snapshot and append events, if the stored version is `expected_version`.

        Raises ConflictError otherwise. `record.version` must be
        `expected_version + len(events)`.
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


# -- helpers shared by backends -------------------------------------------------------------


def check_create(record: TaskRecord, events: Sequence[StreamResponse]) -> None:
    if record.version != len(events):
        raise ValueError("a created task's version must equal its number of events")


def check_update(
    record: TaskRecord, events: Sequence[StreamResponse], expected_version: int
) -> None:
    if record.version != expected_version + len(events):
        raise ValueError("an update's version must be expected_version + len(events)")


class HandoffStore(Protocol):
    """The outbox of handoffs sent and the ledger of handoffs received."""

    async def checkpoint(
        self,
        record: TaskRecord,
        events: Sequence[StreamResponse],
        *,
        expected_version: int,
        entry: OutboxEntry,
        close: tuple[str, str, str] | None = None,
    ) -> None:
        """In one transaction: update the task (check-and-set) and add a pending entry.

        `close` = (handoff id, status, detail) closes that pending entry in the same
        transaction (a handoff redirected by its contract's recovery path); ConflictError
        when it is no longer pending.
        """
        ...

    async def terminate(
        self,
        record: TaskRecord,
        events: Sequence[StreamResponse],
        *,
        expected_version: int,
        handoff_id: str,
        status: str,
        detail: str,
    ) -> None:
        """In one transaction: update the task (check-and-set) and close its pending entry.

        Raises ConflictError when the task moved or the entry is no longer pending.
        """
        ...

    async def outbox(
        self, *, status: str | None = None, context_id: str | None = None
    ) -> list[OutboxEntry]:
        """Entries sent, oldest first."""
        ...

    async def record_received(self, entry: ReceivedEntry) -> None: ...

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


@dataclass(frozen=True, slots=True)
class PushConfigRecord:
    """A task's push-notification config, and how far its deliveries went.

    The task's event log is the push outbox: every event commits with the state it reports,
    and `cursor` is the seq of the last event this config is done with (delivered, given up
    or not wanted), so what is still to deliver survives any crash.
    """

    task_id: str
    config_id: str
    config: str  # the TaskPushNotificationConfig's JSON, as accepted (url, token, auth)
    cursor: int = 0
    failing_since: str = ""  # when the delivery at `cursor + 1` first failed ("": it did not)
    history: str = "[]"  # JSON list of the last deliveries (see `push._history`)
    done: bool = False  # the task ended and every event of it was dealt with
    created_at: str = ""
    updated_at: str = ""


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

    async def active_push_count(self, owner: str) -> int:
        """How many configs not `done` the tasks `owner` owns have (a caller's push cap)."""
        ...


class Store(TaskStore, HandoffStore, PushStore, LeaseStore, IdentityStore, Protocol):
    """What an agent's server needs: tasks, events, outbox, ledger, push configs, leases and
    the agent's identity (its signing keys) in one backend."""
