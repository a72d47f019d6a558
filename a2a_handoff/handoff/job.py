"""One delivery of an outbox entry, as a value: what the outbox hands the delivery.

A job is made where a handoff is checkpointed (`fresh`: this process wrote the entry and still
holds its envelope and source record) or replayed from the store (only the entry). A
contract's recovery path ends one job by checkpointing the next, which the outbox delivers in
turn: the chain is a queue of jobs, never a recursion.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from a2a_handoff.canonical import canonical
from a2a_handoff.handoff.envelope import HandoffEnvelope
from a2a_handoff.stores.base import OutboxEntry, TaskRecord


@dataclass(frozen=True, slots=True)
class DeliveryJob:
    """Deliver `entry`: create its successor on the target, then terminate the source.

    `fresh`: this process checkpointed the entry, so no earlier attempt can have reached the
    target (a contract's `on_timeout` may then follow). `envelope`: the entry's envelope,
    when the caller holds it already. `source`: the source task's record as last written,
    tried first when terminating (check-and-set: a stale one costs a read, never a lost
    update). `reopen`: a handler waits for this delivery (`ctx.handoffs.hand_off`): a refusal
    that would fail the task back to the source reopens it instead, for the handler to
    choose again. A replay after a crash has no handler waiting: it never reopens.
    """

    entry: OutboxEntry
    fresh: bool = False
    envelope: HandoffEnvelope | None = None
    source: TaskRecord | None = None
    reopen: bool = False

    @property
    def handoff_id(self) -> str:
        return self.entry.handoff_id

    @property
    def trace_id(self) -> str:
        """The handoff's trace (its envelope's `traceId`), or "" when the entry has none."""
        if self.envelope is not None:
            return self.envelope.trace_id
        try:
            return str(json.loads(self.entry.envelope).get("traceId") or "")
        except (ValueError, AttributeError):
            return ""

    def opened(self) -> tuple[HandoffEnvelope, str]:
        """The envelope and the JSON that is signed and sent: as held, or — a replay — the
        entry as stored (by any version: canonicalized)."""
        if self.envelope is not None:
            return self.envelope, self.entry.envelope
        envelope = HandoffEnvelope.model_validate_json(self.entry.envelope)
        return envelope, canonical(json.loads(self.entry.envelope)).decode()
