"""Handing a task off: a handoff its handler returned (or a blocking escalation, a handoff to
the human agent), or one it makes and waits for (`ctx.handoffs.hand_off`, through
`RunHandoffs`, the run's `task_port.HandoffPort`): gated, checkpointed, then given to the
outbox, which settles the task.

Invariants:
- the handoff is checkpointed before anything is sent — in one place (`_checkpointed`), for
  both — and from the checkpoint on the run is HANDING_OFF (not cancelable) until the
  delivery settles the task, or gives it back to a handler that waits;
- the journal goes on from the checkpoint's record (`Journal.adopt`): nothing here writes
  its fields.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Protocol

from a2a_handoff.errors import GateRefused, InternalError, RpcError
from a2a_handoff.handoff.envelope import HandoffEnvelope
from a2a_handoff.handoff.handoffs import Handoffs
from a2a_handoff.handoff.job import DeliveryJob
from a2a_handoff.observe import events, tracing
from a2a_handoff.outcomes import Failed, Handoff, Outcome, Route
from a2a_handoff.protocol.extension import ext_metadata
from a2a_handoff.protocol.models import parse_time
from a2a_handoff.runtime.journal import Journal
from a2a_handoff.runtime.phases import Phase
from a2a_handoff.stores.base import TaskRecord

log = logging.getLogger("a2a_handoff.runtime")

NOT_STORED = "the task could not be stored before the handoff"


class Handing(Protocol):
    """What handing off needs from the run (`runtime.run.TaskRun`)."""

    journal: Journal

    @property
    def phase(self) -> Phase: ...

    @property
    def handoffs(self) -> Handoffs: ...

    @property
    def acting_for(self) -> str: ...

    def advance(self, phase: Phase) -> None: ...

    def speak(self) -> None: ...


class Ending(Handing, Protocol):
    """What carrying out a returned handoff needs besides: ending the step without one."""

    def finish(self, outcome: Outcome | None) -> None: ...

    def abort(self, error: RpcError | None, answer: TaskRecord | None = None) -> None: ...


class RunHandoffs:
    """A run's handoffs as its handler makes them (`ctx.handoffs`)."""

    def __init__(self, run: Handing) -> None:
        self.run = run

    def route_names(self) -> list[str]:
        return self.run.handoffs.sender.route_names()

    async def route(self, name: str, kind: str) -> Route:
        return await self.run.handoffs.sender.route(name, kind)

    async def refusal(self, decision: Handoff) -> str | None:
        return await self.run.handoffs.sender.refusal(self.run.journal.task, decision)

    async def hand_off(self, decision: Handoff) -> str | None:
        """Checkpoint the handoff and wait for its delivery's answer: the reason it was
        refused (the task WORKING again, the handler going on), or None: handed over."""
        run = self.run
        if run.phase is Phase.HANDED_OVER:
            raise RuntimeError("this task was handed off already")
        sender = run.handoffs.sender
        try:
            envelope, envelope_json = await sender.prepare(
                run.journal.task, decision, run.acting_for
            )
        except GateRefused as exc:
            return str(exc)
        refusal = sender.loop_refusal(envelope)
        if refusal is not None:
            return refusal
        run.speak()  # the task is written now: no direct Message after this
        try:
            delivery = await _checkpointed(run, envelope, envelope_json, reopen=True)
        except BaseException:
            if run.phase is Phase.HANDING_OFF:
                run.advance(Phase.SPEAKING)
            raise
        if delivery is None:
            raise InternalError(NOT_STORED)
        try:
            final = await asyncio.shield(delivery)
        except Exception:
            final = None  # left pending: the outbox replays it and settles the task
        if final is not None and not final.state.terminal:
            run.journal.adopt(final)
            run.advance(Phase.SPEAKING)
            refused = ext_metadata(final.task).get("refused") or {}
            return str(refused.get("reason") or "the handoff was refused")
        run.advance(Phase.HANDED_OVER)
        return None


async def hand_off(run: Ending, decision: Handoff) -> None:
    """Carry out the handoff `decision` the handler returned."""
    if decision.kind == "return":
        _decided(run, decision)
    # In the chain's trace (a return is prepared while answering the operator's message)
    chain = (ext_metadata(run.journal.task).get("handoff") or {}).get("traceId")
    with tracing.adopted(chain):
        try:
            with tracing.span("a2a.gate", "a2a.target", decision.target):
                envelope, envelope_json = await run.handoffs.sender.prepare(
                    run.journal.task, decision, run.acting_for
                )
        except GateRefused as exc:
            run.finish(Failed(str(exc)))
            return
        with tracing.span("a2a.checkpoint", "a2a.handoff_id", envelope.handoff_id):
            try:
                delivery = await _checkpointed(run, envelope, envelope_json, reopen=False)
            except Exception as exc:
                log.exception("handoff checkpoint of task %s failed", run.journal.task.id)
                run.abort(InternalError(f"the handoff could not be checkpointed: {exc}"))
                return
            if delivery is None:
                run.finish(Failed(NOT_STORED))


async def _checkpointed(
    run: Handing, envelope: HandoffEnvelope, envelope_json: str, *, reopen: bool
) -> asyncio.Task[TaskRecord | None] | None:
    """Checkpoint the handoff — its outbox entry and the task marked as handing off, one
    transaction — and give it to the outbox, which settles the task: the delivery (`reopen`:
    a handler waits for it, and takes the task back when the target refuses). None when
    what the step emitted could not be stored first: nothing checkpointed, the phase as it
    was. A checkpoint that fails raises, the run left HANDING_OFF."""
    journal, handoffs = run.journal, run.handoffs
    record = await journal.written()
    if record is None:
        return None
    run.advance(Phase.HANDING_OFF)
    record, entry = await handoffs.sender.checkpoint(record, envelope, envelope_json)
    journal.adopt(record)
    events.handoff_step(envelope, "checkpointed")
    job = DeliveryJob(entry, True, envelope, record, reopen)
    return handoffs.outbox.spawn(job, journal.settle)


def _decided(run: Ending, decision: Handoff) -> None:
    """A human agent's task returns an operator's decision (or the fallback's): the
    escalation is decided — or timed out —, its wait a span."""
    task = run.journal.task
    said = decision.context.get("decision")
    by = said.get("by") if isinstance(said, dict) else None
    handoff = ext_metadata(task).get("handoff") or {}
    event = "timed_out" if by == "fallback" else "decided"
    events.escalation_decided(
        event,
        task.id,
        task.context_id,
        str(handoff.get("handoffId") or ""),
        str(handoff.get("traceId") or "") or None,
        verdict=said.get("verdict") if isinstance(said, dict) else None,
    )
    committed = run.journal.committed
    created = committed.created_at if committed is not None else None
    if created:
        start = int(parse_time(created).timestamp() * 1e9)
        with tracing.adopted(str(handoff.get("traceId") or "")):
            tracing.record_span("a2a.escalation_wait", start, **{"a2a.task_id": task.id})
