"""A task's event log as kept beside its snapshot: without what the snapshot already holds.

Each write stores the task's snapshot (the task as it is now) and the events of the step. A
task's history and artifacts only ever grow, so an event carrying a Task (the first one: the
task as created, its message included) or an artifact the snapshot holds is logged as a
reference — how many history messages and artifacts it had, or which artifact it is — and
rebuilt from the snapshot when read (a snapshot read after the events is at least as new, so
every reference resolves). A request's content is then stored once in the snapshot and not
again in the log: a 1 MiB message stored 2 MiB (an echoed one 4 MiB), now about 1 (2).
Rows written before are read as they are.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from a2a_handoff.protocol.models import (
    StreamResponse,
    Task,
    TaskArtifactUpdateEvent,
    TaskStatusUpdateEvent,
)

_REF = '{"ref":'
_TASK_CONTENT = {"history", "artifacts"}  # what a logged Task leaves to the snapshot
_ARTIFACT = {"artifact"}


def _prefix(snapshot: Sequence[Any] | None, part: Sequence[Any] | None) -> int | None:
    """len(part) if `part` begins `snapshot` (-1 for None), else None."""
    if part is None:
        return -1
    held = snapshot or ()
    if len(part) > len(held):
        return None
    if all(a is b or a == b for a, b in zip(part, held, strict=False)):
        return len(part)
    return None


def log_json(item: StreamResponse, snapshot: Task) -> str:
    """The JSON to log for `item`, written together with `snapshot`."""
    task = item.task
    if task is not None and task.id == snapshot.id:
        history = _prefix(snapshot.history, task.history)
        artifacts = _prefix(snapshot.artifacts, task.artifacts)
        if history is not None and artifacts is not None:
            rest = task.dump_json(_TASK_CONTENT)
            return f'{_REF}"task","history":{history},"artifacts":{artifacts},"task":{rest}}}'
    update = item.artifact_update
    if update is not None and update.task_id == snapshot.id and snapshot.artifacts:
        for index in range(len(snapshot.artifacts) - 1, -1, -1):
            held = snapshot.artifacts[index]
            if held is update.artifact or held == update.artifact:
                rest = update.dump_json(_ARTIFACT)
                return f'{_REF}"artifact","index":{index},"update":{rest}}}'
    status = item.status_update
    if status is not None:
        return _status_json(status) or item.dump_json()
    return item.dump_json()


def _plain(text: str) -> bool:
    """Whether `text` is written in JSON as it is (nothing to escape)."""
    return text.isprintable() and '"' not in text and "\\" not in text


def _status_json(update: TaskStatusUpdateEvent) -> str | None:
    """`StreamResponse(status_update=update).dump_json()` for a bare status change (a state and
    its time, no message nor metadata: most of a task's events), when none of its strings
    needs escaping; else None."""
    status = update.status
    stamp = status.timestamp
    if status.message is not None or update.metadata is not None or stamp is None:
        return None
    task_id, context_id = update.task_id, update.context_id
    if not (_plain(task_id) and _plain(context_id) and _plain(stamp)):
        return None
    return (
        f'{{"statusUpdate":{{"taskId":"{task_id}","contextId":"{context_id}",'
        f'"status":{{"state":"{status.state.value}","timestamp":"{stamp}"}}}}}}'
    )


def needs_snapshot(bodies: Sequence[str]) -> bool:
    """Whether any logged event refers to the snapshot."""
    return any(body.startswith(_REF) for body in bodies)


def from_log(body: str, snapshot: Task | None) -> StreamResponse:
    """A logged event as it was emitted; `snapshot`: the task now (for references)."""
    if not body.startswith(_REF):
        return StreamResponse.model_validate_json(body)
    if snapshot is None:  # pragma: no cover - the snapshot commits with its events
        raise ValueError("an event refers to a task snapshot that is not there")
    logged = json.loads(body)
    if logged["ref"] == "task":
        history, artifacts = logged["history"], logged["artifacts"]
        task = Task.model_validate(logged["task"]).model_copy(
            update={
                "history": None if history < 0 else list((snapshot.history or [])[:history]),
                "artifacts": (
                    None if artifacts < 0 else list((snapshot.artifacts or [])[:artifacts])
                ),
            }
        )
        return StreamResponse(task=task)
    artifact = (snapshot.artifacts or [])[logged["index"]]
    update = TaskArtifactUpdateEvent.model_validate({**logged["update"], "artifact": artifact})
    return StreamResponse(artifact_update=update)
