"""Cancelling a task: a caller's cancel, racing whatever its run is doing.

Invariants: a terminal task, or one being handed off, is not cancelable; a running handler is
stopped (the task ends CANCELED), a run that already returned ends its step first; a task with
no run here is written CANCELED (retried when another replica wrote it meanwhile).
"""

from __future__ import annotations

import asyncio

from a2a_handoff.errors import ConflictError, InternalError, TaskNotCancelableError
from a2a_handoff.protocol.extension import HANDING_OFF, ext_metadata
from a2a_handoff.protocol.states import TaskState
from a2a_handoff.protocol.steps import agent_message
from a2a_handoff.runtime.journal import write_state
from a2a_handoff.runtime.lookup import TaskLookup
from a2a_handoff.runtime.run import TaskRun
from a2a_handoff.runtime.running import Runs
from a2a_handoff.stores.base import TaskRecord


def refuse_cancel(record: TaskRecord, run: TaskRun | None) -> None:
    """TaskNotCancelableError unless the task may be canceled now."""
    task_id = record.id
    if record.state.terminal:
        raise TaskNotCancelableError(
            f"task {task_id} is {record.state.name}, a terminal state",
            metadata={"taskId": task_id},
        )
    handing_off = ext_metadata(record.task).get("state") == HANDING_OFF
    if handing_off or (run is not None and not run.phase.cancelable):
        raise TaskNotCancelableError(
            f"task {task_id} is being handed off", metadata={"taskId": task_id}
        )


async def cancel_task(lookup: TaskLookup, runs: Runs, task_id: str, owner: str) -> TaskRecord:
    """Cancel the task `owner` may see: its canceled record."""
    record = await lookup.owned(task_id, owner)
    for _ in range(3):
        run = runs.by_task.get(task_id)
        refuse_cancel(record, run)
        if run is not None and run.driver is not None and not run.driver.done():
            run.cancel()  # stops the handler while it runs; else the step ends on its own
            record = await asyncio.shield(run.settled)
            if record.state is TaskState.CANCELED:
                return record
            continue
        if run is not None:
            record = await asyncio.shield(run.settled)
            continue
        try:
            canceled = agent_message("Task canceled.", record.task)
            return await write_state(lookup.store, record, TaskState.CANCELED, canceled)
        except ConflictError:
            record = await lookup.owned(task_id, owner)
    raise InternalError(f"task {task_id} kept changing; try again")
