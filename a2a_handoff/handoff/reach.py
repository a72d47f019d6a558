"""Whether a handoff's tries may have reached its target: known, and kept across restarts.

Only the target can tell whether it took an envelope — unless no try ever reached it. A
delivery knows that of its own tries: a try that failed reading the target's card, or whose
connection was refused, sent nothing. The source task keeps it for the next process
(`metadata[URI].delivery.reached`), under one rule: no `SendMessage` leaves while the task
says `reached: false` — the first try that could reach the target (its card read anew)
writes `reached: true` first. Nothing is written on the way of a handoff that goes through:
a task that says nothing is taken to have been reached (the safe reading).

So a handoff whose address never answered is known never delivered: past its time limit it
ends (`handoff.classify`), a cancel withdraws it without asking anyone (`handoff.withdraw`),
and an agent restarted with its route corrected delivers it to the new address, signed anew
for it (`readdressed`).
"""

from __future__ import annotations

from a2a_handoff.errors import ConflictError, GateRefused
from a2a_handoff.handoff.envelope import HandoffEnvelope, TargetRef
from a2a_handoff.handoff.job import DeliveryJob
from a2a_handoff.handoff.sender import FAILED, HandoffSender, signable_json
from a2a_handoff.handoff.terminate import delayed
from a2a_handoff.ids import new_id
from a2a_handoff.protocol.extension import ext_metadata
from a2a_handoff.protocol.models import utc_now
from a2a_handoff.stores.base import Closing, Commit, OutboxEntry, Store, TaskRecord


def said_of(record: TaskRecord | None) -> bool | None:
    """What the source task says of its handoff's tries (None: nothing)."""
    if record is None:
        return None
    delivery = ext_metadata(record.task).get("delivery")
    reached = delivery.get("reached") if isinstance(delivery, dict) else None
    return reached if isinstance(reached, bool) else None


class Reach:
    """One delivery's source task as last written, and what it says of the tries."""

    def __init__(self, store: Store, entry: OutboxEntry, source: TaskRecord | None) -> None:
        self.store = store
        self.entry = entry
        self.source = source
        self.said = said_of(source)

    @classmethod
    async def of(cls, store: Store, job: DeliveryJob) -> Reach:
        """A fresh job's (nothing said, nothing sent yet), or a replay's, read from the task."""
        source = job.source
        if source is None and not job.fresh:
            source = await store.get(job.entry.task_id)
        return cls(store, job.entry, source)

    @property
    def unreached(self) -> bool:
        """Whether the task says no try reached the target (its card is then read anew)."""
        return self.said is False

    async def before_send(self) -> None:
        """The target answers: a task that says `reached: false` says `true` before the
        envelope leaves (HandoffError when that cannot be written: nothing is sent)."""
        if self.said is not False:
            return
        text = f"{self.entry.target_name} answers at {self.entry.target_url}: handing over"
        self.source = await delayed(self.store, self.entry, text, self.source, reached=True)
        self.said = True

    async def note(self, text: str, reached: bool) -> None:
        """Say why the handoff waits, and whether a try may have reached the target."""
        written = await delayed(self.store, self.entry, text, self.source, reached=reached)
        self.source, self.said = written, reached

    async def superseded(self) -> TaskRecord | None:
        """The source task, read again, when it no longer hands this entry off (it ended: a
        cancel withdrew it, say; or another entry replaced this one); else None."""
        record = await self.store.get(self.entry.task_id)
        ext = ext_metadata(record.task) if record is not None else {}
        if record is None or record.state.terminal or ext.get("handoffId") != self.entry.handoff_id:
            return record
        self.source = record
        return None


async def readdressed(
    store: Store, sender: HandoffSender, entry: OutboxEntry, envelope: HandoffEnvelope
) -> DeliveryJob | None:
    """A handoff no try reached, whose route now names another address: the job that
    delivers it there — its envelope re-addressed and signed anew (the same idempotency
    key), its entry replacing this one, in ONE transaction. None: its address is the
    route's (or the route is gone: then the entry's own address, configured when it was
    made, is kept); a task moved meanwhile is left to whoever moved it."""
    try:
        url = sender.target_url(entry.target_name)
    except GateRefused:
        return None
    if url == entry.target_url:
        return None
    record = await store.get(entry.task_id)
    if record is None or record.state.terminal:
        return None
    target = TargetRef(agent=entry.target_name, url=url)
    moved = envelope.model_copy(update={"target": target, "handoff_id": new_id()})
    moved_json = signable_json(moved)
    task, event, new_entry = sender.handing_off(record.task, moved, moved_json, record.owner)
    updated = record.advanced(task, 1, utc_now())
    detail = f"re-addressed: {entry.target_name} is now routed to {url}"
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
        return None
    return DeliveryJob(new_entry, True, moved, updated, reopen=False)
