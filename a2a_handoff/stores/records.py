"""What a store keeps, as values: a task's record and events, a page of them, outbox and ledger
entries, push configs; and the checks every backend makes of a write.

A task is stored as a `TaskRecord` (the task snapshot plus its owner and version) and an
append-only event log. Every write is one atomic step: the new snapshot and the events it
produced go together, and the version is the sequence number of the task's last event, so
`version` doubles as the check-and-set token and as the `Last-Event-ID` of streams. The
interfaces that keep them are `stores.base`'s.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from a2a_handoff.protocol.models import StreamResponse, Task
from a2a_handoff.protocol.states import TaskState


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


# -- checks every backend makes of a write --------------------------------------------------


def check_create(record: TaskRecord, events: Sequence[StreamResponse]) -> None:
    if record.version != len(events):
        raise ValueError("a created task's version must equal its number of events")


def check_update(
    record: TaskRecord, events: Sequence[StreamResponse], expected_version: int
) -> None:
    if record.version != expected_version + len(events):
        raise ValueError("an update's version must be expected_version + len(events)")
