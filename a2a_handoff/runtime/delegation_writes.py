"""The writes of a run's delegations (`runtime.delegating`): each one write of the task — its
journal of delegations (`metadata[URI].delegations`) and a WORKING status — with the
delegation's outbox entry added or closed in the same transaction."""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

from a2a_handoff.delegated import Delegated
from a2a_handoff.errors import InternalError
from a2a_handoff.handoff.envelope import HandoffEnvelope
from a2a_handoff.handoff.handoffs import Handoffs
from a2a_handoff.handoff.job import DeliveryJob
from a2a_handoff.handoff.sender import PENDING
from a2a_handoff.observe import events
from a2a_handoff.protocol.extension import HANDOFF_EXTENSION_URI, with_ext_metadata
from a2a_handoff.protocol.models import utc_now
from a2a_handoff.protocol.states import TaskState
from a2a_handoff.protocol.steps import agent_message, status_event, with_status
from a2a_handoff.runtime.delegation_record import recorded
from a2a_handoff.runtime.journal import Journal
from a2a_handoff.runtime.phases import Phase
from a2a_handoff.stores.base import Closing, Commit, OutboxEntry, TaskRecord


class Delegator(Protocol):
    """What delegating needs from the run (`runtime.run.TaskRun`)."""

    journal: Journal

    @property
    def phase(self) -> Phase: ...

    @property
    def handoffs(self) -> Handoffs: ...

    @property
    def acting_for(self) -> str: ...

    def speak(self) -> None: ...


class DelegationWrites:
    """A run's writes of its delegations, one at a time."""

    def __init__(self, run: Delegator) -> None:
        self.run = run
        self.step = ""  # the id of the message the step runs on
        self.lock = asyncio.Lock()  # one write of the task at a time

    @property
    def handoffs(self) -> Handoffs:
        return self.run.handoffs

    async def _drained(self) -> TaskRecord:
        record = await self.run.journal.written()
        if record is None:
            raise InternalError("the task could not be stored before the delegation")
        return record

    async def _stored(self, known: dict[str, Any]) -> tuple[HandoffEnvelope, str, str]:
        """A checkpointed request, as its outbox entry holds it (the same bytes again)."""
        task = self.run.journal.task
        for entry in await self.handoffs.outbox.store.outbox(context_id=task.context_id):
            if entry.handoff_id == known.get("handoffId"):
                envelope, envelope_json = DeliveryJob(entry).opened()
                return envelope, envelope_json, entry.target_url
        raise InternalError(f"the outbox holds no delegation {known.get('handoffId')}")

    async def _write(
        self,
        ident: str,
        change: dict[str, Any],
        said: str,
        *,
        entry: OutboxEntry | None = None,
        close: Closing | None = None,
    ) -> None:
        """One write of the task, one commit: its delegation `ident` changed, a WORKING
        status saying `said`; with the outbox entry added (`entry`) or closed (`close`)."""
        journal, store = self.run.journal, self.handoffs.outbox.store
        async with self.lock:
            record = await self._drained()
            journal_of = recorded(record.task)
            journal_of[ident] = {**journal_of.get(ident, {}), **change}
            task = with_ext_metadata(record.task, delegations=journal_of)
            task = with_status(task, TaskState.WORKING, agent_message(said, task))
            updated = record.advanced(task, 1, utc_now())
            event = status_event(task, {HANDOFF_EXTENSION_URI: {"delegation": ident}})
            unit = Commit(
                updated, [event], expected_version=record.version, outbox=entry, close=close
            )
            await store.commit(unit)
            journal.adopt(updated)
            events.committed_items(task.id, task.context_id, [event], record.state)

    async def _checkpoint(
        self, ident: str, route: str, asked: str, envelope: HandoffEnvelope, envelope_json: str
    ) -> None:
        task, now = self.run.journal.task, utc_now()
        entry = OutboxEntry(
            envelope.handoff_id,
            task.id,
            task.context_id,
            self.run.journal.owner,
            envelope.target.agent,
            envelope.target.url,
            envelope_json,
            PENDING,
            "",
            now,
            now,
        )
        change = {
            "key": envelope.idempotency_key,
            "handoffId": envelope.handoff_id,
            "agent": envelope.target.agent,
            "route": route,
            "rounds": [],
            "request": asked,
        }
        said = f"Asking {envelope.target.agent}: {envelope.reason}"
        await self._write(ident, change, said, entry=entry)

    async def _record(self, ident: str, outcome: Delegated, handoff_id: str | None) -> None:
        known = recorded(self.run.journal.task)[ident]
        rounds = [*(known.get("rounds") or []), {**outcome.to_stored(), "step": self.step}]
        said = f"{outcome.agent} answered ({outcome.state.name.lower()}): {outcome.text[:300]}"
        state = outcome.state.name.lower()
        close = Closing(handoff_id, "done", state) if handoff_id else None
        await self._write(ident, {"rounds": rounds}, said, close=close)
