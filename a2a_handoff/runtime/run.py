"""One task's run: its handler driven to an outcome, and the outcome carried out.

Invariants:
- the run is in one phase at a time (`runtime.phases`), changed only through its table;
- every state change goes through `states.transition()` (via `protocol.steps.with_status`);
- a handler's exception fails the task with its message; it never crashes a request;
- a cancel requested while the handler runs cancels it and ends the task CANCELED; once the
  handler returned, the step ends on its own (a cancel waits for it);
- a handoff (or a blocking escalation, a handoff to the human agent) is checkpointed before
  anything is sent, and the task settles only when the delivery terminated it.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Literal, Protocol

from a2a_handoff.agent import Agent, TaskContext
from a2a_handoff.client.mcp_tools import McpTools
from a2a_handoff.errors import RpcError
from a2a_handoff.escalation import Escalate, EscalationPolicy
from a2a_handoff.handoff.handoffs import Handoffs
from a2a_handoff.handoff.verified import VerifiedEnvelope
from a2a_handoff.ids import new_id
from a2a_handoff.observe import events, tracing
from a2a_handoff.outcomes import (
    Completed,
    Failed,
    Handoff,
    InputRequired,
    Outcome,
    Rejected,
    Reply,
)
from a2a_handoff.protocol.extension import HANDOFF_EXTENSION_URI, ext_metadata, with_ext_metadata
from a2a_handoff.protocol.models import Message, Role, StreamResponse, Task
from a2a_handoff.protocol.shallow import copied
from a2a_handoff.protocol.states import TaskState
from a2a_handoff.protocol.steps import agent_message, status_event, with_status
from a2a_handoff.runtime.commit_gate import stored
from a2a_handoff.runtime.delegation_record import cancel_if_ended, delegating
from a2a_handoff.runtime.escalations import escalation_handoff, repeated_failure
from a2a_handoff.runtime.handing import hand_off
from a2a_handoff.runtime.journal import Journal
from a2a_handoff.runtime.phases import Phase, PhaseError, advance
from a2a_handoff.runtime.port import RunPort
from a2a_handoff.runtime.replay import Replay, StoredHandoff
from a2a_handoff.runtime.submission import Submission
from a2a_handoff.stores.base import ReceivedEntry, Store, TaskRecord
from a2a_handoff.stores.records import owner_principal, owner_tenant

log = logging.getLogger("a2a_handoff.runtime")

Answer = Literal["task", "outcome", "stream"]
"""What a new task's caller is given: the task once stored, its outcome, or a stream."""


class RunHost(Protocol):
    """What a task's run needs from the task manager."""

    @property
    def store(self) -> Store: ...

    @property
    def agent(self) -> Agent: ...

    @property
    def policy(self) -> EscalationPolicy: ...

    @property
    def handoffs(self) -> Handoffs: ...

    @property
    def tools(self) -> McpTools | None: ...

    def created(self, run: TaskRun) -> None:
        """The run's task is stored: from now on the store answers for its dedupe key."""

    def forget(self, run: TaskRun) -> None:
        """The run is over (settled or aborted)."""

    def free_task(self, task_id: str) -> None:
        """Release the task's runner lease (replicas)."""

    def strand(self, task_id: str) -> None:
        """The run stopped because the store failed: fail the task once it takes writes."""

    async def claim_task(self, task_id: str) -> bool:
        """Take the task's runner lease (replicas); False while another replica's run has it."""


