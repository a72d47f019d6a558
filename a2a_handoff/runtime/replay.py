"""A resumed step's replay: what its interrupted run committed, matched against what the
handler emits when it runs again, so that nothing is sent twice.

A task cut by a crash in the middle of a step is resumed (`runtime.sweeps`): its handler
runs again on the step's message. What the interrupted run emitted and committed — status
updates, artifacts (their ids are the same on every run: `TaskContext.new_artifact_id`) —
is in the task's event log after the step began (its last move into WORKING). The handler
run again emits the same things in the same order, up to where it was cut: each one equal
to the next recorded emission is dropped — it is committed already, under its event id —
and from the first that differs, everything is emitted as new. Journaled tool calls, steps
and delegations answer from their own records (`runtime.tool_journal`,
`runtime.step_journal`, `runtime.delegating`); an operator's approval the interrupted run
used is used again by the same step (`reuse`), not refused as spent. A step that began with
a received handoff gets it back as the task stored it when it was proven
(`StoredHandoff`): `ctx.envelope` is set on the resumed run as on the first.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from a2a_handoff.decisions import Decision
from a2a_handoff.protocol.extension import HANDOFF_EXTENSION_URI, ext_metadata
from a2a_handoff.protocol.models import Message, StreamResponse, Task
from a2a_handoff.protocol.states import TaskState
from a2a_handoff.stores.base import TaskEvent

RESUMED = {HANDOFF_EXTENSION_URI: {"resumed": True}}
"""The metadata of a resumed run's first event (the task WORKING again)."""


@dataclass(slots=True)
class Replay:
    """The interrupted step's emissions not yet met again, and the approvals it used."""

    emitted: list[StreamResponse] = field(default_factory=list)
    approvals: set[str] = field(default_factory=set)

    def matches(self, item: StreamResponse) -> bool:
        """Whether `item` is the next recorded emission: then it is consumed (and not to be
        emitted again). The first that is not ends the replay: the run went another way."""
        if not self.emitted:
            return False
        if _same(item, self.emitted[0]):
            del self.emitted[0]
            return True
        self.emitted.clear()
        return False

    def reuse(self, decision_id: str) -> bool:
        """Whether the interrupted step used the approval `decision_id` (once: consumed)."""
        if decision_id in self.approvals:
            self.approvals.discard(decision_id)
            return True
        return False


def step_replay(events: list[TaskEvent]) -> Replay:
    """The replay of the step the task's log ends in (see the module docstring)."""
    replay = Replay()
    state: TaskState | None = None
    for event in events:
        item = event.item
        now = _state(item) or state
        if now is TaskState.WORKING and state is not TaskState.WORKING:
            replay = Replay()  # a step begins: what came before is not its own
        state = now
        update = item.status_update
        if item.artifact_update is not None:
            replay.emitted.append(item)
        elif update is not None and update.status.state is TaskState.WORKING:
            note = (update.metadata or {}).get(HANDOFF_EXTENSION_URI)
            if isinstance(note, dict) and isinstance(note.get("approvalUsed"), str):
                replay.approvals.add(note["approvalUsed"])
            elif update.metadata is None and update.status.message is not None:
                replay.emitted.append(item)  # the handler's own status (`ctx.status`)
    return replay


def _state(item: StreamResponse) -> TaskState | None:
    if item.status_update is not None:
        return item.status_update.status.state
    if item.task is not None:
        return item.task.status.state
    return None


def _same(new: StreamResponse, old: StreamResponse) -> bool:
    """Equal as the handler emitted them: an artifact update whole; a status update by its
    state and its message's parts (a message id is new each time)."""
    if new.artifact_update is not None and old.artifact_update is not None:
        return new.artifact_update.dump_json() == old.artifact_update.dump_json()
    if new.status_update is None or old.status_update is None:
        return False
    a, b = new.status_update, old.status_update
    if a.metadata is not None or a.status.state is not b.status.state:
        return False
    if a.status.message is None or b.status.message is None:
        return a.status.message is b.status.message
    return [p.dump_json() for p in a.status.message.parts] == [
        p.dump_json() for p in b.status.message.parts
    ]


@dataclass(frozen=True, slots=True)
class StoredHandoff:
    """The handoff a resumed step began with, as its task stored it once proven (the
    envelope's transfer context in the message, its signer and decision in the task's
    metadata): what `TaskContext.envelope` reads (`agent.ProvenHandoff`)."""

    transfer_context: dict[str, Any]
    decision: Decision | None
    signer: str


def stored_handoff(task: Task, message: Message) -> StoredHandoff | None:
    """The handoff `message` carried, when it is the one that created `task`."""
    history = task.history or []
    carried = (message.metadata or {}).get(HANDOFF_EXTENSION_URI)
    if not history or history[0].message_id != message.message_id:
        return None
    if not isinstance(carried, dict):
        return None
    ext = ext_metadata(task)
    context = carried.get("transferContext")
    signer = (ext.get("handoff") or {}).get("signer")
    return StoredHandoff(
        dict(context) if isinstance(context, dict) else {},
        Decision.from_stored(ext.get("decision")),
        str(signer or ""),
    )
