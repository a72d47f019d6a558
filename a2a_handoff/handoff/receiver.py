"""The receiving side: a handoff that arrives is refused, recognised as a replay, or taken.

In order: the envelope is parsed (a malformed one is -32602, nothing stored) and proven
(`handoff.verified`: signature, trust list, caller — a refusal there is answered REJECTED and
leaves only its ledger row); its dedupe key is looked up first — a replay of a key already
taken returns the same task (`duplicate`) whatever its age, so a lost reply can never turn
into a second task or a false failure, and the same key with a different envelope is -32103;
then the refusals, each a REJECTED task whose reason the sender reads: its sender withdrew
it (`withdrawn`, see `protocol.extension.WITHDRAW_KEY`), TTL (`envelope_expired`), size,
address, loop guard, contract acceptance. Otherwise the runtime creates the task, once per
key, with the ledger row in the same transaction. A handoff is received in the tenant its
message names (the sender addresses the one the receiver's card names): its task is stored
under the sender's principal within that tenant, its user (`onBehalfOf`) shares it within
that tenant only, and every key it dedupes or is decided on is kept per tenant
(`stores.records.tenant_key`) — the same envelope sent in two tenants is two handoffs, never
one tenant's task answered in another. The runtime drives these steps
(`runtime.tasks.TaskManager`); this module decides them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields, replace
from operator import attrgetter
from typing import Any

from a2a_handoff.contracts.contract import MISSING, lookup
from a2a_handoff.errors import HandoffProcessingError, IdempotencyConflictError
from a2a_handoff.handoff.ledger import received_entry
from a2a_handoff.handoff.settings import HandoffSettings
from a2a_handoff.handoff.verified import EnvelopeRefused, VerifiedEnvelope, verify
from a2a_handoff.ids import new_id
from a2a_handoff.protocol.extension import (
    HANDOFF_EXTENSION_URI,
    MAX_ENVELOPE_BYTES,
    SIGNATURE_KEY,
    ext_metadata,
)
from a2a_handoff.protocol.models import (
    Message,
    Part,
    Role,
    StreamResponse,
    Task,
    TaskStatus,
    utc_now,
)
from a2a_handoff.protocol.shallow import copied
from a2a_handoff.protocol.states import TaskState
from a2a_handoff.protocol.steps import agent_message, status_event, with_status
from a2a_handoff.stores.base import Commit, ReceivedEntry, Store, TaskRecord
from a2a_handoff.stores.records import owner_principal, owner_tenant, tenant_key, tenant_owner
from a2a_handoff.trust.trustlist import TrustList

_ROW_FIELDS = [f.name for f in fields(ReceivedEntry)]
_ROW_VALUES = attrgetter(*_ROW_FIELDS)  # a row's values, in its fields' order
_TASK_ID = _ROW_FIELDS.index("task_id")


@dataclass(frozen=True, slots=True)
class Accept:
    """Take the handoff: create its task from `message` (signed parts only), deduplicated on
    `key` for `window` seconds (None: ever). The task carries `metadata` (what it records
    about the handoff that created it) and is created in one write with `row`, its ledger
    row (`for_task` fills in the task's id): everything the runtime needs to create it."""

    key: str
    window: float | None
    message: Message
    verified: VerifiedEnvelope
    metadata: dict[str, Any]
    row: ReceivedEntry

    def for_task(self, task_id: str) -> ReceivedEntry:
        """The ledger row of the task `task_id` this handoff creates."""
        values: list[Any] = [*_ROW_VALUES(self.row)]  # `replace(row, task_id=…)`, no walk
        values[_TASK_ID] = task_id
        return ReceivedEntry(*values)


@dataclass(frozen=True, slots=True)
class Duplicate:
    """A replay of a handoff taken already: answer with the task it made."""

    record: TaskRecord


@dataclass(frozen=True, slots=True)
class Refuse:
    """Refuse the handoff: a REJECTED task stored under `key` says `code: reason`."""

    code: str
    reason: str
    key: str
    message: Message


Decision = Accept | Duplicate | Refuse


class HandoffReceiver:
    """Decides what this agent does with a handoff message."""

    def __init__(self, settings: HandoffSettings, store: Store, trust: TrustList) -> None:
        self.settings = settings
        self.store = store
        self.trust = trust
        # target.url → settings.addressed_here(target.url), for these settings
        self._addressed: tuple[HandoffSettings, dict[str, bool]] = (settings, {})

    async def verify(self, metadata: Mapping[str, Any], owner: str) -> VerifiedEnvelope:
        """The message's envelope, proven (see `handoff.verified`) as delivered by `owner`'s
        principal (whatever tenant it names); EnvelopeRefused."""
        verified = await verify(
            metadata.get(HANDOFF_EXTENSION_URI),
            metadata.get(SIGNATURE_KEY),
            owner_principal(owner),
            self.trust,
            self.settings.agent_name,
        )
        if verified.decision is not None and not await self._escalated(verified, owner):
            raise EnvelopeRefused(
                "decision_invalid",
                f"the decision answers no escalation of {self.settings.agent_name}: task"
                f" {verified.decision.escalated_from!r} escalated nothing here",
                verified.envelope,
            )
        return verified

    async def decide(
        self,
        verified: VerifiedEnvelope,
        busy: Callable[[str], bool],
        withdraw: bool = False,
        tenant: str = "",
    ) -> Decision:
        """What to do with a proven handoff, decided once: its key looked up first (a replay
        is a `Duplicate` whatever its age; the same key with another envelope raises -32103),
        then the refusals — `withdraw` (its sender withdraws it: the key refused for good)
        first —, else `Accept`. `busy(key)`: this process is creating the task of that key
        right now — HandoffProcessingError (-32102), which the sender retries. `tenant`:
        the one the handoff is received in, which its keys are kept within."""
        key, window = self.dedupe_for(verified, tenant)
        existing_id = await self.store.find(key)
        record = await self.store.get(existing_id) if existing_id is not None else None
        if busy(key):  # checked after the reads: a creation may have started meanwhile
            raise HandoffProcessingError()
        if record is not None:
            if owner_tenant(record.owner) != tenant:  # never another tenant's task, whatever joins
                raise IdempotencyConflictError(
                    f"the handoff's key {key[:40]!r} names a task of another tenant"
                )
            self.check_replay(record, verified)
            return Duplicate(record)
        message = signed_message(verified)  # nothing unsigned of the message goes further
        if withdraw:
            reason = f"{verified.signer} withdrew this handoff before it was taken"
            return Refuse("withdrawn", reason, key, message)
        refusal = self.refusal(verified)
        if refusal is not None:
            return Refuse(*refusal, key, message)
        row = received_entry(verified.envelope, "", "accepted", "")
        return Accept(key, window, message, verified, receive_metadata(verified), row)

    async def _escalated(self, verified: VerifiedEnvelope, owner: str) -> bool:
        """Whether the decision a `return` carries answers a task of this agent, in the
        conversation it returns to (the task that escalated, or informed the human agent),
        in the tenant it is received in (`owner`'s): an approval acts only where it was
        asked for, never at an agent that escalated nothing, nor in another tenant."""
        assert verified.decision is not None
        task_id = verified.decision.escalated_from
        record = await self.store.get(task_id) if task_id else None
        return (
            record is not None
            and record.task.context_id == verified.envelope.context_id
            and owner_tenant(record.owner) == owner_tenant(owner)
        )

    async def refuse_unverified(
        self, message: Message, owner: str, refused: EnvelopeRefused
    ) -> TaskRecord:
        """The answer to an envelope that is not proven: a REJECTED task, not stored — only
        the ledger row is — carrying nothing of the envelope but its context id."""
        claimed = refused.envelope
        task_id = new_id()
        task = Task(
            id=task_id,
            context_id=claimed.context_id,
            status=TaskStatus(state=TaskState.SUBMITTED, timestamp=utc_now()),
            metadata={HANDOFF_EXTENSION_URI: {"rejected": refused.code}},
        )
        text = f"{refused.code}: {refused.reason}"
        rejected = with_status(task, TaskState.REJECTED, agent_message(text, task))
        # One bounded row: nothing the sender made up (names, ids of any length) is kept
        # beyond what tells the refusal apart.
        row = received_entry(claimed, task_id, "rejected", refused.code)
        await self.store.record_received(
            replace(row, **{f: _cut(getattr(row, f)) for f in CLAIMED_FIELDS})
        )
        now = utc_now()
        return TaskRecord(rejected, owner, 2, now, now)

    @staticmethod
    def check_replay(record: TaskRecord, verified: VerifiedEnvelope) -> None:
        """A task found by the envelope's key: -32103 when the key came with another envelope."""
        envelope = verified.envelope
        ext = ext_metadata(record.task)
        if verified.decision is not None and ext.get("envelopeDigest") != verified.digest:
            raise IdempotencyConflictError(
                f"the operator's decision {verified.decision.id} was used already"
            )
        same_key = ext.get("handoff", {}).get("idempotencyKey") == envelope.idempotency_key
        if same_key and ext.get("envelopeDigest") != verified.digest:
            raise IdempotencyConflictError(
                f"idempotency key {envelope.idempotency_key[:12]}… was used with a"
                " different envelope"
            )

    def dedupe_for(self, verified: VerifiedEnvelope, tenant: str = "") -> tuple[str, float | None]:
        """The key a received handoff deduplicates on in `tenant`, and for how long (None:
        ever); the same handoff in another tenant has another key (`tenant_key`).

        The envelope's idempotency key, unless the edge's contract names another
        `dedupe_key` (a payload field, say `payload.entities.orderId`): then two handoffs
        with the same value within `replay_window_ms` make one task. A `return` dedupes on
        its decision's id: an operator's decision makes one task here, ever (used once).
        """
        key, window = self._dedupe_for(verified)
        return tenant_key(tenant, key), window

    def _dedupe_for(self, verified: VerifiedEnvelope) -> tuple[str, float | None]:
        envelope = verified.envelope
        if verified.decision is not None:
            return "\x1f".join(("decision", verified.decision.id)), None
        default = "\x1f".join(("handoff", envelope.idempotency_key)), None
        catalog = self.settings.contracts
        if catalog is None:
            return default
        contract = (
            catalog.by_id(envelope.contract)
            if envelope.contract
            else catalog.for_edge(envelope.source.agent, self.settings.agent_name, envelope.kind)
        )
        rules = contract.idempotency if contract is not None else None
        if contract is None or rules is None or not rules.dedupe_key:
            return default
        window = rules.replay_window_ms / 1000 if rules.replay_window_ms else None
        path = rules.dedupe_key
        if path in ("envelope.idempotencyKey", "envelope.idempotency_key"):
            return default[0], window
        namespace = {"payload": envelope.transfer_context, "envelope": envelope.dump()}
        value = lookup(namespace, path)
        if value is MISSING or value is None:
            return default[0], window
        encoded = json.dumps(value, sort_keys=True, separators=(",", ":"))
        return "\x1f".join(("contract", contract.id, path, encoded)), window

    def refusal(self, verified: VerifiedEnvelope) -> tuple[str, str] | None:
        """(code, reason) when this agent must refuse the envelope, else None."""
        envelope, size = verified.envelope, verified.size
        me = self.settings.agent_name
        if envelope.expired():
            return "envelope_expired", f"envelope expired after {envelope.ttl_seconds} s"
        if size > MAX_ENVELOPE_BYTES:
            return "envelope_too_large", f"envelope of {size} bytes over {MAX_ENVELOPE_BYTES}"
        if envelope.target.agent != me:
            return "misaddressed", f"envelope addressed to {envelope.target.agent}, not {me}"
        if not self._addressed_here(envelope.target.url):
            # A genuine envelope replayed to a namesake: another agent of the same name
            # elsewhere. The sender names the address it delivers to, inside what it signs.
            return "misaddressed", (
                f"envelope addressed to {me} at {envelope.target.url[:200]}, not at this"
                f" agent's address {self.settings.agent_url}"
            )
        if me in envelope.visited and envelope.kind == "handoff":
            # Escalations and their returns come back by design; the hop limit bounds them.
            return "loop_detected", f"{me} already handled this chain ({envelope.visited})"
        if envelope.hop > self.settings.max_hops:
            return "loop_detected", f"hop {envelope.hop} over the maximum {self.settings.max_hops}"
        catalog = self.settings.contracts
        if catalog is not None:
            contract = (
                catalog.by_id(envelope.contract)
                if envelope.contract
                else catalog.for_edge(envelope.source.agent, me, envelope.kind)
            )
            if contract is None:
                edge = envelope.contract or f"{envelope.source.agent} → {me}"
                return "no_contract", f"{me} accepts no handoff contract for {edge}"
            failed = catalog.acceptance(contract, envelope.transfer_context, me, envelope.dump())
            if failed is not None:
                return "contract_rejected", f"contract {contract.id}: {failed}"
        return None

    def _addressed_here(self, url: str) -> bool:
        """`settings.addressed_here(url)`, kept per URL (the settings are frozen; a full
        memo is emptied, never grown: every URL a trusted sender names fits)."""
        settings, memo = self._addressed
        if settings is not self.settings:
            settings, memo = self._addressed = (self.settings, {})
        here = memo.get(url)
        if here is None:
            here = settings.addressed_here(url)
            if len(memo) >= 64:
                memo.clear()
            memo[url] = here
        return here

    async def reject(
        self,
        message: Message,
        owner: str,
        key: str,
        verified: VerifiedEnvelope,
        code: str,
        reason: str,
    ) -> tuple[TaskRecord, bool]:
        """Store the refusal as a REJECTED task (with its ledger row): the task stored under
        `key`, and whether it is another's (a concurrent receiver stored first)."""
        envelope = verified.envelope
        task_id = new_id()
        bound = copied(message, {"task_id": task_id})
        metadata = {HANDOFF_EXTENSION_URI: {**receive_metadata(verified), "rejected": code}}
        task = Task(
            id=task_id,
            context_id=envelope.context_id,
            status=TaskStatus(state=TaskState.SUBMITTED, timestamp=utc_now()),
            history=[bound],
            metadata=metadata,
        )
        rejected = with_status(task, TaskState.REJECTED, agent_message(f"{code}: {reason}", task))
        now = utc_now()
        record = TaskRecord(rejected, owner, 2, now, now, shared_owner(verified, owner))
        stored = await self.store.commit(
            Commit(
                record,
                [StreamResponse(task=task), status_event(rejected)],
                dedupe_key=key,
                received=received_entry(envelope, task_id, "rejected", code),
            )
        )
        return stored, stored.id != record.id


def shared_owner(verified: VerifiedEnvelope, owner: str) -> str:
    """Who shares a received task with `owner` (its `delegate`): the user its trusted
    sender acted for (`onBehalfOf`), within the tenant the task is received in — never in
    another ("" when nobody does: a delegation's sub-task, or no user named)."""
    shared = verified.envelope.shared_with
    return tenant_owner(owner_tenant(owner), shared) if shared else ""


CLAIMED_FIELDS = ("handoff_id", "idempotency_key", "context_id", "source_agent", "source_task_id")


def _cut(text: str, limit: int = 128) -> str:
    return text if len(text) <= limit else text[:limit]


def signed_message(verified: VerifiedEnvelope) -> Message:
    """The message a received handoff's task starts with, made from the verified envelope
    alone: its summary as text and its transfer context as data (as the sender writes them),
    the envelope and its signature in the metadata (the proof, kept). Whatever else the
    message carried — parts, metadata — was not signed, so a relay may have added it: it is
    dropped, and nothing a handler reads of a handoff (`ctx.text`, `ctx.message`,
    `ctx.transfer_context`) is unsigned.

    Built without validating again what is validated already: every value is the verified
    envelope's (its model checked the types) or part of the message that brought it, whose
    `Metadata` was bounded in depth as it was parsed — the envelope's transfer context is
    inside that metadata. Checking the same JSON again (twice: as metadata, as data) only
    repeated the same walk (`test_receiving`: an over-deep envelope never gets this far).
    """
    envelope = verified.envelope
    return copied(
        _HANDOFF_MESSAGE,
        {
            "message_id": f"handoff-{envelope.idempotency_key}",
            "parts": [
                copied(_TEXT_PART, {"text": envelope.summary}),
                copied(_DATA_PART, {"data": envelope.transfer_context}),
            ],
            "context_id": envelope.context_id,
            "extensions": [HANDOFF_EXTENSION_URI],
            "reference_task_ids": [envelope.source.task_id],
            "metadata": {
                HANDOFF_EXTENSION_URI: verified.signed,
                SIGNATURE_KEY: verified.signature,
            },
        },
    )


# What `signed_message` fills in (a copy with its values: `shallow.copied`, model_copy's).
_TEXT_PART = Part(text="")
_DATA_PART = Part(data={})
_HANDOFF_MESSAGE = Message(message_id="handoff-", role=Role.USER, parts=[_TEXT_PART])


def receive_metadata(verified: VerifiedEnvelope) -> dict[str, Any]:
    """What a received task records about the handoff that created it (proven: its signer
    and key; a `return`'s verified decision)."""
    envelope = verified.envelope
    decision = {"decision": verified.decision.to_stored()} if verified.decision else {}
    return {
        "handoff": {
            "handoffId": envelope.handoff_id,
            "idempotencyKey": envelope.idempotency_key,
            "rootKey": envelope.root_key,
            "hop": envelope.hop,
            "visited": envelope.visited,
            "traceId": envelope.trace_id,
            "source": envelope.source.as_wire(),
            "reason": envelope.reason,
            "kind": envelope.kind,
            "signer": verified.signer,
            "kid": verified.kid,
            # Whose task it is: the end user the trusted signer acted for (every kind; a
            # delegation's sub-task names its user too, though it is not shared with them).
            **({"onBehalfOf": envelope.on_behalf_of} if envelope.on_behalf_of else {}),
        },
        # A replay with this key must match: SHA-256 of the canonical envelope.
        "envelopeDigest": verified.digest,
        **decision,
        **_escalation_of(verified),
    }


def _escalation_of(verified: VerifiedEnvelope) -> dict[str, Any]:
    """An escalation's summary on the human agent's task, for inboxes and followers, with
    the agent its decision goes back to (`returnsTo`): the agent that escalated — or, when
    a human desk forwards it (a signer trusted to approve), the one the desk names."""
    envelope = verified.envelope
    if envelope.kind not in ("escalation", "notice"):
        return {}
    escalation = envelope.transfer_context.get("escalation")
    if not isinstance(escalation, dict):
        return {}
    source = envelope.source.dump()
    returns_to = source
    forwarded = envelope.transfer_context.get("returnTo")
    if verified.approver and isinstance(forwarded, dict) and forwarded.get("agent"):
        returns_to = {k: str(forwarded.get(k) or "") for k in ("agent", "url", "taskId")}
    return {"escalation": {**escalation, "source": source, "returnsTo": returns_to}}
