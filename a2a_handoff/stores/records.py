"""What a store keeps, as values: a task's record and events, a page of them, outbox and ledger
entries, push configs; and what one step writes (`Commit`), which checks itself.

A task is stored as a `TaskRecord` (the task snapshot plus its owner and version) and an
append-only event log. Every write is one atomic step, a `Commit`: the new snapshot, the
events it produced and the outbox and ledger rows of the step go together, and the version
is the sequence number of the task's last event, so `version` doubles as the check-and-set
token and as the `Last-Event-ID` of streams. The owner is the caller's principal within its
tenant (`tenant_owner`): whatever a store keys or filters by owner is kept per tenant. The
interfaces that keep them are `stores.base`'s.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import KW_ONLY, dataclass, field
from typing import Any

from a2a_handoff.errors import StoreError
from a2a_handoff.protocol.models import StreamResponse, Task
from a2a_handoff.protocol.states import TaskState


def slot_setters(cls: type, names: str) -> list[Callable[[Any, Any], None]]:
    """The `__set__` of each of `cls`'s slots `names` (space-separated): a hand-written
    `__init__` of a frozen dataclass sets its fields through them."""
    return [cls.__dict__[name].__set__ for name in names.split()]


@dataclass(frozen=True, slots=True, init=False)
class TaskRecord:
    """A task as stored: the internal snapshot (TRANSFERRED allowed), its owner and version.
    (Its `__init__` is written out, as `Commit`'s is.)"""

    task: Task
    owner: str
    version: int
    created_at: str
    updated_at: str
    delegate: str = ""  # a principal the owner acts for (a handoff's user); sees the task too
    json: str = field(default="", compare=False)  # the task's JSON, when already serialized

    def __init__(
        self,
        task: Task,
        owner: str,
        version: int,
        created_at: str,
        updated_at: str,
        delegate: str = "",
        json: str = "",
    ) -> None:
        _set_task(self, task)
        _set_owner(self, owner)
        _set_version(self, version)
        _set_created_at(self, created_at)
        _set_updated_at(self, updated_at)
        _set_delegate(self, delegate)
        _set_json(self, json)

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


(
    _set_task,
    _set_owner,
    _set_version,
    _set_created_at,
    _set_updated_at,
    _set_delegate,
    _set_json,
) = slot_setters(TaskRecord, "task owner version created_at updated_at delegate json")


def tenant_owner(tenant: str, principal: str) -> str:
    """The owner a task of `principal` in `tenant` is stored under: the principal itself in
    the default tenant (so tasks stored before tenants stay their callers', in it), else
    `\\x1f<tenant>\\x1f<principal>`. Injective: a tenant holds no control character, and a
    default-tenant principal that starts with the separator takes the second form too
    (`\\x1f\\x1f…`, a tenant of none), so no two (tenant, principal) share an owner; and
    every store read, list, dedupe key and push cap keyed by owner is kept per tenant. A
    tenant is `server._call.tenant_of`'s: a name checked at the edge."""
    if not tenant and not principal.startswith(TENANT_SEPARATOR):
        return principal
    return f"{TENANT_SEPARATOR}{tenant}{TENANT_SEPARATOR}{principal}"


TENANT_SEPARATOR = "\x1f"


def owner_principal(owner: str) -> str:
    """The principal of `owner` (`tenant_owner`'s inverse, without its tenant)."""
    if not owner.startswith(TENANT_SEPARATOR):
        return owner
    return owner.split(TENANT_SEPARATOR, 2)[2]


def owner_tenant(owner: str) -> str:
    """The tenant of `owner` (`tenant_owner`'s inverse, without its principal)."""
    if not owner.startswith(TENANT_SEPARATOR):
        return ""
    return owner.split(TENANT_SEPARATOR, 2)[1]


def tenant_key(tenant: str, key: str) -> str:
    """A key kept per tenant (a received handoff's dedupe key, say): `key` itself in the
    default tenant (as stored before tenants), else prefixed as `tenant_owner` prefixes a
    principal — so the same key in two tenants is two keys."""
    return key if not tenant else f"{TENANT_SEPARATOR}{tenant}{TENANT_SEPARATOR}{key}"


def tenant_filter(tenant: str) -> tuple[str, list[str]]:
    """How a SQL store keeps an owner column within `tenant` (`TaskQuery.tenant`): a
    condition over `owner` with `?` for each of its values. A named tenant's owners start
    with `\\x1f<tenant>\\x1f`; the default tenant's are those without the separator first,
    and the "tenant of none" form (`\\x1f\\x1f…`). Prefixes are compared, never LIKEd (a
    tenant may hold `_`)."""
    sep = TENANT_SEPARATOR
    if tenant:
        prefix = f"{sep}{tenant}{sep}"
        return f"substr(owner, 1, {len(prefix)}) = ?", [prefix]
    return "(substr(owner, 1, 1) <> ? OR substr(owner, 1, 2) = ?)", [sep, sep + sep]


@dataclass(frozen=True, slots=True, init=False)
class TaskEvent:
    """One entry of a task's event log; `seq` is 1, 2, 3, … per task. (Its `__init__` is
    written out, as `Commit`'s is.)"""

    seq: int
    item: StreamResponse

    def __init__(self, seq: int, item: StreamResponse) -> None:
        _set_seq(self, seq)
        _set_item(self, item)

    @property
    def final(self) -> bool:
        """True for the event that leaves the task in a terminal state."""
        update = self.item.status_update
        if update is not None:
            return update.status.state.terminal
        task = self.item.task
        return task is not None and task.status.state.terminal


_set_seq, _set_item = slot_setters(TaskEvent, "seq item")


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
    tenant: str | None = None  # only tasks whose owner is in this tenant ("": the default
    # one; None: every tenant) — an operator's listing, kept to the tenant it calls in
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


# -- a step's writes, as one value ---------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Closing:
    """A pending outbox entry a commit closes: the handoff, the status it ends in (`done`,
    `failed`), and why."""

    handoff_id: str
    status: str
    detail: str = ""


@dataclass(frozen=True, slots=True, init=False)
class Commit:
    """Everything one step writes, committed by the store in one call (`TaskStore.commit`):
    all of it, or — on any refusal — none of it.

    `record` is the task as the step leaves it and `events` what the step emitted. With
    `expected_version` None the commit creates the task (its events are 1…n, so
    `record.version` is their number), under `dedupe_key` when given — for `dedupe_ttl`
    seconds only when given (a replay window) — and with the ledger row of the handoff that
    created it (`received`). With `expected_version` it moves a stored task by check-and-set
    (`record.version` is `expected_version` plus the number of events). Either may add a
    pending `outbox` entry (a handoff or delegation checkpointed with the step); a move may
    also close one (`close`: a handoff that ended, or one redirected by a new entry).

    The combinations are checked as the value is made, so no backend sees a commit that
    cannot be written as one transaction: ValueError names what is wrong. (Its `__init__`
    is written out: a frozen dataclass's generated one sets each field through
    `object.__setattr__`, which a step pays for at every commit; bench/README.md.)
    """

    record: TaskRecord
    events: Sequence[StreamResponse]
    _: KW_ONLY
    expected_version: int | None = None
    dedupe_key: str | None = None
    dedupe_ttl: float | None = None
    outbox: OutboxEntry | None = None
    close: Closing | None = None
    received: ReceivedEntry | None = None

    def __init__(
        self,
        record: TaskRecord,
        events: Sequence[StreamResponse],
        *,
        expected_version: int | None = None,
        dedupe_key: str | None = None,
        dedupe_ttl: float | None = None,
        outbox: OutboxEntry | None = None,
        close: Closing | None = None,
        received: ReceivedEntry | None = None,
    ) -> None:
        if expected_version is None:
            if record.version != len(events):
                raise ValueError("a created task's version must equal its number of events")
            if close is not None:
                raise ValueError("a new task has no pending entry to close")
        else:
            if record.version != expected_version + len(events):
                raise ValueError("an update's version must be expected_version + len(events)")
            if dedupe_key is not None:
                raise ValueError("a dedupe key is taken by a new task only")
            if received is not None:
                raise ValueError("a received handoff's ledger row goes with the task it creates")
        if dedupe_ttl is not None:
            if dedupe_key is None:
                raise ValueError("a dedupe TTL needs a dedupe key")
            if not dedupe_ttl > 0:
                raise ValueError("a dedupe TTL must be a positive number of seconds")
        if outbox is not None:
            if outbox.task_id != record.id:
                raise ValueError("an outbox entry added by a commit must be its task's")
            if close is not None and close.handoff_id == outbox.handoff_id:
                raise ValueError("a commit cannot close the entry it adds")
        if received is not None and received.task_id != record.id:
            raise ValueError("a received handoff's ledger row must name the task it creates")
        _set_record(self, record)
        _set_events(self, events)
        _set_expected_version(self, expected_version)
        _set_dedupe_key(self, dedupe_key)
        _set_dedupe_ttl(self, dedupe_ttl)
        _set_outbox(self, outbox)
        _set_close(self, close)
        _set_received(self, received)

    @property
    def creates(self) -> bool:
        """Whether the commit creates its task (else it moves a stored one)."""
        return self.expected_version is None

    @property
    def ledger_parts(self) -> list[str]:
        """The parts of the commit only a store with a ledger can write, by name."""
        parts = (("outbox", self.outbox), ("close", self.close), ("received", self.received))
        return [name for name, part in parts if part is not None]

    @property
    def first_seq(self) -> int:
        """The seq of the commit's first event."""
        return (self.expected_version or 0) + 1


(
    _set_record,
    _set_events,
    _set_expected_version,
    _set_dedupe_key,
    _set_dedupe_ttl,
    _set_outbox,
    _set_close,
    _set_received,
) = slot_setters(
    Commit, "record events expected_version dedupe_key dedupe_ttl outbox close received"
)


def check_ledger(unit: Commit, ledger: object | None) -> None:
    """StoreError when `unit` writes the outbox or the ledger of a store that declares none
    (`ledger`: the store's `capabilities.ledger`); nothing is written then."""
    if ledger is None and (parts := unit.ledger_parts):
        raise StoreError(
            f"this store declares no ledger (capabilities.ledger): a commit with"
            f" {' and '.join(parts)} cannot be written to it"
        )
