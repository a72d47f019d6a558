"""One task's run: its handler driven to an outcome, and the outcome carried out.

Invariants:
- every state change goes through `states.transition()` (via `protocol.events.with_status`);
- a handler's exception fails the task with its message; it never crashes a request;
- a cancel requested while the handler runs cancels it and ends the task CANCELED; once the
  handler returned, the step ends on its own (a cancel waits for it);
- a handoff (or a blocking escalation, a handoff to the human agent) is checkpointed before
  anything is sent, and the task settles only when the delivery terminated it.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Protocol

from a2a_handoff.agent import Agent, TaskContext
from a2a_handoff.errors import (
    GateRefused,
    InternalError,
    StoreError,
    StoreUnavailableError,
    TaskBusyError,
)
from a2a_handoff.escalation import Escalate, Escalation, EscalationPolicy
from a2a_handoff.handoff.envelope import HandoffEnvelope
from a2a_handoff.handoff.handoffs import Handoffs
from a2a_handoff.handoff.job import DeliveryJob
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
from a2a_handoff.protocol.events import agent_message, appended, status_event, with_status
from a2a_handoff.protocol.extension import HANDOFF_EXTENSION_URI, ext_metadata, with_ext_metadata
from a2a_handoff.protocol.models import (
    Artifact,
    Message,
    Role,
    StreamResponse,
    TaskArtifactUpdateEvent,
    parse_time,
)
from a2a_handoff.protocol.states import TaskState
from a2a_handoff.runtime.escalations import escalation_handoff, repeated_failure
from a2a_handoff.runtime.journal import Journal, JournalHost

log = logging.getLogger("a2a_handoff.runtime")


class RunHost(JournalHost, Protocol):
    """What a task's run needs from the task manager."""

    @property
    def agent(self) -> Agent: ...

    @property
    def policy(self) -> EscalationPolicy: ...

    @property
    def handoffs(self) -> Handoffs: ...

    async def claim_task(self, task_id: str) -> bool:
        """Take the task's runner lease (replicas); False while another replica's run has it."""


