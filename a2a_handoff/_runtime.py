"""The task engine: runs agent handlers and turns what they emit into durable task steps.

Invariants:
- every state change goes through `states.transition()`;
- a step's events are grouped and written in one store call; callers are answered only
  from committed records, so what a client saw is never lost by a crash;
- one task has at most one running handler in this process, and a message id creates at
  most one task (a repeat returns the task the first one created);
- a handler's exception fails the task with its message; it never crashes a request.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime

from pydantic import ValidationError

from a2a_handoff._handoffs import (
    HANDING_OFF,
    GateRefused,
    Handoffs,
    HandoffSettings,
    ext_metadata,
    receive_metadata,
    status_text,
)
from a2a_handoff.agent import (
    Agent,
    Completed,
    Failed,
    Handoff,
    InputRequired,
    Outcome,
    Rejected,
    TaskContext,
    agent_message,
)
from a2a_handoff.client import AgentClient
from a2a_handoff.envelope import HandoffEnvelope, parse_time
from a2a_handoff.errors import (
    ConflictError,
    HandoffProcessingError,
    IdempotencyConflictError,
    InternalError,
    InvalidParamsError,
    RpcError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from a2a_handoff.escalation import (
    Escalate,
    Escalation,
    EscalationPolicy,
    IncompleteEscalationError,
    Need,
    Trigger,
)
from a2a_handoff.extension import HANDOFF_EXTENSION_URI
from a2a_handoff.failpoints import failpoint
from a2a_handoff.ids import new_id
from a2a_handoff.models import (
    Artifact,
    Message,
    Role,
    StreamResponse,
    Task,
    TaskArtifactUpdateEvent,
    TaskStatus,
    TaskStatusUpdateEvent,
    utc_now,
)
from a2a_handoff.states import TaskState, transition
from a2a_handoff.stores.base import OutboxEntry, ReceivedEntry, Store, TaskQuery, TaskRecord

log = logging.getLogger("a2a_handoff.runtime")

RESTART_REASON = "interrupted: the agent restarted while this task was running"


def status_event(task: Task) -> StreamResponse:
    return StreamResponse(
        status_update=TaskStatusUpdateEvent(
            task_id=task.id, context_id=task.context_id, status=task.status
        )
    )


def with_status(task: Task, state: TaskState, message: Message | None = None) -> Task:
    """A copy of `task` in `state` (checked by the transition table), the message appended."""
    transition(task.status.state, state)
    history = task.history or []
    if message is not None:
        history = [*history, message]
    status = TaskStatus(state=state, message=message, timestamp=utc_now())
    return task.model_copy(update={"status": status, "history": history})


@dataclass(slots=True)
class Submission:
    """What a SendMessage started (or found, for a repeated message id).

    A stream of it starts with `head` (a Task snapshot, when set) and goes on with the
    task's events after seq `after`.
    """

    task_id: str
    created: asyncio.Future[TaskRecord]
    settled: asyncio.Future[TaskRecord]
    head: Task | None
    after: int
    duplicate: bool = False


def _resolved(record: TaskRecord, duplicate: bool = False) -> Submission:
    loop = asyncio.get_running_loop()
    created: asyncio.Future[TaskRecord] = loop.create_future()
    created.set_result(record)
    settled: asyncio.Future[TaskRecord] = loop.create_future()
    settled.set_result(record)
    return Submission(record.id, created, settled, record.task, record.version, duplicate)


class _Run:
    """One step of one task: its handler, and the events not yet written."""

    def __init__(
        self,
        manager: TaskManager,
        task: Task,
        owner: str,
        *,
        committed: TaskRecord | None,
        dedupe_key: str | None,
        first: StreamResponse,
        envelope: HandoffEnvelope | None = None,
    ) -> None:
        loop = asyncio.get_running_loop()
        self.envelope = envelope
        self.delegate = (envelope.on_behalf_of or "") if envelope else ""
        self.manager = manager
        self.task = task
        self.owner = owner
        self.committed = committed
        self.dedupe_key = dedupe_key
        self.pending: list[StreamResponse] = [first]
        self.created: asyncio.Future[TaskRecord] = loop.create_future()
        self.settled: asyncio.Future[TaskRecord] = loop.create_future()
        self.start: tuple[Task, int] | None = None
        if committed is not None:  # a resumed task: streams start from the resumed snapshot
            self.start = (task, committed.version + 1)
        self.cancel_requested = False
        self.dedupe_ttl: float | None = None  # a contract's replay window for the key
        self.received: ReceivedEntry | None = None  # the ledger row of the handoff creating it
        self.notices = 0
        self.handler_done = False
        self.handing_off = False
        self._flushing = False
        self._kicked = False
        self.driver: asyncio.Task[None] | None = None
        self.flusher: asyncio.Task[None] | None = None

    @property
    def submission(self) -> Submission:
        if self.start is None:  # a new task: its log starts with the Task itself
            return Submission(self.task.id, self.created, self.settled, None, 0)
        head, after = self.start
        return Submission(self.task.id, self.created, self.settled, head, after)

    # -- events ---------------------------------------------------------------------------

    def emit(self, task: Task, item: StreamResponse) -> None:
        self.task = task
        self.pending.append(item)
        if not self._kicked:
            self._kicked = True
            asyncio.get_running_loop().call_soon(self._schedule_flush)

    def _schedule_flush(self) -> None:
        """Runs once the handler yields: everything it emitted until then is one write."""
        self._kicked = False
        if not self._flushing and self.pending:
            self._flushing = True
            self.flusher = asyncio.create_task(self._flush())

    async def _flush(self) -> None:
        try:
            while self.pending:
                items, self.pending = self.pending, []
                task = self.task
                if not await self._write(task, items):
                    return
        except ConflictError:
            # Another replica moved the task (a cancel, say): end this run with its state.
            stored = await self.manager.store.get(self.task.id)
            if stored is not None and stored.state.terminal:
                self._abort(None, answer=stored)
            else:
                log.error("task %s changed under its running handler", self.task.id)
                self._abort(InternalError("the task was changed by another process"))
        except Exception as exc:
            log.exception("could not store task %s", self.task.id)
            self._abort(InternalError(f"the task store failed: {type(exc).__name__}"))
        finally:
            self._flushing = False

    async def _write(self, task: Task, items: list[StreamResponse]) -> bool:
        store = self.manager.store
        now = utc_now()
        if self.committed is None:
            record = TaskRecord(
                task, self.owner, len(items), now, now, self.delegate, task.dump_json()
            )
            stored = await store.create(
                record,
                items,
                dedupe_key=self.dedupe_key,
                dedupe_ttl=self.dedupe_ttl,
                received=self.received,
            )
            if stored.id != record.id:
                # Another process created this message's task first: answer with that one.
                self._abort(None, answer=stored)
                return False
            if self.envelope is not None:
                failpoint("receive.after_create")
        else:
            previous = self.committed
            record = previous.advanced(task, len(items), now, task.dump_json())
            await store.update(record, items, expected_version=previous.version)
        self.committed = record
        if not self.created.done():
            self.created.set_result(record)
            # Created: from now on the store answers for this key (a replay is a duplicate).
            self.manager._created(self)
        state = record.state
        if (state.terminal or state.interrupted) and not self.pending:
            self._settle(record)
        return True

    def _settle(self, record: TaskRecord) -> None:
        self.manager._forget(self)
        self.manager.leases.free_task(record.id)
        if not self.settled.done():
            self.settled.set_result(record)

    def _abort(self, error: RpcError | None, answer: TaskRecord | None = None) -> None:
        """Stop the run: its work cannot be stored (error) or belongs to another task."""
        self.pending.clear()
        if self.driver is not None and not self.driver.done():
            self.driver.cancel()
        self.manager._forget(self)
        for future in (self.created, self.settled):
            if future.done():
                continue
            if answer is not None:
                future.set_result(answer)
            else:
                future.set_exception(error or InternalError())
                future.exception()  # retrieved here: a caller may not be waiting any more

    # -- the handler ----------------------------------------------------------------------

    def run(self, message: Message) -> None:
        self.driver = asyncio.create_task(self._drive(message), name=f"task-{self.task.id}")
        if not self._kicked:  # a follow-up starts with an event already pending
            self._kicked = True
            asyncio.get_running_loop().call_soon(self._schedule_flush)

    async def _drive(self, message: Message) -> None:
        try:
            if self.manager.store.shared:
                # Replicas share the store: claim the task for this replica, and run the
                # handler only once the task is committed — a concurrent duplicate created
                # on another replica must never run a second handler.
                await self.manager.leases.claim_task(self.task.id)
                if self.committed is None:
                    await asyncio.shield(self.created)
            if self.task.status.state is not TaskState.WORKING:
                self.emit_state(TaskState.WORKING)
            ctx = TaskContext(
                message=message,
                task=self.task,
                _emit_status=self._on_status,
                _emit_artifact=self._on_artifact,
                envelope=self.envelope,
                policy=self.manager.policy,
                _inform=self._inform,
            )
            try:
                outcome = await self.manager.agent.handle(ctx)
            except Exception as exc:
                log.warning("handler of task %s raised %s", self.task.id, type(exc).__name__)
                outcome = Failed(str(exc) or type(exc).__name__, kind=type(exc).__name__)
            # From here on the step ends on its own: a cancel waits for it (see cancel()).
            self.handler_done = True
            if isinstance(outcome, Failed):
                outcome = await self._repeated_failure(outcome, ctx) or outcome
            if isinstance(outcome, Escalate):
                outcome = self._escalation_handoff(outcome)
            if isinstance(outcome, Handoff):
                await self._hand_off(outcome)
            else:
                self.finish(outcome)
        except asyncio.CancelledError:
            if not self.cancel_requested:
                raise
            self.emit_state(TaskState.CANCELED, agent_message("Task canceled.", self.task))
        except Exception as exc:
            # A handler that returned something unusable, or a handoff that could not be
            # prepared: the task fails with the reason rather than hanging its callers.
            log.warning("task %s failed after its handler: %r", self.task.id, exc)
            if not self.task.status.state.terminal and not self.handing_off:
                self.finish(Failed(f"{type(exc).__name__}: {exc}"))

    async def _drain(self) -> None:
        """Wait until everything emitted so far is committed."""
        while True:
            if self.flusher is not None and not self.flusher.done():
                await asyncio.shield(self.flusher)
            elif self.pending and not self.settled.done():
                self._flushing = True  # do not wait for the scheduled kick
                self.flusher = asyncio.create_task(self._flush())
            else:
                return

    # -- escalation ---------------------------------------------------------------------

    def _escalation_handoff(self, outcome: Escalate) -> Handoff | Failed:
        """A blocking escalation is a handoff to the human agent, as durable as any."""
        escalation = outcome.escalation
        policy = self.manager.policy
        declared = (Trigger.VALUE_UNCERTAINTY, Trigger.KNOWLEDGE_GAP)
        if escalation.trigger in declared and not policy.declarations:
            return Failed(f"escalation on {escalation.trigger} is turned off for this agent")
        return Handoff(
            target=escalation.target,
            reason=f"escalated ({escalation.trigger}): {escalation.what_is_needed}",
            context={
                "escalation": escalation.to_json("blocking"),
                "resume": dict(escalation.resume),
                "summary": escalation.what_happened,
            },
            kind="escalation",
        )

    async def _inform(self, escalation: Escalation) -> str:
        """A non-blocking escalation: delivered (durably taken by the human agent) first."""
        self.notices += 1
        decision = Handoff(
            target=escalation.target,
            reason=f"for your information ({escalation.trigger}): {escalation.what_is_needed}",
            context={
                "escalation": escalation.to_json("non-blocking"),
                "resume": dict(escalation.resume),
                "summary": escalation.what_happened,
            },
            kind="notice",
        )
        handoffs = self.manager.handoffs
        envelope, envelope_json = await handoffs.prepare(
            self.task, decision, self.owner, key_salt=f"notice:{self.notices}"
        )
        created = await handoffs.notify(envelope, envelope_json)
        await self._on_status(
            f"Informed {envelope.target.agent} (task {created.id}): {escalation.what_is_needed}"
        )
        return created.id

    async def _repeated_failure(self, failure: Failed, ctx: TaskContext) -> Escalate | None:
        """The same class of failure `repeated_failures` times in this context escalates."""
        limit = self.manager.policy.repeated_failures
        if not limit:
            return None
        earlier: list[TaskRecord] = []
        token: str | None = None
        while token != "":
            page = await self.manager.store.list_tasks(
                TaskQuery(
                    owner=None,
                    context_id=self.task.context_id,
                    state=TaskState.FAILED,
                    page_size=100,
                    page_token=token,
                )
            )
            earlier += [r for r in page.records if failure_kind(r.task) == failure.kind]
            token = page.next_page_token
        if len(earlier) + 1 < limit:
            return None
        earlier.sort(key=lambda r: r.updated_at)
        tried = [f"task {r.id}: {status_text(r.task)}" for r in earlier[-(limit - 1) :]]
        tried.append(f"task {self.task.id} (this one): {failure.reason}")
        try:
            escalation = Escalation(
                f"The same failure ({failure.kind}) happened {len(tried)} times in this"
                " conversation; retrying again is unlikely to help.",
                tried,
                "a decision on how to go on, or the information that is missing",
                Need.DECISION,
                Trigger.REPEATED_FAILURE,
                resume=ctx.transfer_context,
                target=self.manager.policy.target,
            )
        except IncompleteEscalationError:
            return None
        return Escalate(escalation)

    async def _hand_off(self, decision: Handoff) -> None:
        handoffs = self.manager.handoffs
        try:
            envelope, envelope_json = await handoffs.prepare(self.task, decision, self.owner)
        except GateRefused as exc:
            self.finish(Failed(str(exc)))
            return
        if self.committed is None and not self._flushing and not self.manager.store.shared:
            # Nothing written yet (a handler that handed off at once): create the task and
            # checkpoint the handoff in ONE transaction — one commit fewer on the path.
            self.handing_off = True
            try:
                created = await self._create_handing_off(envelope, envelope_json)
            except Exception as exc:
                log.exception("handoff checkpoint of new task %s failed", self.task.id)
                self._abort(InternalError(f"the handoff could not be checkpointed: {exc}"))
                return
            if created is not None:
                handoffs.spawn(
                    created, self._settle, True, envelope=envelope, source=self.committed
                )
            return
        await self._drain()
        if self.pending or self.committed is None or self.settled.done():
            self.finish(Failed("the task could not be stored before the handoff"))
            return
        self.handing_off = True
        try:
            record, entry = await handoffs.checkpoint(self.committed, envelope, envelope_json)
        except Exception as exc:
            log.exception("handoff checkpoint of task %s failed", self.task.id)
            self._abort(InternalError(f"the handoff could not be checkpointed: {exc}"))
            return
        self.committed = record
        self.task = record.task
        handoffs.spawn(entry, self._settle, True, envelope=envelope, source=record)

    async def _create_handing_off(
        self, envelope: HandoffEnvelope, envelope_json: str
    ) -> OutboxEntry | None:
        """Create the task, already handing off, with its outbox entry; None if the message
        turned out to belong to a task created elsewhere (answered with that one)."""
        handoffs = self.manager.handoffs
        task, event, entry = handoffs.handing_off(self.task, envelope, envelope_json, self.owner)
        items, self.pending = self.pending, []
        events = [*items, event]
        now = utc_now()
        record = TaskRecord(
            task, self.owner, len(events), now, now, self.delegate, task.dump_json()
        )
        stored = await self.manager.store.create(
            record,
            events,
            dedupe_key=self.dedupe_key,
            outbox=entry,
            dedupe_ttl=self.dedupe_ttl,
            received=self.received,
        )
        if stored.id != record.id:
            self._abort(None, answer=stored)
            return None
        if self.envelope is not None:
            failpoint("receive.after_create")
        failpoint("handoff.after_checkpoint")
        self.committed, self.task = record, task
        if not self.created.done():
            self.created.set_result(record)
            self.manager._created(self)
        return entry

    def finish(self, outcome: Outcome | None) -> None:
        match outcome:
            case None:
                self.emit_state(TaskState.COMPLETED)
            case Completed(message=text):
                msg = agent_message(text, self.task) if text else None
                self.emit_state(TaskState.COMPLETED, msg)
            case InputRequired(question=question):
                self.emit_state(TaskState.INPUT_REQUIRED, agent_message(question, self.task))
            case Failed(reason=reason, kind=kind):
                failure = {HANDOFF_EXTENSION_URI: {"failure": {"kind": kind}}}
                self.emit_state(TaskState.FAILED, agent_message(reason, self.task, **failure))
            case Rejected(reason=reason):
                self.emit_state(TaskState.REJECTED, agent_message(reason, self.task))
            case Handoff() | Escalate():
                raise TypeError("a handoff is carried out by the driver, not finish()")
            case _:
                raise TypeError(f"the handler returned {type(outcome).__name__}, not an outcome")

    def emit_state(self, state: TaskState, message: Message | None = None) -> None:
        task = with_status(self.task, state, message)
        self.emit(task, status_event(task))

    async def _on_status(self, text: str) -> None:
        self.emit_state(TaskState.WORKING, agent_message(text, self.task))

    async def _on_artifact(self, artifact: Artifact) -> None:
        task = self.task.model_copy(update={"artifacts": [*(self.task.artifacts or []), artifact]})
        self.emit(
            task,
            StreamResponse(
                artifact_update=TaskArtifactUpdateEvent(
                    task_id=task.id, context_id=task.context_id, artifact=artifact
                )
            ),
        )


def failure_kind(task: Task) -> str | None:
    """The class of failure a FAILED task recorded (see `Failed.kind`)."""
    message = task.status.message
    ext = (message.metadata or {}).get(HANDOFF_EXTENSION_URI) if message else None
    failure = ext.get("failure") if isinstance(ext, dict) else None
    kind = failure.get("kind") if isinstance(failure, dict) else None
    return kind if isinstance(kind, str) else None


def received_entry(
    envelope: HandoffEnvelope, task_id: str, outcome: str, reason: str
) -> ReceivedEntry:
    """The ledger row of a handoff received: `outcome` accepted, rejected or duplicate."""
    return ReceivedEntry(
        handoff_id=envelope.handoff_id,
        idempotency_key=envelope.idempotency_key,
        context_id=envelope.context_id,
        source_agent=envelope.source.agent,
        source_task_id=envelope.source.task_id,
        task_id=task_id,
        outcome=outcome,
        reason=reason,
        at=utc_now(),
    )


def dedupe_key(owner: str, message: Message) -> str:
    """Message ids are unique per owner and context (or per owner, without a context)."""
    return "\x1f".join((owner, message.context_id or "", message.message_id))


class TaskManager:
    """Starts, resumes, cancels and looks up tasks for one agent."""

    def __init__(
        self,
        agent: Agent,
        store: Store,
        settings: HandoffSettings,
        client: AgentClient,
        policy: EscalationPolicy | None = None,
    ) -> None:
        self.agent = agent
        self.store = store
        self.policy = policy or EscalationPolicy()
        self.handoffs = Handoffs(self, settings, client)
        self.leases = Leases(self, settings)
        self._runs: dict[str, _Run] = {}
        self._creating: dict[str, _Run] = {}
        self._background: set[asyncio.Task[None]] = set()
        self._job: asyncio.Task[None] | None = None

    def _created(self, run: _Run) -> None:
        if run.dedupe_key is not None and self._creating.get(run.dedupe_key) is run:
            del self._creating[run.dedupe_key]

    def _forget(self, run: _Run) -> None:
        if self._runs.get(run.task.id) is run:
            del self._runs[run.task.id]
        if run.dedupe_key is not None and self._creating.get(run.dedupe_key) is run:
            del self._creating[run.dedupe_key]

    # -- lifecycle ------------------------------------------------------------------------

    async def recover(self) -> int:
        """Fail tasks a previous process left running; returns how many.

        With a store of its own, every task left SUBMITTED/WORKING is an orphan. With
        replicas sharing the store, only a task whose runner replica's lease ran out is.
        """
        shared = self.store.shared
        orphans: list[TaskRecord] = []
        for state in (TaskState.SUBMITTED, TaskState.WORKING):
            token: str | None = None
            while token != "":
                page = await self.store.list_tasks(
                    TaskQuery(owner=None, state=state, page_size=100, page_token=token)
                )
                orphans += [
                    r
                    for r in page.records
                    if r.id not in self._runs
                    and ext_metadata(r.task).get("state") != HANDING_OFF
                    and (not shared or not await self.leases.runner_alive(r))
                ]
                token = page.next_page_token
        failed = 0
        for record in orphans:
            with contextlib.suppress(ConflictError):
                reason = agent_message(RESTART_REASON, record.task)
                await self._update_now(record, TaskState.FAILED, reason)
                failed += 1
        return failed

    def start_background(self) -> None:
        """Run the agent's own background job (`agent.background(tasks)`), if it has one."""
        job = getattr(self.agent, "background", None)
        if job is None:
            return

        async def run() -> None:
            try:
                await job(LocalTasks(self))
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("the agent's background job failed")

        self._job = asyncio.create_task(run(), name="agent-background")

    async def aclose(self) -> None:
        """Stop running handlers; their tasks are failed by `recover()` at the next start."""
        await self.leases.aclose()
        if self._job is not None:
            self._job.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._job
        await self.handoffs.aclose()
        if self._background:
            await asyncio.wait(self._background, timeout=5)
        runs = list(self._runs.values())
        for run in runs:
            if run.driver is not None:
                run.driver.cancel()
        for run in runs:
            for job in (run.driver, run.flusher):
                if job is not None:
                    with contextlib.suppress(asyncio.CancelledError, Exception):
                        await job

    # -- operations -----------------------------------------------------------------------

    async def send(self, message: Message, owner: str) -> Submission:
        if message.role is not Role.USER:
            raise InvalidParamsError("message.role: a caller's message must be ROLE_USER")
        if message.task_id:
            return await self._follow_up(message, owner)
        if message.metadata and HANDOFF_EXTENSION_URI in message.metadata:
            return await self._receive(message, owner)
        return await self._create(message, owner, dedupe_key(owner, message))

    async def _receive(self, message: Message, owner: str) -> Submission:
        """A handoff: refused (REJECTED) or created at most once per idempotency key."""
        assert message.metadata is not None
        raw = message.metadata[HANDOFF_EXTENSION_URI]
        try:
            envelope = HandoffEnvelope.model_validate(raw)
        except ValidationError as exc:
            first = exc.errors(include_url=False, include_input=False)[0]
            where = ".".join(str(p) for p in first["loc"])
            raise InvalidParamsError(
                f"message.metadata[{HANDOFF_EXTENSION_URI}].{where}: {first['msg']}"
            ) from None
        key, window = self.handoffs.dedupe_for(envelope)
        if key in self._creating:
            raise HandoffProcessingError()
        existing_id = await self.store.find(key)
        if key in self._creating:
            raise HandoffProcessingError()
        size = len(json.dumps(raw, separators=(",", ":")).encode())
        if existing_id is not None:
            record = await self.store.get(existing_id)
            if record is not None:
                same_key = ext_metadata(record.task).get("handoff", {}).get("idempotencyKey")
                replay = same_key == envelope.idempotency_key
                if replay and ext_metadata(record.task).get("envelopeDigest") != envelope.digest():
                    raise IdempotencyConflictError(
                        f"idempotency key {envelope.idempotency_key[:12]}… was used with a"
                        " different envelope"
                    )
                self._ledger(envelope, record.id, "duplicate", "")
                return _resolved(record, duplicate=True)
        bound = message.model_copy(update={"context_id": envelope.context_id})
        refusal = self.handoffs.refusal(envelope, size)
        if refusal is not None:
            return await self._reject(bound, owner, key, envelope, *refusal)
        if key in self._creating:
            raise HandoffProcessingError()
        submission = self._start(bound, owner, key, envelope, window)
        record = await asyncio.shield(submission.created)
        if record.id != submission.task_id:  # another replica created it first
            self._ledger(envelope, record.id, "duplicate", "")
        return submission

    async def _reject(
        self,
        message: Message,
        owner: str,
        key: str,
        envelope: HandoffEnvelope,
        code: str,
        reason: str,
    ) -> Submission:
        task_id = new_id()
        bound = message.model_copy(update={"task_id": task_id})
        metadata = {HANDOFF_EXTENSION_URI: {**receive_metadata(envelope), "rejected": code}}
        task = Task(
            id=task_id,
            context_id=envelope.context_id,
            status=TaskStatus(state=TaskState.SUBMITTED, timestamp=utc_now()),
            history=[bound],
            metadata=metadata,
        )
        rejected = with_status(task, TaskState.REJECTED, agent_message(f"{code}: {reason}", task))
        now = utc_now()
        record = TaskRecord(rejected, owner, 2, now, now, envelope.on_behalf_of or "")
        stored = await self.store.create(
            record,
            [StreamResponse(task=task), status_event(rejected)],
            dedupe_key=key,
            received=received_entry(envelope, task_id, "rejected", code),
        )
        if stored.id != record.id:
            self._ledger(envelope, stored.id, "duplicate", "")
        return _resolved(stored, duplicate=stored.id != record.id)

    def _ledger(self, envelope: HandoffEnvelope, task_id: str, outcome: str, reason: str) -> None:
        """Record a duplicate received, off the reply's path: the ledger is informational,
        and the task itself (found by its key) is what a replay relies on. (A task created
        by a handoff, accepted or rejected, gets its row in the transaction creating it.)"""
        entry = received_entry(envelope, task_id, outcome, reason)
        job = asyncio.create_task(self.store.record_received(entry))
        self._background.add(job)
        job.add_done_callback(self._background.discard)

    async def _create(
        self,
        message: Message,
        owner: str,
        key: str,
        envelope: HandoffEnvelope | None = None,
    ) -> Submission:
        running = self._creating.get(key)
        if running is not None:
            return running.submission
        existing_id = await self.store.find(key)
        running = self._creating.get(key)  # it may have started while we read
        if running is not None:
            return running.submission
        if existing_id is not None:
            record = await self.store.get(existing_id)
            if record is not None:
                return (
                    self._runs[record.id].submission
                    if record.id in self._runs
                    else _resolved(record)
                )
        return self._start(message, owner, key, envelope)

    def _start(
        self,
        message: Message,
        owner: str,
        key: str,
        envelope: HandoffEnvelope | None,
        dedupe_ttl: float | None = None,
    ) -> Submission:
        """Create a task and run its handler; synchronous so the key is claimed atomically."""
        task_id = new_id()
        context_id = message.context_id or new_id()
        bound = message.model_copy(update={"task_id": task_id, "context_id": context_id})
        task = Task(
            id=task_id,
            context_id=context_id,
            status=TaskStatus(state=TaskState.SUBMITTED, timestamp=utc_now()),
            history=[bound],
            metadata={HANDOFF_EXTENSION_URI: receive_metadata(envelope)} if envelope else None,
        )
        run = _Run(
            self,
            task,
            owner,
            committed=None,
            dedupe_key=key,
            first=StreamResponse(task=task),
            envelope=envelope,
        )
        run.dedupe_ttl = dedupe_ttl
        if envelope is not None:
            run.received = received_entry(envelope, task_id, "accepted", "")
        self._creating[key] = run
        self._runs[task_id] = run
        run.run(bound)
        return run.submission

    async def _follow_up(self, message: Message, owner: str) -> Submission:
        assert message.task_id is not None
        record = await self.owned(message.task_id, owner)
        task = record.task
        if message.context_id and message.context_id != task.context_id:
            raise InvalidParamsError(
                f"message.contextId: task {task.id} belongs to context {task.context_id}"
            )
        running = self._runs.get(task.id)
        if any(m.message_id == message.message_id for m in task.history or ()):
            return running.submission if running is not None else _resolved(record)
        if running is not None:
            if any(m.message_id == message.message_id for m in running.task.history or ()):
                return running.submission
            raise UnsupportedOperationError(
                f"task {task.id} is still working; send a follow-up when it asks for input"
            )
        if task.status.state.terminal:
            raise UnsupportedOperationError(
                f"task {task.id} is {task.status.state.name} and cannot take messages;"
                " start a new task in the same context with referenceTaskIds"
            )
        if not task.status.state.interrupted:
            raise UnsupportedOperationError(f"task {task.id} is not waiting for input")
        bound = message.model_copy(update={"context_id": task.context_id})
        resumed = with_status(
            task.model_copy(update={"history": [*(task.history or []), bound]}),
            TaskState.WORKING,
        )
        run = _Run(
            self, resumed, owner, committed=record, dedupe_key=None, first=status_event(resumed)
        )
        self._runs[task.id] = run
        run.run(bound)
        return run.submission

    async def owned(self, task_id: str, owner: str) -> TaskRecord:
        """The committed task if `owner` may see it; -32001 exactly as if absent otherwise."""
        record = await self.store.get(task_id)
        if record is None or not record.visible_to(owner):
            raise TaskNotFoundError(f"task {task_id} not found")
        return record

    async def cancel(self, task_id: str, owner: str) -> TaskRecord:
        record = await self.owned(task_id, owner)
        for _ in range(3):
            if record.state.terminal:
                raise TaskNotCancelableError(
                    f"task {task_id} is {record.state.name}, a terminal state"
                )
            if ext_metadata(record.task).get("state") == HANDING_OFF:
                raise TaskNotCancelableError(f"task {task_id} is being handed off")
            run = self._runs.get(task_id)
            if run is not None and run.handing_off:
                raise TaskNotCancelableError(f"task {task_id} is being handed off")
            if run is not None and run.driver is not None and not run.driver.done():
                if not run.handler_done:
                    run.cancel_requested = True
                    run.driver.cancel()
                record = await asyncio.shield(run.settled)
                if record.state is TaskState.CANCELED:
                    return record
                continue
            if run is not None:
                record = await asyncio.shield(run.settled)
                continue
            try:
                return await self._update_now(
                    record, TaskState.CANCELED, agent_message("Task canceled.", record.task)
                )
            except ConflictError:
                record = await self.owned(task_id, owner)
        raise InternalError(f"task {task_id} kept changing; try again")

    async def _update_now(
        self, record: TaskRecord, state: TaskState, message: Message | None = None
    ) -> TaskRecord:
        """Move a task that no handler is running, with check-and-set."""
        task = with_status(record.task, state, message)
        updated = record.advanced(task, 1, utc_now())
        await self.store.update(updated, [status_event(task)], expected_version=record.version)
        return updated


