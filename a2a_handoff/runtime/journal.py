"""A task's journal: the events its handler emitted and not yet written, and their writes.

Invariants:
- what a handler emits before it next yields is one store write, one `Commit` (the events of
  one step go in one transaction); the first write creates the task — with its dedupe key,
  and with the ledger row of the handoff that created it, in the same commit;
- callers are answered only from committed records (`created`, `settled`), so what a client
  saw is never lost by a crash;
- a write that loses a check-and-set ends the run with the state another process gave the
  task, or with an error: never with a silently dropped event. A follow-up's first write is
  its acceptance: when another message got in first, the run ends "task is busy" and its
  message is not stored;
- once a task is acknowledged, a write the store cannot take (it is unreachable) is retried
  for `STORE_RETRY_SECONDS`, so an outage shorter than that only delays the task; a write
  that may have landed before its answer was lost is recognised, never applied twice. A run
  that still cannot write is stranded: the task manager fails its task once the store is back.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Protocol

from a2a_handoff.errors import (
    ConflictError,
    DrainingError,
    InternalError,
    RpcError,
    StoreError,
    StoreUnavailableError,
    TaskBusyError,
)
from a2a_handoff.failpoints import failpoint, pausepoint
from a2a_handoff.handoff.receiver import shared_owner
from a2a_handoff.handoff.verified import VerifiedEnvelope
from a2a_handoff.observe import events
from a2a_handoff.protocol.models import Message, StreamResponse, Task, utc_now
from a2a_handoff.protocol.states import TaskState
from a2a_handoff.protocol.steps import status_event, with_status
from a2a_handoff.runtime.outage import retried
from a2a_handoff.runtime.submission import Replied, Submission
from a2a_handoff.stores.base import Commit, ReceivedEntry, Store, TaskRecord

log = logging.getLogger("a2a_handoff.runtime")


class JournalHost(Protocol):
    """What a journal needs from the run that owns it."""

    @property
    def store(self) -> Store: ...

    def created(self) -> None:
        """The task is stored: from now on the store answers for its dedupe key."""

    def forget(self) -> None:
        """The run is over (settled, replied or aborted)."""

    def free_task(self, task_id: str) -> None:
        """Release the task's runner lease (replicas)."""

    def strand(self, task_id: str) -> None:
        """The run stopped because the store failed: fail the task once it takes writes."""

    def stopped(self) -> None:
        """The journal was aborted: stop the handler, its work can no longer be stored."""


