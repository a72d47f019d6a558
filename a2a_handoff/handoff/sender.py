"""The sending side's first phases: summarize, gate, checkpoint.

Summarize: the handler's `Handoff` decision becomes a `HandoffEnvelope` (its idempotency key
derived from the chain's root key and the hop, so a replay reproduces it), kept as canonical
JSON (RFC 8785: what delivery signs); a `return` carries its operator decision signed by this
agent. The target is a route or a trusted agent, by name: an agent calls only URLs it was
configured with, never one a message named. Gate:
`required ⊆ caps(target) ∩ scope(self)`, the edge's contract (when contracts are on) and the
envelope's size limit; a refusal raises GateRefused and nothing is sent. Checkpoint: ONE
transaction writes the outbox entry (`pending`) and marks the source task as handing off —
if it fails, nothing is sent. Delivery (create, terminate) is `delivery.Delivery`'s.
"""

from __future__ import annotations

import contextlib
import uuid
from typing import Any

from pydantic import ValidationError

from a2a_handoff.canonical import canonical
from a2a_handoff.client.client import AgentClient
from a2a_handoff.errors import GateRefused, HandoffError
from a2a_handoff.escalation import decision_claims
from a2a_handoff.failpoints import failpoint
from a2a_handoff.handoff.envelope import (
    HandoffEnvelope,
    TargetRef,
    derive_key,
    root_key_for,
)
from a2a_handoff.handoff.settings import HandoffSettings
from a2a_handoff.ids import new_id
from a2a_handoff.observe import events, tracing
from a2a_handoff.outcomes import Handoff, Route
from a2a_handoff.protocol.agent_card import AgentCard
from a2a_handoff.protocol.extension import (
    HANDING_OFF,
    HANDOFF_EXTENSION_URI,
    MAX_ENVELOPE_BYTES,
    ext_metadata,
)
from a2a_handoff.protocol.models import StreamResponse, Task, TaskStatus, utc_now
from a2a_handoff.protocol.shallow import copied
from a2a_handoff.protocol.states import TaskState, transition
from a2a_handoff.protocol.steps import agent_message, status_event
from a2a_handoff.stores.base import Commit, OutboxEntry, Store, TaskRecord
from a2a_handoff.trust.agent_trust import AgentTrust
from a2a_handoff.trust.signing import DECISION_TYP, sign_claims

_status = TaskStatus.__pydantic_validator__.validate_python  # from one dict (`protocol.steps`)
_validated_envelope = HandoffEnvelope.__pydantic_validator__.validate_python

PENDING, DONE, FAILED = "pending", "done", "failed"


def missing_capabilities(
    required: list[str], card: AgentCard | None, scope: frozenset[str] | None
) -> list[str]:
    """What `required ⊆ caps(target) ∩ scope(source)` lacks, described."""
    problems = []
    if scope is not None:
        outside = sorted(set(required) - scope)
        if outside:
            problems.append(f"outside this agent's scope: {', '.join(outside)}")
    if card is not None:
        lacking = sorted(set(required) - card.offered)
        if lacking:
            problems.append(f"not offered by {card.name}: {', '.join(lacking)}")
    return problems


def check_return(task: Task, target: str, target_name: str) -> None:
    """An operator's decision goes back only to the agent its escalation is to return to
    (`escalation.returnsTo`, recorded from the verified envelope when it arrived): the agent
    that escalated, or the one a forwarding human desk named. GateRefused otherwise."""
    escalation = ext_metadata(task).get("escalation")
    returns_to = escalation.get("returnsTo") if isinstance(escalation, dict) else None
    agent = str(returns_to.get("agent") or "") if isinstance(returns_to, dict) else ""
    if not agent:
        raise GateRefused(
            "a decision goes back only to an agent that escalated: this task holds no escalation"
        )
    if agent not in (target, target_name):
        raise GateRefused(
            f"a decision goes back only to {agent}, which escalated (not to {target})"
        )


