"""A handoff a handler returned (or a blocking escalation, a handoff to the human agent):
gated, checkpointed, then given to the outbox, which settles the task.

Invariant: the handoff is checkpointed before anything is sent; from the checkpoint on the
run is HANDING_OFF (not cancelable) until the delivery settles the task.
"""

from __future__ import annotations

import logging
from typing import Protocol

from a2a_handoff.errors import GateRefused, InternalError, RpcError
from a2a_handoff.handoff.envelope import HandoffEnvelope
from a2a_handoff.handoff.job import DeliveryJob
from a2a_handoff.observe import events, tracing
from a2a_handoff.outcomes import Failed, Handoff, Outcome
from a2a_handoff.protocol.extension import ext_metadata
from a2a_handoff.protocol.models import parse_time
from a2a_handoff.runtime.phases import Phase
from a2a_handoff.runtime.port import Speaker
from a2a_handoff.stores.base import Store, TaskRecord

log = logging.getLogger("a2a_handoff.runtime")


class Ending(Speaker, Protocol):
    """What carrying out a handoff needs from the run (`runtime.run.TaskRun`)."""

    @property
    def store(self) -> Store: ...

    def finish(self, outcome: Outcome | None) -> None: ...

    def abort(self, error: RpcError | None, answer: TaskRecord | None = None) -> None: ...


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
            await _checkpoint(run, envelope, envelope_json)


def _decided(run: Ending, decision: Handoff) -> None:
    """A human agent's task returns an operator's decision (or the fallback's): the
    escalation is decided — or timed out —, its wait a span."""
    task = run.journal.task
    said = decision.context.get("decision")
    by = said.get("by") if isinstance(said, dict) else None
    handoff = ext_metadata(task).get("handoff") or {}
    event = "timed_out" if by == "fallback" else "decided"
    events.escalation_decided(
        event, task.id, task.context_id, str(handoff.get("handoffId") or ""),
        str(handoff.get("traceId") or "") or None, verdict=said.get("verdict")
        if isinstance(said, dict) else None,
    )  # fmt: skip
    committed = run.journal.committed
    created = committed.created_at if committed is not None else None
    if created:
        start = int(parse_time(created).timestamp() * 1e9)
        with tracing.adopted(str(handoff.get("traceId") or "")):
            tracing.record_span("a2a.escalation_wait", start, **{"a2a.task_id": task.id})


async def _checkpoint(run: Ending, envelope: HandoffEnvelope, envelope_json: str) -> None:
    journal, handoffs = run.journal, run.handoffs
    await journal.drain()
    if journal.pending or journal.committed is None or journal.settled.done():
        run.finish(Failed("the task could not be stored before the handoff"))
        return
    run.advance(Phase.HANDING_OFF)
    try:
        record, entry = await handoffs.sender.checkpoint(journal.committed, envelope, envelope_json)
    except Exception as exc:
        log.exception("handoff checkpoint of task %s failed", journal.task.id)
        run.abort(InternalError(f"the handoff could not be checkpointed: {exc}"))
        return
    journal.committed = record
    journal.task = record.task
    events.handoff_step(envelope, "checkpointed")
    handoffs.outbox.spawn(DeliveryJob(entry, True, envelope, record), journal.settle)
