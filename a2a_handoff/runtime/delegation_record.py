"""A task's journal of delegations, as its metadata keeps it (`runtime.delegating` writes it).

`metadata[URI].delegations`: id → {key, handoffId, agent, route, request (a digest), taskId
(the sub-task, once the delegate took it), rounds (the outcomes: the delegation's, then each
answer's, with the step that recorded it)}. Read to replay outcomes after a
restart, to resume rather than fail a task that delegated, and to cancel the sub-tasks of a
task that ended (canceled, completed, failed) while they still ask for input.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
from typing import Any

from a2a_handoff.errors import GateRefused
from a2a_handoff.handoff.handoffs import Handoffs
from a2a_handoff.outcomes import Handoff
from a2a_handoff.protocol.extension import ext_metadata
from a2a_handoff.protocol.models import Task
from a2a_handoff.protocol.states import TaskState
from a2a_handoff.stores.base import TaskRecord

ENDED_WAIT = 30.0  # seconds a step's end waits for its task's last write, to cancel after it


def recorded(task: Task) -> dict[str, dict[str, Any]]:
    """The task's journal of delegations: id → {key, handoffId, agent, route, rounds}."""
    value = ext_metadata(task).get("delegations")
    return dict(value) if isinstance(value, dict) else {}


def request_digest(request: Handoff) -> str:
    """What a delegation asked, as a digest: a handler re-run after a restart gets a recorded
    outcome back only for the same request in the same place (a model may choose otherwise
    the second time)."""
    asked = {
        "target": request.target,
        "context": dict(request.context),
        "required": sorted(request.required),
    }
    encoded = json.dumps(asked, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(encoded.encode()).hexdigest()


def delegating(task: Task) -> bool:
    """Whether the task delegated: a restart resumes it (its handler re-run, the recorded
    outcomes replayed) rather than fail it."""
    return bool(recorded(task))


async def cancel_open(handoffs: Handoffs, task: Task) -> None:
    """A canceled task's sub-tasks still open — asking for input, or taken and not answered
    (the handler that waited on it may have been stopped before it could cancel it)."""
    for known in recorded(task).values():
        rounds = known.get("rounds") or []
        task_id = rounds[-1].get("taskId") if rounds else known.get("taskId")
        if not task_id or (rounds and not TaskState(rounds[-1]["state"]).interrupted):
            continue
        with contextlib.suppress(GateRefused):
            url = handoffs.sender.target_url(str(known["route"]))
            await handoffs.subtasks.cancel(url, str(task_id))


async def cancel_if_ended(handoffs: Handoffs, settled: asyncio.Future[TaskRecord]) -> None:
    """After a step of a task that delegated: once the task ended COMPLETED, FAILED or
    REJECTED — nobody will answer its delegates now — cancel its sub-tasks still open (still
    asking for input). A cancel of the task does so itself (`TaskManager.cancel`); a step
    that only asks its own user (INPUT_REQUIRED) keeps them."""
    try:
        async with asyncio.timeout(ENDED_WAIT):
            record = await asyncio.shield(settled)
    except Exception:  # not stored (the run aborted): the task did not end here
        return
    if record.state.terminal and record.state is not TaskState.CANCELED:
        await cancel_open(handoffs, record.task)
