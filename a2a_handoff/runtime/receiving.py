"""Receiving a handoff: the task manager's side of `handoff.receiver`'s decisions.

Invariant: a received handoff is proven first (signature, trust list, caller:
`handoff.verified`), then refused, recognised as a replay, or created once per key in the
tenant it is received in (`owner`'s), across replicas too (the decisions are
`handoff.receiver`'s; this module acts on them).
"""

from __future__ import annotations

import asyncio

from a2a_handoff.handoff.handoffs import Handoffs
from a2a_handoff.handoff.receiver import Duplicate, Refuse
from a2a_handoff.handoff.verified import EnvelopeRefused, VerifiedEnvelope
from a2a_handoff.observe import events, tracing
from a2a_handoff.protocol.extension import WITHDRAW_KEY
from a2a_handoff.protocol.models import Message
from a2a_handoff.runtime.creating import TaskCreator
from a2a_handoff.runtime.submission import Submission, resolved
from a2a_handoff.stores.records import owner_tenant


class HandoffIntake:
    """Turns a message carrying a handoff envelope into its task (or its refusal)."""

    def __init__(self, handoffs: Handoffs, creator: TaskCreator) -> None:
        self.handoffs = handoffs
        self.creator = creator

    async def receive(self, message: Message, owner: str) -> Submission:
        """A handoff: refused (REJECTED) or created at most once per idempotency key."""
        assert message.metadata is not None
        receiver = self.handoffs.receiver
        try:  # proven before anything else: nothing unverified goes further
            verified = await receiver.verify(message.metadata, owner)
        except EnvelopeRefused as refused:
            answer = await receiver.refuse_unverified(message, owner, refused)
            events.handoff_received(
                refused.envelope,
                answer.id,
                f"rejected:{refused.code}",
                refused.reason,
                verified=False,
            )
            return resolved(answer)
        envelope = verified.envelope
        withdraw = message.metadata.get(WITHDRAW_KEY) is True  # from the proven sender only
        with tracing.adopted(envelope.trace_id):
            return await self._receive_verified(owner, verified, withdraw)

    async def _receive_verified(
        self, owner: str, verified: VerifiedEnvelope, withdraw: bool
    ) -> Submission:
        """Act on the receiver's one decision: answer a replay with its task, store a
        refusal, or create the task (once per key, across replicas too)."""
        receiver = self.handoffs.receiver
        busy = self.creator.runs.creating.__contains__
        decision = await receiver.decide(verified, busy, withdraw, owner_tenant(owner))
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
            answer = self.creator.start(decision.message, owner, decision.key, accepted=decision)
            record = await asyncio.shield(answer.created)
            # Another replica may have created it first: then it is that one's task.
            outcome = "accepted" if record.id == answer.task_id else "duplicate"
        envelope = verified.envelope
        if outcome == "duplicate":
            self.handoffs.ledger.duplicate(envelope, record.id)
        events.handoff_received(envelope, record.id, outcome, detail)
        return answer