class Journal:
    """One step of one task: the events not yet written, and the futures callers wait on.

    Owned by the task's run (`runtime.run.TaskRun`), which decides what may be emitted; the
    journal only writes it, and tells the run when its work can no longer be stored."""

    def __init__(
        self,
        host: JournalHost,
        task: Task,
        owner: str,
        *,
        committed: TaskRecord | None,
        dedupe_key: str | None,
        first: StreamResponse,
        envelope: VerifiedEnvelope | None = None,
        dedupe_ttl: float | None = None,
        received: ReceivedEntry | None = None,
        keep_first: bool = False,
    ) -> None:
        loop = asyncio.get_running_loop()
        self.host = host
        self.envelope = envelope
        # A proven envelope's `onBehalfOf`: the principal its trusted sender acted for (not
        # a delegation's: its sub-task is the delegating agent's alone), within the tenant
        # the task is received in.
        self.delegate = shared_owner(envelope, owner) if envelope else ""
        self.task = task
        self.owner = owner
        self.committed = committed
        self.dedupe_key = dedupe_key
        self.pending: list[StreamResponse] = [first]
        self.created: asyncio.Future[TaskRecord] = loop.create_future()
        self.settled: asyncio.Future[TaskRecord] = loop.create_future()
        # For a run whose handler may still reply directly, a stream opens only once it
        # emitted or ended: a future of its own (`hold`); else at `created`.
        self.opened: asyncio.Future[TaskRecord] = self.created
        self.start: tuple[Task, int] | None = None
        # The first events written, kept for a stream's start (`keep_first`)
        self.first_written: list[StreamResponse] | None = [] if keep_first else None
        if committed is not None:  # a resumed task: streams start from the resumed snapshot
            self.start = (task, committed.version + 1)
        self.dedupe_ttl = dedupe_ttl  # a contract's replay window for the key
        self.received = received  # the ledger row of the handoff creating the task
        self.flusher: asyncio.Task[None] | None = None  # the write under way, if any
        self._inline: asyncio.Future[None] | None = None  # the driver's own write (`write_now`)
        self.replied: Message | None = None  # a direct reply that settles the step
        # The write scheduled for when the handler yields (not a phase: `runtime.phases`).
        self._kick: asyncio.Handle | None = None

    @property
    def submission(self) -> Submission:
        head, after = self.start or (None, 0)  # a new task: its log starts with the Task
        first = self.first_written if self.start is None else None
        return Submission(
            self.task.id,
            self.created,
            self.settled,
            head,
            after,
            first=first,
            opened=self.opened,
        )

    def emit(self, task: Task, item: StreamResponse) -> None:
        """Record a step's event (the run checked it may), written once the handler yields."""
        self.task = task
        self.pending.append(item)
        self.kick()

    def kick(self) -> None:
        if self._kick is None:
            self._kick = asyncio.get_running_loop().call_soon(self._schedule_flush)

    def _schedule_flush(self) -> None:
        """Runs once the handler yields: everything it emitted until then is one write."""
        self._kick = None
        if not self.writing and self.pending:
            self.flusher = asyncio.create_task(self._flush())

    async def _flush(self) -> None:
        try:
            while self.pending:
                items, self.pending = self.pending, []
                task = self.task
                # Retried while the store is unreachable, once the task is acknowledged
                # (before, the caller is better told at once): `runtime.outage`.
                if not await retried(self, task, items):
                    return
        except ConflictError:
            if self.committed is not None and not self.created.done():
                # A follow-up's acceptance lost the check-and-set: another message got in.
                self.abort(
                    TaskBusyError(
                        f"task {self.task.id} is busy: another message to it was accepted"
                        " first; send this one again when the task asks for input"
                    )
                )
                return
            # Another replica moved the task (a cancel, say): end this run with its state.
            stored = await self.host.store.get(self.task.id)
            if stored is not None and stored.state.terminal:
                self.abort(None, answer=stored)
            else:
                log.error("task %s changed under its running handler", self.task.id)
                self.abort(InternalError("the task was changed by another process"))
        except StoreError as exc:
            log.warning("could not store task %s: %s", self.task.id, exc)
            self.host.strand(self.task.id)  # it may exist: failed once the store is back
            self.abort(StoreUnavailableError(f"the task could not be stored: {exc}"))
        except Exception as exc:
            log.exception("could not store task %s", self.task.id)
            self.abort(InternalError(f"the task store failed: {type(exc).__name__}"))

    async def write_once(self, task: Task, items: list[StreamResponse]) -> bool:
        """One write of `items`, the task left as `task` (the first creates it); False when
        another process created this message's task first (the run answered with that one)."""
        if self.committed is None:
            await pausepoint("task.before_create")
        elif not self.created.done():
            await pausepoint("task.before_accept")
        before = self.committed.state if self.committed is not None else None
        unit = self.commit_of(task, items)
        stored = await self.host.store.commit(unit)
        if unit.creates and not self._created(unit, stored):
            return False
        self.wrote(unit.record)
        events.committed_items(task.id, task.context_id, items, before)
        return True

    def commit_of(self, task: Task, items: list[StreamResponse]) -> Commit:
        """The step's writes as one value: the task left as `task` with its events `items` —
        created (with its dedupe key and window, and the ledger row of the handoff that made
        it) or moved from the record last committed (check-and-set on its version)."""
        now, json = utc_now(), task.dump_json()
        previous = self.committed
        if previous is not None:
            record = previous.advanced(task, len(items), now, json)
            return Commit(record, items, expected_version=previous.version)
        record = TaskRecord(task, self.owner, len(items), now, now, self.delegate, json)
        return Commit(
            record,
            items,
            dedupe_key=self.dedupe_key,
            dedupe_ttl=self.dedupe_ttl,
            received=self.received,
        )

    def wrote(self, record: TaskRecord) -> None:
        self.committed = record
        if not self.created.done():
            self.created.set_result(record)
            # Created: from now on the store answers for this key (a replay is a duplicate).
            self.host.created()
        state = record.state
        if (state.terminal or state.interrupted) and not self.pending:
            self.settle(record)

    def _created(self, unit: Commit, stored: TaskRecord) -> bool:
        """After the first write: whether it created the task; False (the run is then
        answered with that one) when another process created this message's task first."""
        if stored.id != unit.record.id:
            self.abort(None, answer=stored)
            return False
        if self.first_written is not None:
            self.first_written.extend(unit.events)
        if self.envelope is not None:
            failpoint("receive.after_create")
        return True

    async def write_now(self) -> None:
        """Write what is pending in the caller's own task — the run's driver, at its step's
        start and end — rather than in a task of its own (one fewer per write); a write
        under way is waited for instead (it takes what is pending). The driver is not
        cancelled while it writes (`TaskRun.cancel`): a write is never cut in the middle."""
        if self._kick is not None:
            self._kick.cancel()
            self._kick = None
        if self.writing:
            await self.drain()
            return
        if not self.pending or self.settled.done():
            return
        self._inline = asyncio.get_running_loop().create_future()
        try:
            await self._flush()
        finally:
            self._inline.set_result(None)
            self._inline = None

    async def drain(self) -> None:
        """Wait until everything emitted so far is committed."""
        while True:
            if self._inline is not None:
                await asyncio.shield(self._inline)
            elif self.flusher is not None and not self.flusher.done():
                await asyncio.shield(self.flusher)
            elif self.pending and not self.settled.done():  # not waiting for the kick
                self.flusher = asyncio.create_task(self._flush())
            else:
                return

    async def written(self) -> TaskRecord | None:
        """Drained: the record as committed (None: not written, or the step is over)."""
        await self.drain()
        if self.pending or self.committed is None or self.settled.done():
            return None
        return self.committed

    def reply_with(self, message: Message) -> None:
        """The step settles with a direct reply: its waiting caller takes `message`."""
        self.replied = message

    def adopt(self, record: TaskRecord) -> None:
        """Go on from `record`: a write of the task made beside the journal (a handoff's
        checkpoint, a delegation's record, a delivery that gave the task back)."""
        self.committed = record
        self.task = record.task

    @property
    def writing(self) -> bool:
        """Whether a write of this journal is under way."""
        return self._inline is not None or (self.flusher is not None and not self.flusher.done())

    def settle(self, record: TaskRecord) -> None:
        """The step is over: `record` answers the callers waiting for it."""
        self.host.forget()
        self.host.free_task(record.id)
        if self.replied is not None:  # the receipt settled: the caller takes the Message
            for future in (self.opened, self.settled):
                if not future.done():
                    future.set_exception(Replied(self.replied))
                    future.exception()  # retrieved here: a caller may not be waiting any more
            return
        self.open()
        if not self.settled.done():
            self.settled.set_result(record)

    def hold(self) -> None:
        """The handler may still reply with a direct Message: a stream waits to open."""
        self.opened = asyncio.get_running_loop().create_future()

    def open(self) -> None:
        """The handler waited, emitted, or ended without a direct reply: a stream may start."""
        if self.opened.done() or self.replied is not None or not self.created.done():
            return
        if not self.created.exception():
            self.opened.set_result(self.created.result())

    def abort(self, error: RpcError | None, answer: TaskRecord | None = None) -> None:
        """Stop the run: its work cannot be stored (error) or belongs to another task."""
        self.pending.clear()
        self.host.stopped()
        self.host.forget()
        self.host.free_task(self.task.id)
        for future in {self.created, self.opened, self.settled}:
            if future.done():
                continue
            if answer is not None:
                future.set_result(answer)
            else:
                future.set_exception(error or InternalError())
                future.exception()  # retrieved here: a caller may not be waiting any more

    def let_go(self) -> None:
        """Stop the run without ending its step (a drain hands the task to another replica,
        or to the next start): its waiting callers are answered with the task as last
        committed, still running; a task not stored yet with DrainingError (send it again)."""
        created = self.created.done() and self.created.exception() is None
        if not created:
            self.abort(DrainingError())
            return
        self.pending.clear()
        self.host.stopped()
        self.host.forget()
        self.open()
        if not self.settled.done() and self.committed is not None:
            self.settled.set_result(self.committed)


async def write_state(
    store: Store, record: TaskRecord, state: TaskState, message: Message | None = None
) -> TaskRecord:
    """Move a task that no handler is running, with check-and-set (ConflictError if moved)."""
    task = with_status(record.task, state, message)
    updated = record.advanced(task, 1, utc_now())
    await store.commit(Commit(updated, [status_event(task)], expected_version=record.version))
    events.transitions(task.id, task.context_id, [state])
    return updated