class TaskRun(Journal):
    """One step of one task: its handler, and the events not yet written."""

    host: RunHost
    cancel_requested = False  # cancel() asked: the handler's cancellation ends it CANCELED
    handler_done = False  # the handler returned: the step ends on its own
    handing_off = False  # the handoff is being checkpointed or delivered: not cancelable
    notices = 0  # non-blocking escalations sent, each with a key of its own
    spoke = False  # the handler emitted a status or an artifact: no direct Message any more
    handed_over = False  # `ctx.hand_off` handed the task over: the step is over

    def run(self, message: Message, *, defer: bool = False) -> None:
        """Start the handler on `message` (a follow-up starts with an event already pending).

        `defer` (a new task whose caller waits for the outcome anyway): nothing is written
        until the handler emits something or ends, so that it may still answer with a direct
        Message (`Reply`) after awaiting, say, a model. Not with a shared store: there the
        handler runs only once its task is committed.
        """
        self.deferred = defer and self.direct
        self.driver = asyncio.create_task(self._drive(message), name=f"task-{self.task.id}")
        if self.deferred:
            return
        if not (self.host.store.shared and self.committed is not None):
            self.kick()  # a follow-up on a shared store writes once the task is claimed

    async def _claim(self) -> bool:
        """Replicas share the store: take the task's runner lease before anything is written
        for a follow-up (only one replica's message gets in), and run the handler only once
        the task is committed — a message refused, or a duplicate created on another
        replica, must never run a handler. False: the run is over (aborted with the reason)."""
        try:
            claimed = await self.host.claim_task(self.task.id)
        except StoreError as exc:
            self.abort(StoreUnavailableError(f"the task could not be claimed: {exc}"))
            return False
        if not claimed:
            self.abort(
                TaskBusyError(
                    f"task {self.task.id} is busy: another replica is processing a message"
                    " to it; send this one again when the task asks for input"
                )
            )
            return False
        if self.committed is not None:
            self.kick()
        try:
            await asyncio.shield(self.created)
        except Exception:
            return False  # not stored: the run was aborted with the reason
        return True

    async def _drive(self, message: Message) -> None:
        host = self.host
        try:
            if host.store.shared and not await self._claim():
                return
            if self.task.status.state is not TaskState.WORKING:
                if self.deferred:  # held back with the Task itself, written with what follows
                    self.task = with_status(self.task, TaskState.WORKING)
                    self.pending.append(status_event(self.task))
                else:
                    self.emit_state(TaskState.WORKING)
            ctx = TaskContext(
                message=message,
                task=self.task,
                _emit_status=self._on_status,
                _emit_artifact=self._on_artifact,
                envelope=self.envelope,
                policy=host.policy,
                _inform=self._inform,
                _emit_chunk=self._on_chunk,
                _use_approval=self._use_approval,
                _planner=host.handoffs.sender,
                _attempt=self._attempt,
                principal=self.owner,
            )
            try:
                if tracing.enabled():
                    with tracing.span("a2a.handler", "a2a.task_id", self.task.id):
                        outcome = await host.agent.handle(ctx)
                else:  # (no null context around every handler when tracing is off)
                    outcome = await host.agent.handle(ctx)
            except Exception as exc:
                events.handler_failed(self.task.id, self.task.context_id, exc)
                outcome = Failed.raised(exc)
            # From here on the step ends on its own: a cancel waits for it (see cancel()).
            self.handler_done = True
            if self.handed_over:
                return  # `ctx.hand_off` ended the step: the outbox settles it
            if isinstance(outcome, Failed):
                outcome = await repeated_failure(host.store, ctx, outcome, host.policy) or outcome
            if isinstance(outcome, Escalate):
                outcome = escalation_handoff(outcome, host.policy)
            if isinstance(outcome, Handoff):
                await self._hand_off(outcome)
            elif isinstance(outcome, Reply) and self.direct:
                self.reply(self._message(outcome))
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

    @property
    def acting_for(self) -> str:
        """The principal a handoff of this task is made on behalf of (`onBehalfOf`): the user
        its owner acts for, when the task was itself handed over — else its owner."""
        committed = self.committed.delegate if self.committed is not None else ""
        return self.delegate or committed or self.owner

    def _use_approval(self, decision_id: str) -> bool:
        """Record that an operator's approval was used (False: it was, already). Kept in the
        task's metadata, written with the step's events — the receiver makes sure no other
        task ever holds the same decision (it deduplicates returns on the decision's id)."""
        used = ext_metadata(self.task).get("approvalsUsed") or []
        if decision_id in used:
            return False
        task = with_ext_metadata(self.task, approvalsUsed=[*used, decision_id])
        self.emit(task, status_event(task, {HANDOFF_EXTENSION_URI: {"approvalUsed": decision_id}}))
        return True

    async def _inform(self, escalation: Escalation) -> str:
        """A non-blocking escalation: delivered (durably taken by the human agent) first."""
        self.spoke = True
        self.notices += 1
        handoffs = self.host.handoffs
        envelope, envelope_json = await handoffs.sender.prepare(
            self.task,
            Handoff.to_human(escalation, blocking=False),
            self.acting_for,
            key_salt=f"notice:{self.notices}",
        )
        created = await handoffs.delivery.notify(envelope, envelope_json)
        await self._on_status(
            f"Informed {envelope.target.agent} (task {created.id}): {escalation.what_is_needed}"
        )
        return created.id

    async def _attempt(self, decision: Handoff) -> str | None:
        """`ctx.hand_off`: checkpoint the handoff and wait for its delivery's answer; the
        reason it was refused (the task WORKING again), or None: handed over."""
        if self.handed_over:
            raise RuntimeError("this task was handed off already")
        handoffs = self.host.handoffs
        try:
            envelope, envelope_json = await handoffs.sender.prepare(
                self.task, decision, self.acting_for
            )
        except GateRefused as exc:
            return str(exc)
        refusal = handoffs.sender.loop_refusal(envelope)
        if refusal is not None:
            return refusal
        self.spoke = True  # the task is written now: no direct Message after this
        await self.drain()
        if self.pending or self.committed is None or self.settled.done():
            raise InternalError("the task could not be stored before the handoff")
        self.handing_off = True
        try:
            record, entry = await handoffs.sender.checkpoint(
                self.committed, envelope, envelope_json
            )
        except BaseException:
            self.handing_off = False
            raise
        self.committed = record
        self.task = record.task
        job = handoffs.outbox.spawn(DeliveryJob(entry, True, envelope, record, True), self.settle)
        try:
            final = await asyncio.shield(job)
        except Exception:
            final = None  # left pending: the outbox replays it and settles the task
        if final is not None and not final.state.terminal:
            self.committed = final
            self.task = final.task
            self.handing_off = False
            refused = ext_metadata(final.task).get("refused") or {}
            return str(refused.get("reason") or "the handoff was refused")
        self.handed_over = True
        return None

    async def _hand_off(self, decision: Handoff) -> None:
        handoffs = self.host.handoffs
        if decision.kind == "return":
            self._decided(decision)
        # In the chain's trace (a return is prepared while answering the operator's message)
        chain = (ext_metadata(self.task).get("handoff") or {}).get("traceId")
        with tracing.adopted(chain):
            try:
                with tracing.span("a2a.gate", "a2a.target", decision.target):
                    envelope, envelope_json = await handoffs.sender.prepare(
                        self.task, decision, self.acting_for
                    )
            except GateRefused as exc:
                self.finish(Failed(str(exc)))
                return
            with tracing.span("a2a.checkpoint", "a2a.handoff_id", envelope.handoff_id):
                await self._checkpoint(envelope, envelope_json)

    def _decided(self, decision: Handoff) -> None:
        """A human agent's task returns an operator's decision (or the fallback's): the
        escalation is decided — or timed out —, its wait a span."""
        said = decision.context.get("decision")
        by = said.get("by") if isinstance(said, dict) else None
        handoff = ext_metadata(self.task).get("handoff") or {}
        event = "timed_out" if by == "fallback" else "decided"
        events.escalation_decided(
            event, self.task.id, self.task.context_id, str(handoff.get("handoffId") or ""),
            str(handoff.get("traceId") or "") or None, verdict=said.get("verdict")
            if isinstance(said, dict) else None,
        )  # fmt: skip
        created = self.committed.created_at if self.committed is not None else None
        if created:
            start = int(parse_time(created).timestamp() * 1e9)
            with tracing.adopted(str(handoff.get("traceId") or "")):
                tracing.record_span("a2a.escalation_wait", start, **{"a2a.task_id": self.task.id})

    async def _checkpoint(self, envelope: HandoffEnvelope, envelope_json: str) -> None:
        handoffs = self.host.handoffs
        if self.committed is None and not self.writing and not self.host.store.shared:
            # Nothing written yet (a handler that handed off at once): create the task and
            # checkpoint the handoff in ONE transaction — one commit fewer on the path.
            self.handing_off = True
            task, event, entry = handoffs.sender.handing_off(
                self.task, envelope, envelope_json, self.owner
            )
            try:
                created = await self.create_with(task, event, entry)
            except Exception as exc:
                log.exception("handoff checkpoint of new task %s failed", self.task.id)
                self.abort(InternalError(f"the handoff could not be checkpointed: {exc}"))
                return
            if created:
                events.handoff_step(envelope, "checkpointed")
                job = DeliveryJob(entry, True, envelope, self.committed)
                handoffs.outbox.spawn(job, self.settle)
            return
        await self.drain()
        if self.pending or self.committed is None or self.settled.done():
            self.finish(Failed("the task could not be stored before the handoff"))
            return
        self.handing_off = True
        try:
            record, entry = await handoffs.sender.checkpoint(
                self.committed, envelope, envelope_json
            )
        except Exception as exc:
            log.exception("handoff checkpoint of task %s failed", self.task.id)
            self.abort(InternalError(f"the handoff could not be checkpointed: {exc}"))
            return
        self.committed = record
        self.task = record.task
        events.handoff_step(envelope, "checkpointed")
        handoffs.outbox.spawn(DeliveryJob(entry, True, envelope, record), self.settle)

    @property
    def direct(self) -> bool:
        """Whether a `Reply` can still be a direct Message: a new task, nothing written, no
        task state emitted by the handler."""
        return self.unwritten and not self.spoke and self.start is None and self.envelope is None

    def _message(self, reply: Reply) -> Message:
        """The agent's reply as a Message (in the task's context, bound to it if it exists)."""
        return Message(
            message_id=new_id(),
            role=Role.AGENT,
            parts=reply.all_parts(),
            context_id=self.task.context_id,
            task_id=None if self.direct else self.task.id,
        )

    def finish(self, outcome: Outcome | None) -> None:
        """End the step as `outcome` says (None completes the task)."""
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
            case Reply():  # the task exists already: the reply completes it
                self.emit_state(TaskState.COMPLETED, self._message(outcome))
            case Handoff() | Escalate():
                raise TypeError("a handoff is carried out by the driver, not finish()")
            case _:
                raise TypeError(f"the handler returned {type(outcome).__name__}, not an outcome")

    def emit_state(self, state: TaskState, message: Message | None = None) -> None:
        task = with_status(self.task, state, message)
        self.emit(task, status_event(task))

    async def _on_status(self, text: str) -> None:
        self.spoke = True
        self.emit_state(TaskState.WORKING, agent_message(text, self.task))

    async def _on_artifact(self, artifact: Artifact) -> None:
        self.spoke = True
        task = self.task.model_copy(update={"artifacts": [*(self.task.artifacts or []), artifact]})
        self.emit(
            task,
            StreamResponse(
                artifact_update=TaskArtifactUpdateEvent(
                    task_id=task.id, context_id=task.context_id, artifact=artifact
                )
            ),
        )

    async def _on_chunk(self, chunk: Artifact, append: bool, last_chunk: bool) -> None:
        """An artifact (or a piece of one) with an id the handler chose: appended to the
        artifact of that id, or replacing it; the event carries just the chunk."""
        self.spoke = True
        artifacts = list(self.task.artifacts or [])
        index = next(
            (i for i, a in enumerate(artifacts) if a.artifact_id == chunk.artifact_id), None
        )
        if append and index is None:
            raise ValueError(f"append: this task has no artifact {chunk.artifact_id!r}")
        if index is None:
            artifacts.append(chunk)
        else:
            artifacts[index] = appended(artifacts[index], chunk) if append else chunk
        task = self.task.model_copy(update={"artifacts": artifacts})
        self.emit(
            task,
            StreamResponse(
                artifact_update=TaskArtifactUpdateEvent(
                    task_id=task.id,
                    context_id=task.context_id,
                    artifact=chunk,
                    append=append or None,
                    last_chunk=last_chunk,
                )
            ),
        )
