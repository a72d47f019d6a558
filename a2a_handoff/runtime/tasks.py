"""The task manager: creates, continues, cancels and looks up one agent's tasks.

Invariants:
- one task has at most one running handler in this process, and a message id creates at
  most one task (a repeat returns the task the first one created) — unless message-id
  deduplication is switched off (`dedupe_message_ids=False`, for clients that reuse ids,
  such as the conformance kit); handoffs deduplicate on their own keys either way;
- a caller sees only its own tasks (another owner's task answers -32001, as if absent);
- follow-ups to one task are serialized, across replicas too: each one accepted is in the
  history in the order of acceptance; one sent while the task works, or while another
  follow-up is being accepted, gets "task is busy" (-32104) and nothing is stored; a message
  to a terminal task is refused (terminal tasks are immutable);
- every acknowledged task is run to its end or failed with the reason: a run the store
  failed is stranded, and its task failed once the store takes writes again;
- a received handoff is proven first (signature, trust list, caller: `handoff.verified`),
  then refused, recognised as a replay, or created once per key (the decisions are
  `handoff.receiver`'s; this module creates the task);
- under API-key auth only this agent's operators decide an escalation (`operators`: a human
  agent's); anyone else who may see the task — the agent that escalated, the user it acts
  for — only adds a note, which never reaches the handler. Operators see every task.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from a2a_handoff.agent import Agent
from a2a_handoff.client.client import AgentClient
from a2a_handoff.client.mcp_tools import McpTools
from a2a_handoff.errors import (
    ConflictError,
    InternalError,
    InvalidParamsError,
    TaskBusyError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from a2a_handoff.escalation import EscalationPolicy
from a2a_handoff.handoff.handoffs import Handoffs
from a2a_handoff.handoff.ledger import received_entry
from a2a_handoff.handoff.receiver import Duplicate, Refuse, receive_metadata
from a2a_handoff.handoff.settings import HandoffSettings
from a2a_handoff.handoff.verified import EnvelopeRefused, VerifiedEnvelope
from a2a_handoff.ids import new_id
from a2a_handoff.observe import events, tracing
from a2a_handoff.protocol.extension import HANDING_OFF, HANDOFF_EXTENSION_URI, ext_metadata
from a2a_handoff.protocol.models import Message, Role, StreamResponse, Task, TaskStatus, utc_now
from a2a_handoff.protocol.states import TaskState
from a2a_handoff.protocol.steps import agent_message, status_event, with_status
from a2a_handoff.runtime.escalations import add_note
from a2a_handoff.runtime.journal import Submission, resolved, write_state
from a2a_handoff.runtime.leases import Leases
from a2a_handoff.runtime.local import LocalTasks
from a2a_handoff.runtime.orphans import fail_orphans, fail_stranded, find_orphans
from a2a_handoff.runtime.run import TaskRun
from a2a_handoff.stores.base import Store, TaskRecord
from a2a_handoff.trust.agent_trust import AgentTrust

log = logging.getLogger("a2a_handoff.runtime")


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
        trust: AgentTrust,
        policy: EscalationPolicy | None = None,
        operators: frozenset[str] | None = None,
        *,
        dedupe_message_ids: bool = True,
        tools: McpTools | None = None,
    ) -> None:
        self.agent = agent
        self.tools = tools  # the MCP servers handlers may call (`ctx.call_tool`)
        self.dedupe_message_ids = dedupe_message_ids
        self.store = store
        self.policy = policy or EscalationPolicy()
        self.operators = operators  # None: no authentication, every caller is an operator
        self.leases = Leases(store, settings, self.sweep)
        self.handoffs = Handoffs.build(settings, store, client, self.leases.hold, trust)
        self._runs: dict[str, TaskRun] = {}
        self._creating: dict[str, TaskRun] = {}
        self._stranded: set[str] = set()  # runs the store failed: their tasks to fail
        self._recovered = False  # the start-up sweep is done (a failing store delays it)
        self._job: asyncio.Task[None] | None = None

    # -- what a run needs (runtime.run.RunHost) -------------------------------------------

    def created(self, run: TaskRun) -> None:
        if run.dedupe_key is not None and self._creating.get(run.dedupe_key) is run:
            del self._creating[run.dedupe_key]

    def forget(self, run: TaskRun) -> None:
        if self._runs.get(run.task.id) is run:
            del self._runs[run.task.id]
        if run.dedupe_key is not None and self._creating.get(run.dedupe_key) is run:
            del self._creating[run.dedupe_key]

    def free_task(self, task_id: str) -> None:
        self.leases.free_task(task_id)

    async def claim_task(self, task_id: str) -> bool:
        return await self.leases.claim_task(task_id)

    def strand(self, task_id: str) -> None:
        self._stranded.add(task_id)

    # -- lifecycle ------------------------------------------------------------------------

    async def recover(self) -> int:
        """Fail tasks a previous process (or a dead replica) left running — or, for an agent
        that resumes them (`agent.resumes = True`), run their handler again on their last
        message; how many."""
        if not getattr(self.agent, "resumes", False):
            failed = await fail_orphans(self.store, self._runs, self.leases)
            self._recovered = True
            return failed
        orphans = await find_orphans(self.store, self._runs, self.leases)
        for record in orphans:
            self._resume(record)
        self._recovered = True
        return len(orphans)

    def _resume(self, record: TaskRecord) -> None:
        """Run an orphan's handler again on the last message its caller sent: the agent
        said its handler may run twice for a message (it keeps its own journal)."""
        task = record.task
        last = next((m for m in reversed(task.history or []) if m.role is Role.USER), None)
        if last is None or task.id in self._runs:
            return
        resumed = with_status(task, TaskState.WORKING)
        run = TaskRun(
            self, resumed, record.owner, committed=record, dedupe_key=None,
            first=status_event(resumed),
        )  # fmt: skip
        self._runs[task.id] = run
        run.run(last)

    async def sweep(self, others: bool) -> int:
        """The heartbeat's sweep: fail the tasks this process stranded, and with `others` the
        orphans of dead replicas; how many."""
        failed = 0
        if self._stranded:
            failed += await fail_stranded(self.store, self._stranded, self._runs)
        if others or not self._recovered:
            failed += await self.recover()
        if failed:
            log.warning("failed %d task(s) whose runner was lost", failed)
        return failed

    def start_background(self) -> None:
        """Run the agent's own background job (`agent.background(tasks)`), if it has one."""
        job = getattr(self.agent, "background", None)
        if job is None:
            return

        async def run() -> None:
            try:
                await job(LocalTasks(self.store, self._answer_as_operator))
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
        runs = list(self._runs.values())
        for run in runs:
            if run.driver is not None:
                run.driver.cancel()
        for run in runs:
            for job in (run.driver, run.journal.flusher):
                if job is not None:
                    with contextlib.suppress(asyncio.CancelledError, Exception):
                        await job
        if self.tools is not None:  # after the handlers: none is left calling
            await self.tools.aclose()

    # -- operations -----------------------------------------------------------------------

    async def send(self, message: Message, owner: str, *, prompt: bool = True) -> Submission:
        """Start, continue or receive a task. `prompt=False`: the caller waits for the outcome
        (a blocking SendMessage), so a new task is written only once its handler emits
        something or ends — and a handler that replies with a Message never makes one."""
        if message.role is not Role.USER:
            raise InvalidParamsError("message.role: a caller's message must be ROLE_USER")
        if message.task_id:
            return await self._follow_up(message, owner)
        if message.metadata and HANDOFF_EXTENSION_URI in message.metadata:
            return await self._receive(message, owner)
        if not self.dedupe_message_ids:
            return self._start(message, owner, None, None, defer=not prompt)
        return await self._create(message, owner, dedupe_key(owner, message), defer=not prompt)

    async def _receive(self, message: Message, owner: str) -> Submission:
        """A handoff: refused (REJECTED) or created at most once per idempotency key."""
        assert message.metadata is not None
        receiver = self.handoffs.receiver
        try:  # proven before anything else: nothing unverified goes further
            verified = await receiver.verify(message.metadata, owner)
        except EnvelopeRefused as refused:
            answer = await receiver.refuse_unverified(message, owner, refused)
            events.handoff_received(
                refused.envelope, answer.id, f"rejected:{refused.code}", refused.reason,
                verified=False,
            )  # fmt: skip
            return resolved(answer)
        envelope = verified.envelope
        with tracing.adopted(envelope.trace_id):
            return await self._receive_verified(owner, verified)

    async def _receive_verified(self, owner: str, verified: VerifiedEnvelope) -> Submission:
        """Act on the receiver's one decision: answer a replay with its task, store a
        refusal, or create the task (once per key, across replicas too)."""
        receiver = self.handoffs.receiver
        decision = await receiver.decide(verified, self._creating.__contains__)
        detail = ""
        if isinstance(decision, Duplicate):
            record, outcome = decision.record, "duplicate"
            answer = resolved(record, duplicate=True)
        elif isinstance(decision, Refuse):
            record, duplicate = await receiver.reject(
                decision.message, owner, decision.key, verified, decision.code, decision.reason
            )
            outcome = "duplicate" if duplicate else f"rejected:{decision.code}"
            detail = decision.reason
            answer = resolved(record, duplicate=duplicate)
        else:
            answer = self._start(decision.message, owner, decision.key, verified, decision.window)
            record = await asyncio.shield(answer.created)
            # Another replica may have created it first: then it is that one's task.
            outcome = "accepted" if record.id == answer.task_id else "duplicate"
        envelope = verified.envelope
        if outcome == "duplicate":
            self.handoffs.ledger.duplicate(envelope, record.id)
        events.handoff_received(envelope, record.id, outcome, detail)
        return answer

    async def _create(
        self,
        message: Message,
        owner: str,
        key: str,
        envelope: VerifiedEnvelope | None = None,
        *,
        defer: bool = False,
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
                    else resolved(record)
                )
        return self._start(message, owner, key, envelope, defer=defer)

    def _start(
        self,
        message: Message,
        owner: str,
        key: str | None,
        envelope: VerifiedEnvelope | None,
        dedupe_ttl: float | None = None,
        *,
        defer: bool = False,
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
        run = TaskRun(
            self,
            task,
            owner,
            committed=None,
            dedupe_key=key,
            first=StreamResponse(task=task),
            envelope=envelope,
        )
        run.journal.dedupe_ttl = dedupe_ttl
        if envelope is not None:
            run.journal.received = received_entry(envelope.envelope, task_id, "accepted", "")
        if key is not None:
            self._creating[key] = run
        self._runs[task_id] = run
        run.run(bound, defer=defer)
        return run.submission

    async def _answer_as_operator(self, message: Message, owner: str) -> Submission:
        """This agent's own background job answers (the escalation fallback): an operator."""
        return await self._follow_up(message, owner, operator=True)

    async def _follow_up(self, message: Message, owner: str, operator: bool = False) -> Submission:
        assert message.task_id is not None
        record = await self.owned(message.task_id, owner)
        task = record.task
        noting = "escalation" in ext_metadata(task) and not (operator or self.decides(owner))
        if message.context_id and message.context_id != task.context_id:
            raise InvalidParamsError(
                f"message.contextId: task {task.id} belongs to context {task.context_id}"
            )
        running = self._runs.get(task.id)
        dedupe = self.dedupe_message_ids
        if dedupe and any(m.message_id == message.message_id for m in task.history or ()):
            return running.submission if running is not None else resolved(record)
        if running is not None:
            history = running.task.history or ()
            if dedupe and any(m.message_id == message.message_id for m in history):
                return running.submission
            raise TaskBusyError(
                f"task {task.id} is busy: it is still working on an earlier message; send"
                " this one when it asks for input"
            )
        if task.status.state.terminal:
            raise UnsupportedOperationError(
                f"task {task.id} is {task.status.state.name} and cannot take messages;"
                " start a new task in the same context with referenceTaskIds"
            )
        if not task.status.state.interrupted:
            raise TaskBusyError(
                f"task {task.id} is busy: it is {task.status.state.name}, not waiting for"
                " input; send this message when it asks for input"
            )
        bound = message.model_copy(update={"context_id": task.context_id})
        if noting:  # a note on an escalation: kept, never a decision, no handler runs
            return resolved(await add_note(self.store, record, bound, owner))
        resumed = with_status(
            task.model_copy(update={"history": [*(task.history or []), bound]}),
            TaskState.WORKING,
        )
        run = TaskRun(
            self, resumed, owner, committed=record, dedupe_key=None, first=status_event(resumed)
        )
        self._runs[task.id] = run
        run.run(bound)
        return run.submission

    async def owned(self, task_id: str, owner: str) -> TaskRecord:
        """The committed task if `owner` may see it; -32001 exactly as if absent otherwise."""
        record = await self.store.get(task_id)
        if record is None or not (record.visible_to(owner) or self.sees_all(owner)):
            raise TaskNotFoundError(f"task {task_id} not found", metadata={"taskId": task_id})
        return record

    def sees_all(self, principal: str) -> bool:
        """Whether `principal` is an operator of this agent: it sees every task."""
        return self.operators is not None and principal in self.operators

    def decides(self, principal: str) -> bool:
        """Whether `principal` may decide an escalation here: an operator (without
        authentication, whoever reaches the agent)."""
        return self.operators is None or principal in self.operators

    async def cancel(self, task_id: str, owner: str) -> TaskRecord:
        record = await self.owned(task_id, owner)
        for _ in range(3):
            if record.state.terminal:
                raise TaskNotCancelableError(
                    f"task {task_id} is {record.state.name}, a terminal state",
                    metadata={"taskId": task_id},
                )
            if ext_metadata(record.task).get("state") == HANDING_OFF:
                raise TaskNotCancelableError(
                    f"task {task_id} is being handed off", metadata={"taskId": task_id}
                )
            run = self._runs.get(task_id)
            if run is not None and not run.phase.cancelable:
                raise TaskNotCancelableError(
                    f"task {task_id} is being handed off", metadata={"taskId": task_id}
                )
            if run is not None and run.driver is not None and not run.driver.done():
                run.cancel()  # stops the handler while it runs; else the step ends on its own
                record = await asyncio.shield(run.settled)
                if record.state is TaskState.CANCELED:
                    return record
                continue
            if run is not None:
                record = await asyncio.shield(run.settled)
                continue
            try:
                canceled = agent_message("Task canceled.", record.task)
                return await write_state(self.store, record, TaskState.CANCELED, canceled)
            except ConflictError:
                record = await self.owned(task_id, owner)
        raise InternalError(f"task {task_id} kept changing; try again")
