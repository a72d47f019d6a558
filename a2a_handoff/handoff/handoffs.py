"""One agent's handoff machinery, wired to its store and client.

    sender (summarize, gate, checkpoint) ─▶ outbox (deliver once, replay) ─▶ delivery
    (sign, create on the target, recovery paths) ─▶ terminate;
    receiver (verify → VerifiedEnvelope, refuse, dedupe) + ledger

The runtime holds one `Handoffs` and calls its parts; nothing here knows the runtime.
"""

from __future__ import annotations

from dataclasses import dataclass

from a2a_handoff.client.client import AgentClient
from a2a_handoff.handoff.delivery import Delivery
from a2a_handoff.handoff.ledger import Ledger
from a2a_handoff.handoff.notice import Notices
from a2a_handoff.handoff.receiver import HandoffReceiver
from a2a_handoff.handoff.recovery import LeaseHolder, Outbox
from a2a_handoff.handoff.sender import HandoffSender
from a2a_handoff.handoff.settings import HandoffSettings
from a2a_handoff.handoff.subtask import SubTasks
from a2a_handoff.handoff.withdraw import Withdrawal
from a2a_handoff.stores.base import Store
from a2a_handoff.trust.agent_trust import AgentTrust


@dataclass(frozen=True, slots=True)
class Handoffs:
    """The parts of one agent's handoffs."""

    settings: HandoffSettings
    sender: HandoffSender
    delivery: Delivery
    outbox: Outbox
    receiver: HandoffReceiver
    ledger: Ledger
    trust: AgentTrust
    subtasks: SubTasks  # delegations: sub-tasks created and followed at their delegates
    withdrawal: Withdrawal  # a cancel of a task being handed off
    notices: Notices  # non-blocking escalations (`ctx.escalation.inform`)

    @classmethod
    def build(
        cls,
        settings: HandoffSettings,
        store: Store,
        client: AgentClient,
        hold: LeaseHolder,
        trust: AgentTrust,
    ) -> Handoffs:
        """Wire the parts; `hold` takes a lease, for delivering under replicas; `trust`
        signs what is sent and proves what is received."""
        sender = HandoffSender(settings, store, client, trust)
        delivery = Delivery(settings, store, client, sender, trust)
        return cls(
            settings,
            sender,
            delivery,
            Outbox(settings, store, delivery, hold),
            HandoffReceiver(settings, store, trust.trust_list),
            Ledger(store),
            trust,
            SubTasks(client, trust, settings.retry_interval),
            Withdrawal(store, client, trust),
            Notices(client, trust, settings.retry_interval),
        )

    async def aclose(self) -> None:
        await self.outbox.aclose()
        await self.ledger.aclose()