class TaskRun:
    """One step of one task: its phase, its handler, and its journal (what it emitted)."""

    def __init__(
        self,
        host: RunHost,
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
        self.host = host
        self.phase = Phase.STARTING
        self.journal = Journal(
            self,
            task,
            owner,
            committed=committed,
            dedupe_key=dedupe_key,
            first=first,
            envelope=envelope,
            dedupe_ttl=dedupe_ttl,
            received=received,
            keep_first=keep_first,
        )
        self.port = RunPort(self)
        self.replyable = False  # the caller may take a direct Message (see `run`)
        self.streamed = False  # … on a stream
        self.replay: Replay | None = None  # a resumed step: what its cut run committed
        self.stored_handoff: StoredHandoff | None = None  # … and the handoff it began with
        self.driver: asyncio.Task[None] | None = None  # the handler's task

    # -- the phase --------------------------------------------------------------------------

    def advance(self, phase: Phase) -> None:
        """Move to `phase`; PhaseError when the table forbids it."""
        self.phase = advance(self.phase, phase)

    def speak(self) -> None:
        """The handler emits: from now on no direct Message. Refused once its step is over
        (a run that was aborted drops what it emits, see `emit`)."""
        if self.phase is Phase.RUNNING:
            self.advance(Phase.SPEAKING)
            self.journal.open()
        elif self.phase not in (Phase.SPEAKING, Phase.CANCELING, Phase.ABORTED):
            raise PhaseError(f"the handler's step is over ({self.phase.name}): nothing to emit")

    def cancel(self) -> None:
        """A caller's cancel: stops the handler while it runs (the task ends CANCELED); once
        it returned, the step ends on its own. Callers check `phase.cancelable` first. Before
        the handler started, the driver writes the step's start and then ends it CANCELED
        itself: a write is never cut in the middle."""
        starting = self.phase is Phase.STARTING
        if self.phase.handler_running:
            self.advance(Phase.CANCELING)
        if self.phase is Phase.CANCELING and self.driver is not None and not starting:
            self.driver.cancel()

    def abort(self, error: RpcError | None, answer: TaskRecord | None = None) -> None:
        """Stop the run: its work cannot be stored (error) or belongs to another task."""
        self.journal.abort(error, answer)

    # -- what the journal reports (runtime.journal.JournalHost) ------------------------------

    @property
    def store(self) -> Store:
        return self.host.store

    def created(self) -> None:
        self.host.created(self)

    def forget(self) -> None:
        self.host.forget(self)

    def free_task(self, task_id: str) -> None:
        self.host.free_task(task_id)

    def strand(self, task_id: str) -> None:
        self.host.strand(task_id)

    def stopped(self) -> None:
        if self.phase is not Phase.ABORTED:
            self.advance(Phase.ABORTED)
        if self.driver is not None and not self.driver.done():
            self.driver.cancel()

    # -- what the task manager reads ---------------------------------------------------------

    @property
    def task(self) -> Task:
        return self.journal.task

    @property
    def dedupe_key(self) -> str | None:
        return self.journal.dedupe_key

    @property
    def submission(self) -> Submission:
        return self.journal.submission

    @property
    def settled(self) -> asyncio.Future[TaskRecord]:
        return self.journal.settled

    @property
    def handoffs(self) -> Handoffs:
        return self.host.handoffs

    @property
    def tools(self) -> McpTools | None:
        """The MCP servers the handler may call (None: none configured)."""
        return self.host.tools

    @property
    def acting_for(self) -> str:
        """The end user a handoff, delegation or escalation of this task is made on behalf of
        (`onBehalfOf`). A task another agent sent forwards the user its proven envelope named
        ("" when none) — never that agent, nor whoever answers the task, so every hop of a
        chain names the chain's user; a task a caller created names its owner (its principal,
        not its tenant: the receiver takes the handoff in the tenant its card names)."""
        journal = self.journal
        if journal.envelope is not None:  # the step that received it
            return journal.envelope.envelope.on_behalf_of or ""
        committed = journal.committed
        received = ext_metadata(journal.task).get("handoff")
        if isinstance(received, dict):  # the envelope's word, as recorded when it arrived
            shared = owner_principal(committed.delegate) if committed is not None else ""
            return str(received.get("onBehalfOf") or shared)
        return owner_principal(committed.owner if committed is not None else journal.owner)

    @property
    def direct(self) -> bool:
        """Whether a `Reply` still answers as a direct Message: a new task (not received by
        handoff) whose caller waits for the outcome, and nothing emitted by the handler.
        The task exists already (its receipt); the reply settles it."""
        return (
            self.replyable
            and self.phase in (Phase.STARTING, Phase.RUNNING)
            and not self.journal.opened.done()
        )

    # -- the handler -------------------------------------------------------------------------

    def run(self, message: Message, *, answer: Answer = "task") -> None:
        """Start the handler on `message` once its task is committed.

        `answer` is what the caller of a new task (not received by handoff) is given: with
        "outcome" (a blocking call) the handler may answer with a direct Message (`Reply`)
        even after awaiting, say, a model — the task written before it ran is the receipt
        the reply settles; with "stream", a stream opens once the handler first waits,
        emits or ends, so a reply before that is one Message; with "task", never.
        """
        journal = self.journal
        new = journal.start is None and journal.envelope is None
        self.replyable = answer != "task" and new
        self.streamed = answer == "stream"
        if self.replyable:
            journal.hold()
        self.driver = asyncio.create_task(self._drive(message), name=f"task-{self.task.id}")

    async def _drive(self, message: Message) -> None:
        host = self.host
        try:
            if self.task.status.state is not TaskState.WORKING:  # written with the new Task
                working = with_status(self.task, TaskState.WORKING)
                self.emit(working, status_event(working))
            if not await stored(self):
                return
            if self.phase is Phase.CANCELING:  # canceled before its handler started
                raise asyncio.CancelledError
            ctx = TaskContext(
                message,
                self.task,
                self.port,
                envelope=self.journal.envelope or self.stored_handoff,
                policy=host.policy,
                principal=owner_principal(self.journal.owner),
                tenant=owner_tenant(self.journal.owner),
            )
            self.advance(Phase.RUNNING)
            if self.streamed and self.replyable:  # open once the handler first waits
                asyncio.get_running_loop().call_soon(self.journal.open)
            outcome = await self._handle(ctx)
            # From here on the step ends on its own: a cancel waits for it (see cancel()).
            if self.phase in (Phase.HANDED_OVER, Phase.ABORTED):
                return  # `ctx.handoffs.hand_off` ended the step (the outbox settles it), or a write
            direct = self.direct
            self.advance(Phase.ENDING)
            if isinstance(outcome, Failed):
                outcome = await repeated_failure(host.store, ctx, outcome, host.policy) or outcome
            if isinstance(outcome, Escalate):
                outcome = escalation_handoff(outcome, host.policy)
            if isinstance(outcome, Handoff):
                self.journal.open()
                await hand_off(self, outcome)
            elif isinstance(outcome, Reply) and direct:
                self.reply(outcome)
            else:
                self.journal.open()
                self.finish(outcome)
        except asyncio.CancelledError:
            if self.phase is not Phase.CANCELING:
                raise
            self.emit_state(TaskState.CANCELED, agent_message("Task canceled.", self.task))
        except Exception as exc:
            # A handler that returned something unusable, or a handoff that could not be
            # prepared: the task fails with the reason rather than hanging its callers.
            log.warning("task %s failed after its handler: %r", self.task.id, exc)
            if not self.task.status.state.terminal and self.phase.emits:
                self.finish(Failed(f"{type(exc).__name__}: {exc}"))
        await self.journal.write_now()  # the step's end, written in this task
        if delegating(self.task):  # sub-tasks asking for input: canceled if the task ended
            await cancel_if_ended(host.handoffs, self.settled)

    async def _handle(self, ctx: TaskContext) -> Outcome | None:
        """The handler's outcome; its exception as a failure."""
        try:
            if tracing.enabled():
                with tracing.span("a2a.handler", "a2a.task_id", self.task.id):
                    return await self.host.agent.handle(ctx)
            return await self.host.agent.handle(ctx)  # (no null context when tracing is off)
        except Exception as exc:
            events.handler_failed(self.task.id, self.task.context_id, exc)
            return Failed.raised(exc)

    # -- what is emitted ----------------------------------------------------------------------

    def reply(self, outcome: Reply) -> None:
        """Answer a waiting caller with a direct Message: the task (its receipt) completes
        with it, marked `reply`, so a repeat of the message id gets the same Message."""
        bound = reply_message(outcome, self.task, direct=False)
        task = with_ext_metadata(with_status(self.task, TaskState.COMPLETED, bound), reply=True)
        self.journal.reply_with(copied(bound, {"task_id": None}))
        self.emit(task, status_event(task))

    def finish(self, outcome: Outcome | None) -> None:
        """End the step as `outcome` says (None completes the task)."""
        self.emit_state(*ending(outcome, self.task))

    def emit_state(self, state: TaskState, message: Message | None = None) -> None:
        task = with_status(self.task, state, message)
        self.emit(task, status_event(task))

    def emit(self, task: Task, item: StreamResponse) -> None:
        """Record an event of the step: dropped once the run was aborted (its work cannot
        be stored), refused in a phase that emits nothing."""
        if self.phase is Phase.ABORTED:
            return
        if not self.phase.emits:
            raise PhaseError(f"a task's run emits nothing while {self.phase.name}")
        if self.replay is not None and self.replay.matches(item):
            return  # a resumed step's event, committed before the crash under its own id
        self.journal.emit(task, item)


def ending(outcome: Outcome | None, task: Task) -> tuple[TaskState, Message | None]:
    """The state (and status message) `outcome` ends the step of `task` with."""
    match outcome:
        case None:
            return TaskState.COMPLETED, None
        case Completed(message=text):
            return TaskState.COMPLETED, agent_message(text, task) if text else None
        case InputRequired(question=question):
            return TaskState.INPUT_REQUIRED, agent_message(question, task)
        case Failed(reason=reason, kind=kind):
            failure = {HANDOFF_EXTENSION_URI: {"failure": {"kind": kind}}}
            return TaskState.FAILED, agent_message(reason, task, **failure)
        case Rejected(reason=reason):
            return TaskState.REJECTED, agent_message(reason, task)
        case Reply():  # the task exists already: the reply completes it
            return TaskState.COMPLETED, reply_message(outcome, task, direct=False)
        case Handoff() | Escalate():
            raise TypeError("a handoff is carried out by the driver, not finish()")
        case _:
            raise TypeError(f"the handler returned {type(outcome).__name__}, not an outcome")


def reply_message(reply: Reply, task: Task, *, direct: bool) -> Message:
    """The agent's reply as a Message (in the task's context, bound to it unless direct)."""
    return Message(
        message_id=new_id(),
        role=Role.AGENT,
        parts=reply.all_parts(),
        context_id=task.context_id,
        task_id=None if direct else task.id,
    )