class HandoffSender:
    """Turns a handler's handoff decision into a checkpointed outbox entry."""

    def __init__(
        self, settings: HandoffSettings, store: Store, client: AgentClient, trust: AgentTrust
    ) -> None:
        self.settings = settings
        self.store = store
        self.client = client
        self.trust = trust

    def target_url(self, target: str) -> str:
        """The configured URL of `target`: a route, or an agent on the trust list, by name
        (a URL is accepted only when it is one of those). Never a URL from elsewhere."""
        url = self.settings.routes.get(target)
        trusted = self.trust.trust_list
        if url is None and (agent := trusted.get(target)) is not None:
            url = agent.url
        if url is None and target.startswith(("http://", "https://")):
            configured = {*self.settings.routes.values(), *(a.url for a in trusted.agents.values())}
            if target in configured or trusted.by_url(target) is not None:
                url = target
        if url is None:
            raise GateRefused(
                f"no route to agent {target!r}: an agent hands off only to agents it was"
                " configured with (its routes and trust list)"
            )
        return url

    def route_names(self) -> list[str]:
        """The routes this agent was configured with, by name."""
        return sorted(self.settings.routes)

    async def route(self, name: str, kind: str = "handoff") -> Route:
        """The route `name`: its card (one try, cached) and the contract of the edge to it."""
        url = self.target_url(name)
        card: AgentCard | None = None
        with contextlib.suppress(HandoffError, ValidationError):
            card = await self.client.card(url, retry=False)
        catalog = self.settings.contracts
        contract = None
        if catalog is not None:
            contract = catalog.for_edge(self.settings.agent_name, card.name if card else name, kind)
        return Route(name, url, card, contract)

    async def refusal(self, task: Task, decision: Handoff) -> str | None:
        """Why `decision` would be refused — by the gate, the edge's contract or the target's
        loop guard — found without sending or writing anything; None: it would go.

        A handler asks before it returns the handoff, so that it may choose again (a model
        given the refusal as its tool's result). The gate runs again when the handoff is
        returned: a card that changed in between still refuses it then, failing the task.
        """
        try:
            envelope, _ = await self.prepare(task, decision)
        except GateRefused as exc:
            return str(exc)
        return self.loop_refusal(envelope)

    def loop_refusal(self, envelope: HandoffEnvelope) -> str | None:
        """The target's loop guard, asked here: it would refuse an envelope naming it in
        `visited` (a handoff), or past the hop limit (this agent's: the usual one)."""
        target = envelope.target.agent
        if envelope.kind == "handoff" and target in envelope.visited:
            return f"loop_detected: {target} already handled this chain ({envelope.visited})"
        if envelope.hop > self.settings.max_hops:
            return f"loop_detected: hop {envelope.hop} over the maximum {self.settings.max_hops}"
        return None

    async def prepare(
        self, task: Task, decision: Handoff, on_behalf_of: str = "", key_salt: str = ""
    ) -> tuple[HandoffEnvelope, str]:
        """Summarize and gate: the envelope and its JSON. Raises GateRefused with the reason
        the task fails with.

        `key_salt` sets apart keys of messages that do not end the task (notices).
        """
        url = self.target_url(decision.target)
        card = await self._gate(url, decision)
        target_name = card.name if card else decision.target
        context = dict(decision.context)
        if decision.kind == "return":
            check_return(task, decision.target, target_name)
        if decision.kind == "return" and isinstance(context.get("decision"), dict):
            context["decision"] = self._signed_decision(context["decision"], task, target_name)
        envelope = self._envelope(
            task,
            decision,
            TargetRef(agent=target_name, url=url),
            context,
            on_behalf_of=on_behalf_of,
            key_salt=key_salt,
        )
        return envelope, signable_json(envelope)

    async def _gate(self, url: str, decision: Handoff) -> AgentCard | None:
        """The target's card (None: unreachable, gated later), once it shows every capability
        the handoff requires; GateRefused with what is missing otherwise."""
        required = sorted(decision.required)
        card: AgentCard | None = None
        with contextlib.suppress(HandoffError, ValidationError):  # unreachable: gate later
            card = await self.client.card(url, retry=False)
        problems = missing_capabilities(required, card, self.settings.scope)
        if problems and card is not None and missing_capabilities(required, card, None):
            # The card may be stale (cached): a target restarted with new capabilities is
            # seen at once. Read it again, once, before refusing.
            with contextlib.suppress(HandoffError, ValidationError):
                card = await self.client.card(url, fresh=True, retry=False)
            problems = missing_capabilities(required, card, self.settings.scope)
        if problems:
            raise GateRefused("capability gate refused the handoff: " + "; ".join(problems))
        return card

    def _envelope(
        self,
        task: Task,
        decision: Handoff,
        target: TargetRef,
        context: dict[str, Any],
        *,
        on_behalf_of: str,
        key_salt: str,
    ) -> HandoffEnvelope:
        """The envelope of this hop: keyed under the chain's root, traced as its task."""
        incoming = ext_metadata(task).get("handoff") or {}
        hop = int(incoming.get("hop", 0)) + 1
        root = str(incoming.get("rootKey") or root_key_for(self.settings.agent_url, task.id))
        # Validated from a dict, the source's members too: a quarter fewer instructions than
        # the same models built by their constructors.
        envelope: HandoffEnvelope = _validated_envelope(
            {
                "handoff_id": new_id(),
                "idempotency_key": derive_key(root, hop, key_salt),
                "root_key": root,
                "context_id": task.context_id,
                "source": {
                    "agent": self.settings.agent_name,
                    "url": self.settings.agent_url,
                    "task_id": task.id,
                },
                "target": target,
                "reason": decision.reason,
                "transfer_context": context,
                "required_capabilities": sorted(decision.required),
                "continuation_token": decision.continuation_token,
                "next_skill_hint": decision.next_skill,
                "hop": hop,
                "visited": [*incoming.get("visited", []), self.settings.agent_name],
                "trace_id": str(
                    incoming.get("traceId") or tracing.trace_of(task.id) or uuid.uuid4().hex
                ),
                "created_at": utc_now(),
                "ttl_seconds": self.settings.ttl_seconds,
                "on_behalf_of": on_behalf_of or None,
                "kind": decision.kind,
                "contract": self._contract_for(target.agent, decision),
            }
        )
        return envelope

    def _signed_decision(
        self, decision: dict[str, Any], task: Task, audience: str
    ) -> dict[str, Any]:
        """An operator's decision as it returns: with its claims signed by this agent."""
        claims = decision_claims(
            decision,
            issuer=self.settings.agent_name,
            audience=audience,
            escalation_task=task.id,
            decision_id=new_id(),
            ttl=self.settings.decision_ttl,
        )
        signed = sign_claims(claims, self.trust.signing_key, DECISION_TYP)
        return {**decision, "signed": signed}

    def _contract_for(self, target: str, decision: Handoff) -> str | None:
        """The `id@version` of the edge's contract; GateRefused when contracts are on and
        there is none, or the transfer context breaks it (nothing is sent)."""
        catalog = self.settings.contracts
        if catalog is None:
            return None
        me = self.settings.agent_name
        contract = catalog.for_edge(me, target, decision.kind)
        if contract is None:
            raise GateRefused(f"no handoff contract for the edge {me} → {target}")
        problems = catalog.outbound(contract, decision.context, target)
        if problems:
            raise GateRefused(
                f"contract {contract.id} refused the transfer context: " + "; ".join(problems)
            )
        return f"{contract.id}@{contract.version or ''}"

    @staticmethod
    def handing_off(
        task: Task, envelope: HandoffEnvelope, envelope_json: str, owner: str
    ) -> tuple[Task, StreamResponse, OutboxEntry]:
        """The task marked as handing off, the event saying so, and its outbox entry."""
        target = envelope.target
        note = agent_message(f"Handing off to {target.agent}: {envelope.reason}", task)
        if task.status.state is not TaskState.WORKING:
            transition(task.status.state, TaskState.WORKING)
        # One copy (history, extension metadata and status at once): `with_ext_metadata`'s
        # merge, written out.
        ext = {k: v for k, v in ext_metadata(task).items() if k != "delivery"}  # a former try's
        ext = {**ext, "state": HANDING_OFF, "handoffId": envelope.handoff_id}
        task = copied(
            task,
            {
                "history": [*(task.history or []), note],
                "metadata": {**(task.metadata or {}), HANDOFF_EXTENSION_URI: ext},
                # Every member new: built, not copied (a third of the instructions).
                "status": _status(
                    {"state": TaskState.WORKING, "message": note, "timestamp": utc_now()}
                ),
            },
        )
        now = utc_now()
        entry = OutboxEntry(
            handoff_id=envelope.handoff_id,
            task_id=task.id,
            context_id=task.context_id,
            owner=owner,
            target_name=target.agent,
            target_url=target.url,
            envelope=envelope_json,
            status=PENDING,
            detail="",
            created_at=now,
            updated_at=now,
        )
        event = status_event(task, {HANDOFF_EXTENSION_URI: ext_metadata(task)})
        return task, event, entry

    async def checkpoint(
        self, record: TaskRecord, envelope: HandoffEnvelope, envelope_json: str
    ) -> tuple[TaskRecord, OutboxEntry]:
        """ONE transaction: the outbox entry and the task marked as handing off."""
        task, event, entry = self.handing_off(record.task, envelope, envelope_json, record.owner)
        updated = record.advanced(task, 1, utc_now())
        await self.store.commit(
            Commit(updated, [event], expected_version=record.version, outbox=entry)
        )
        failpoint("handoff.after_checkpoint")
        events.committed_items(task.id, task.context_id, [event], record.task.status.state)
        return updated, entry


def signable_json(envelope: HandoffEnvelope) -> str:
    """The envelope's canonical JSON (delivery signs these very bytes); GateRefused when it
    cannot be signed or is over `MAX_ENVELOPE_BYTES`."""
    try:
        envelope_json = canonical(envelope.dump()).decode()
    except ValueError as exc:
        raise GateRefused(f"the transfer context cannot be signed: {exc}") from None
    size = len(envelope_json.encode())
    if size > MAX_ENVELOPE_BYTES:
        raise GateRefused(
            f"transfer context too large: the envelope is {size} bytes,"
            f" the limit {MAX_ENVELOPE_BYTES}"
        )
    return envelope_json
