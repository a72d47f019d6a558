"""The last phase: the source task's final state and its outbox entry closed, in ONE write.

Terminate runs strictly after the target created the successor, so a TRANSFERRED pointer
always names a task that exists. The write is check-and-set on the task: a stale record costs
a read and another try, never a lost update; a task already terminal is left as it is.
`reopened` is the one ending that is not final: a handoff its handler waits on (see
`ctx.handoffs.hand_off`) was refused, and the task goes back to WORKING for the handler.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

from a2a_handoff.client.answers import Created
from a2a_handoff.errors import ConflictError
from a2a_handoff.failpoints import failpoint
from a2a_handoff.handoff.envelope import HandoffEnvelope
from a2a_handoff.handoff.sender import DONE, FAILED
from a2a_handoff.observe import events
from a2a_handoff.protocol.extension import HANDOFF_EXTENSION_URI, ext_metadata
from a2a_handoff.protocol.models import Task, TaskStatus, utc_now
from a2a_handoff.protocol.shallow import copied
from a2a_handoff.protocol.states import TaskState, transition
from a2a_handoff.protocol.steps import agent_message, status_event
from a2a_handoff.stores.base import Closing, Commit, OutboxEntry, Store, TaskRecord

_status = TaskStatus.__pydantic_validator__.validate_python  # from one dict (`protocol.steps`)

log = logging.getLogger("a2a_handoff.handoff")


async def transferred(
    store: Store,
    entry: OutboxEntry,
    envelope: HandoffEnvelope,
    created: Task | Created,
    source: TaskRecord | None = None,
) -> TaskRecord | None:
    """The source TRANSFERRED, pointing at `created` (the successor), the entry `done`."""
    pointer = {
        "agentUrl": entry.target_url,
        "agentName": entry.target_name,
        "taskId": created.id,
        "contextId": created.context_id,
        "reason": envelope.reason,
        "handoffId": entry.handoff_id,
    }
    text = f"Transferred to {entry.target_name} (task {created.id}): {envelope.reason}"
    return await terminate(
        store,
        entry,
        TaskState.TRANSFERRED,
        text,
        {"state": "TRANSFERRED", "transfer": pointer},
        DONE,
        json.dumps(pointer),
        source,
    )


async def failed(store: Store, entry: OutboxEntry, reason: str) -> TaskRecord | None:
    """The source FAILED with `reason`, the entry `failed`."""
    return await terminate(
        store,
        entry,
        TaskState.FAILED,
        reason,
        {"state": "FAILED", "reason": reason},
        FAILED,
        reason,
    )


async def reopened(
    store: Store, entry: OutboxEntry, reason: str, source: TaskRecord | None = None
) -> TaskRecord | None:
    """ONE transaction: the entry `failed`, the source back to WORKING (no longer handing
    off) with the refusal said in its history and kept in `metadata[URI].refused`."""
    refusal = {"handoffId": entry.handoff_id, "reason": reason}

    def ext(old: dict[str, Any]) -> dict[str, Any]:
        return {**{k: v for k, v in old.items() if k != "state"}, "refused": refusal}

    record, _ = await _close(
        store, entry, TaskState.WORKING, reason, ext, {"refused": refusal}, FAILED, reason, source
    )
    return record


async def delayed(
    store: Store,
    entry: OutboxEntry,
    text: str,
    source: TaskRecord | None = None,
    reached: bool | None = None,
) -> TaskRecord | None:
    """The source task, still handing off, says why its handoff waits: a WORKING status
    update with `text` (not kept in its history) and `metadata[URI].delivery` = {reason, at,
    and `reached` when given: whether a try may have reached the target (`handoff.reach`)}.
    Whoever may read the task (its owner) sees it; the outbox stays as it is. ConflictError
    when the task no longer hands this entry off."""
    record = source
    for _ in range(3):
        if record is None:
            record = await store.get(entry.task_id)
        if record is None or record.state is not TaskState.WORKING:
            return record
        if ext_metadata(record.task).get("handoffId") != entry.handoff_id:
            raise ConflictError(f"task {entry.task_id} no longer hands off {entry.handoff_id}")
        now = utc_now()
        note: dict[str, Any] = {"reason": text, "at": now}
        if reached is not None:
            note["reached"] = reached
        ext = {**ext_metadata(record.task), "delivery": note}
        message = agent_message(text, record.task)
        task = copied(
            record.task,
            {
                "metadata": {**(record.task.metadata or {}), HANDOFF_EXTENSION_URI: ext},
                "status": _status(
                    {"state": TaskState.WORKING, "message": message, "timestamp": now}
                ),
            },
        )
        said = {k: ext[k] for k in ("state", "handoffId", "delivery") if k in ext}
        updated = record.advanced(task, 1, now)
        try:
            await store.commit(
                Commit(
                    updated,
                    [status_event(task, {HANDOFF_EXTENSION_URI: said})],
                    expected_version=record.version,
                )
            )
        except ConflictError:
            record = None
            continue
        return updated
    return None


async def terminate(
    store: Store,
    entry: OutboxEntry,
    state: TaskState,
    text: str,
    members: dict[str, Any],
    status: str,
    detail: str,
    source: TaskRecord | None = None,
) -> TaskRecord | None:
    """ONE transaction: the source task's final state and the outbox entry closed.

    `source`: the record to start from (else read); a stale one fails the check-and-set
    and the task is read again.
    """

    def ext(old: dict[str, Any]) -> dict[str, Any]:
        return {**old, **members, "handoffId": entry.handoff_id}

    record, wrote = await _close(store, entry, state, text, ext, None, status, detail, source)
    if wrote and record is not None:
        failpoint("handoff.after_terminate")
        events.transitions(record.task.id, record.task.context_id, [state])
    return record


async def _close(
    store: Store,
    entry: OutboxEntry,
    state: TaskState,
    text: str,
    ext: Callable[[dict[str, Any]], dict[str, Any]],
    said: dict[str, Any] | None,
    status: str,
    detail: str,
    source: TaskRecord | None,
) -> tuple[TaskRecord | None, bool]:
    """The check-and-set loop that closes `entry`: the source task moves to `state` with
    `text` in its history and `ext(its handoff metadata)`, its event saying `said` (None:
    the whole metadata), and the entry becomes `status` with `detail`, in ONE transaction.
    The task as written (True), or as found — terminal or gone (False)."""
    record = source
    for _ in range(5):
        if record is None:
            record = await store.get(entry.task_id)
        if record is None or record.state.terminal:
            return record, False
        try:
            members = ext(ext_metadata(record.task))
            updated = await close_once(
                store, entry, record, state, text, members, said=said, status=status, detail=detail
            )
        except ConflictError:
            record = None
            continue
        return updated, True
    log.error("handoff %s: could not close task %s", entry.handoff_id, entry.task_id)
    return None, False


async def close_once(
    store: Store,
    entry: OutboxEntry,
    record: TaskRecord,
    state: TaskState,
    text: str,
    members: dict[str, Any],
    *,
    said: dict[str, Any] | None,
    status: str,
    detail: str,
) -> TaskRecord:
    """ONE check-and-set write from `record`: the source task in `state` with `text` in its
    history and `members` as its handoff metadata (the event says `said`, None: all of it),
    the entry closed as `status` with `detail`. ConflictError when either moved."""
    transition(record.state, state)
    message = agent_message(text, record.task)
    now = utc_now()
    task = copied(
        record.task,
        {
            "metadata": {**(record.task.metadata or {}), HANDOFF_EXTENSION_URI: members},
            "history": [*(record.task.history or []), message],
            "status": _status({"state": state, "message": message, "timestamp": now}),
        },
    )
    updated = record.advanced(task, 1, now)
    told = dict(members) if said is None else said
    await store.commit(
        Commit(
            updated,
            [status_event(task, {HANDOFF_EXTENSION_URI: told})],
            expected_version=record.version,
            close=Closing(entry.handoff_id, status, detail),
        )
    )
    return updated
