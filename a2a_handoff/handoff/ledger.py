"""The handoff ledger: handoffs sent (the outbox) and received, as rows a person can read.

A received handoff that creates a task (accepted or rejected) gets its row in the transaction
creating that task, so the ledger and the tasks always agree; a duplicate's row is written off
the reply's path (`Ledger.duplicate`): the ledger is informational, and the task itself, found
by its key, is what a replay relies on.
"""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any

from a2a_handoff.handoff.envelope import HandoffEnvelope
from a2a_handoff.protocol.models import parse_time, utc_now
from a2a_handoff.stores.base import OutboxEntry, ReceivedEntry, Store

if TYPE_CHECKING:  # imported when contracts are used: jsonschema is slow to import
    from a2a_handoff.contracts.catalog import Catalog


def received_entry(
    envelope: HandoffEnvelope, task_id: str, outcome: str, reason: str
) -> ReceivedEntry:
    """The ledger row of a handoff received: `outcome` accepted, rejected or duplicate."""
    return ReceivedEntry(
        handoff_id=envelope.handoff_id,
        idempotency_key=envelope.idempotency_key,
        context_id=envelope.context_id,
        source_agent=envelope.source.agent,
        source_task_id=envelope.source.task_id,
        task_id=task_id,
        outcome=outcome,
        reason=reason,
        at=utc_now(),
    )


class Ledger:
    """Writes the rows of duplicates received, in the background."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._background: set[asyncio.Task[None]] = set()

    def duplicate(self, envelope: HandoffEnvelope, task_id: str) -> None:
        """Record a replay of a handoff already taken as task `task_id`."""
        entry = received_entry(envelope, task_id, "duplicate", "")
        job = asyncio.create_task(self.store.record_received(entry))
        self._background.add(job)
        job.add_done_callback(self._background.discard)

    async def aclose(self) -> None:
        if self._background:
            await asyncio.wait(self._background, timeout=5)


def sent_row(entry: OutboxEntry, contracts: Catalog | None) -> dict[str, Any]:
    """A handoff sent, as ListHandoffs shows it."""
    return {
        "handoffId": entry.handoff_id,
        "taskId": entry.task_id,
        "contextId": entry.context_id,
        "target": {"agent": entry.target_name, "url": entry.target_url},
        "status": entry.status,
        "detail": _detail(entry.detail),
        "createdAt": entry.created_at,
        "updatedAt": entry.updated_at,
        **_contract_of(entry.envelope, contracts),
        **_latency(entry.created_at, entry.updated_at, entry.status),
    }


def received_row(entry: ReceivedEntry) -> dict[str, Any]:
    """A handoff received, as ListHandoffs shows it."""
    return {
        "handoffId": entry.handoff_id,
        "contextId": entry.context_id,
        "source": {"agent": entry.source_agent, "taskId": entry.source_task_id},
        "taskId": entry.task_id,
        "outcome": entry.outcome,
        "reason": entry.reason,
        "at": entry.at,
    }


def _detail(text: str) -> dict[str, Any]:
    """A sent handoff's detail as an object: the transfer pointer of a completed one, the
    reason of a failed one (`{"reason": …}`), nothing yet for a pending one."""
    if not text:
        return {}
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    return value if isinstance(value, dict) else {"reason": text}


def _contract_of(envelope_json: str, contracts: Catalog | None) -> dict[str, Any]:
    """The contract a sent handoff went under, and the audit event it names."""
    try:
        ref = json.loads(envelope_json).get("contract")
    except (ValueError, AttributeError):
        return {}
    if not ref:
        return {}
    found: dict[str, Any] = {"contract": ref}
    contract = contracts.by_id(ref) if contracts is not None else None
    if contract is not None and contract.observability is not None:
        found["auditEvent"] = contract.observability.audit_event
        found["metrics"] = list(contract.observability.metrics)
    return found


def _latency(created: str, updated: str, status: str) -> dict[str, Any]:
    """handoff.latency_ms of a closed handoff: from its checkpoint to its end."""
    if status == "pending":
        return {}
    elapsed = parse_time(updated) - parse_time(created)
    return {"latencyMs": round(elapsed.total_seconds() * 1000, 1)}