class LocalTasks:
    """What an agent's background job may do with this agent's own tasks."""

    def __init__(self, manager: TaskManager) -> None:
        self._manager = manager

    async def waiting(self) -> list[Task]:
        """Every task waiting for input (INPUT_REQUIRED), whoever owns it."""
        tasks: list[Task] = []
        token: str | None = None
        while token != "":
            page = await self._manager.store.list_tasks(
                TaskQuery(
                    owner=None, state=TaskState.INPUT_REQUIRED, page_size=100, page_token=token
                )
            )
            tasks += [r.task for r in page.records]
            token = page.next_page_token
        return tasks

    async def answer(self, task_id: str, message: Message) -> bool:
        """Resume a waiting task with `message`, as its owner would; False when it no
        longer waits (someone answered first)."""
        record = await self._manager.store.get(task_id)
        if record is None or not record.state.interrupted:
            return False
        bound = message.model_copy(update={"task_id": task_id, "role": Role.USER})
        try:
            submission = await self._manager._follow_up(bound, record.owner)
        except UnsupportedOperationError:
            return False
        await asyncio.shield(submission.created)
        return True


class Leases:
    """This replica's leases, when replicas share the store (no-ops otherwise).

    - `replica:<id>`: this replica is alive; renewed every `interval`, lapses `ttl` after
      a crash;
    - `task:<task id>`: the replica running the task's handler, until the step settles;
    - `outbox:<handoff id>`: the replica delivering a pending handoff (see Handoffs).
    A task whose runner is no longer alive is an orphan: any replica fails it (check-and-set,
    so one does). A handoff whose deliverer died is taken over, with the same key.
    """

    def __init__(self, manager: TaskManager, settings: HandoffSettings) -> None:
        self.manager = manager
        self.me = f"{settings.agent_name}:{new_id()}"
        self.interval = max(0.1, settings.recovery_interval / 2)
        self.ttl = max(1.0, self.interval * 3)
        self.grace = self.ttl * 2  # a task younger than this may not have its runner yet
        self._beat: asyncio.Task[None] | None = None
        self._freeing: set[asyncio.Task[None]] = set()

    @property
    def store(self) -> Store:
        return self.manager.store

    async def start(self) -> None:
        if not self.store.shared:
            return
        await self.store.acquire(f"replica:{self.me}", self.me, self.ttl)
        self._beat = asyncio.create_task(self._heartbeat(), name="replica-heartbeat")

    async def _heartbeat(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            try:
                await self.store.acquire(f"replica:{self.me}", self.me, self.ttl)
                await self.manager.recover()
            except Exception:
                log.exception("replica heartbeat failed")

    async def claim_task(self, task_id: str) -> None:
        await self.store.acquire(f"task:{task_id}", self.me, 86400.0)

    def free_task(self, task_id: str) -> None:
        if not self.store.shared:
            return
        job = asyncio.create_task(self.store.release(f"task:{task_id}", self.me))
        self._freeing.add(job)
        job.add_done_callback(self._freeing.discard)

    async def runner_alive(self, record: TaskRecord) -> bool:
        """Whether the task's handler may still be running on some replica."""
        runner = await self.store.holder(f"task:{record.id}")
        if runner is None:
            age = datetime.now(UTC) - parse_time(record.updated_at)
            return age.total_seconds() < self.grace
        return await self.store.holder(f"replica:{runner}") is not None

    @contextlib.asynccontextmanager
    async def hold(self, name: str) -> AsyncIterator[bool]:
        """Hold lease `name` (renewed meanwhile) for the block; yields False if taken."""
        if not await self.store.acquire(name, self.me, self.ttl):
            yield False
            return

        async def renew() -> None:
            while True:
                await asyncio.sleep(self.interval)
                with contextlib.suppress(Exception):
                    await self.store.acquire(name, self.me, self.ttl)

        renewer = asyncio.create_task(renew())
        try:
            yield True
        finally:
            renewer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await renewer
            with contextlib.suppress(Exception):
                await self.store.release(name, self.me)

    async def aclose(self) -> None:
        if self._beat is not None:
            self._beat.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._beat
        if self._freeing:
            await asyncio.wait(self._freeing, timeout=2)
        if self.store.shared:
            with contextlib.suppress(Exception):
                await self.store.release(f"replica:{self.me}", self.me)
