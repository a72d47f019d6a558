"""A contract's recovery paths: the handoff that follows one that failed under a contract.

`on_reject`, `on_error` and `on_timeout` name where the task goes when its handoff fails:
`source` (or nothing) — back to this agent, FAILED with the reason; `human` — an escalation
to route `human`; any other name (`supervisor`, a fallback agent, `agent:NAME`) — a handoff
to that route. The failed entry is closed and the new one checkpointed in ONE transaction;
the new entry is then delivered as a job of its own (the outbox queues it). A task follows
at most `MAX_RECOVERIES` paths, so two fallbacks cannot ping-pong.
"""

from __future__ import annotations

from dataclasses import dataclass

from a2a_handoff.contracts.contract import Contract
from a2a_handoff.errors import ConflictError, GateRefused
from a2a_handoff.escalation import Escalation, Need, Trigger
from a2a_handoff.handoff.envelope import HandoffEnvelope
from a2a_handoff.handoff.job import DeliveryJob
from a2a_handoff.handoff.sender import FAILED, HandoffSender
from a2a_handoff.outcomes import Handoff
from a2a_handoff.protocol.extension import ext_metadata, with_ext_metadata
from a2a_handoff.protocol.models import utc_now
from a2a_handoff.stores.base import Closing, Commit, OutboxEntry, Store, TaskRecord

MAX_RECOVERIES = 3  # recovery paths followed per task


@dataclass(frozen=True, slots=True)
class Rerouted:
    """The path was taken: `job` delivers the new handoff; `detail` closed the failed one."""

    job: DeliveryJob
    detail: str


@dataclass(frozen=True, slots=True)
class Unfollowed:
    """The path cannot be taken: the source fails with `detail`."""

    detail: str


def path_of(contract: Contract | None, which: str) -> str:
    """The route a contract's recovery field `which` names ("" or "source": the source)."""
    if contract is None:
        return ""
    return str(getattr(contract.recovery, which, None) or "")


async def reroute(
    store: Store,
    sender: HandoffSender,
    entry: OutboxEntry,
    envelope: HandoffEnvelope,
    contract: Contract,
    which: str,
    reason: str,
) -> Rerouted | Unfollowed | TaskRecord | None:
    """Follow `contract`'s path `which` (naming a route, not the source) for the handoff of
    `entry`, which failed for `reason`. A record (or None): the task as someone else left
    it — terminal, or moved meanwhile."""
    record = await store.get(entry.task_id)
    if record is None or record.state.terminal:
        return record
    recoveries = int(ext_metadata(record.task).get("recoveries", 0))
    if recoveries >= MAX_RECOVERIES:
        return Unfollowed(f"{reason} (recovery given up after {recoveries})")
    target = path_of(contract, which).removeprefix("agent:")
    decision = _decision(entry, envelope, contract, which, target, reason)
    try:
        new_envelope, new_json = await sender.prepare(
            record.task, decision, record.owner, key_salt=f"recovery:{entry.handoff_id}"
        )
    except GateRefused as exc:
        return Unfollowed(f"{reason}; {which} → {target} refused: {exc}")
    task, event, new_entry = sender.handing_off(record.task, new_envelope, new_json, record.owner)
    task = with_ext_metadata(task, recoveries=recoveries + 1)
    updated = record.advanced(task, 1, utc_now())
    detail = f"{reason} ({contract.id}: {which} → {target})"
    try:
        await store.commit(
            Commit(
                updated,
                [event],
                expected_version=record.version,
                outbox=new_entry,
                close=Closing(entry.handoff_id, FAILED, detail),
            )
        )
    except ConflictError:
        return await store.get(entry.task_id)  # someone else moved it: theirs
    return Rerouted(DeliveryJob(new_entry, True, new_envelope, updated), detail)


def _decision(
    entry: OutboxEntry,
    envelope: HandoffEnvelope,
    contract: Contract,
    which: str,
    target: str,
    reason: str,
) -> Handoff:
    if target != "human":
        return Handoff(
            target=target,
            reason=f"{contract.id} {which}: {reason}",
            context=dict(envelope.transfer_context),
            kind="handoff",
        )
    escalation = Escalation(
        f"The handoff to {entry.target_name} under contract {contract.id} failed: {reason}.",
        [f"Handed the task to {entry.target_name}: {envelope.reason}"],
        "a decision on who takes this task over, or how it goes on",
        Need.DECISION,
        Trigger.KNOWLEDGE_GAP,
        resume=dict(envelope.transfer_context),
    )
    return Handoff.to_human(escalation, reason=f"escalated ({contract.id} {which}): {reason}")
