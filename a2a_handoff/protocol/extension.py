"""The handoff extension: URI and limits, task metadata, and the wire rendering of TRANSFERRED.

A2A has no transfer state. Internally TRANSFERRED is a first-class terminal state; on the
wire a client that activated the extension (`A2A-Extensions` holds the URI) sees
`TASK_STATE_TRANSFERRED`, and every other client sees `TASK_STATE_COMPLETED` with a status
message saying where the task went. Both always get `metadata[URI]` with the pointer.
"""

from __future__ import annotations

from typing import Any

from a2a_handoff.protocol.models import StreamResponse, Task, TaskStatusUpdateEvent
from a2a_handoff.protocol.shallow import copied
from a2a_handoff.protocol.states import TaskState

HANDOFF_EXTENSION_URI = "urn:a2a-handoff:ext:handoff:v1"
SIGNATURE_KEY = HANDOFF_EXTENSION_URI + ":jws"
"""`message.metadata[SIGNATURE_KEY]`: the sender's detached JWS over the canonical envelope
carried beside it in `message.metadata[HANDOFF_EXTENSION_URI]`."""
WITHDRAW_KEY = HANDOFF_EXTENSION_URI + ":withdraw"
"""`message.metadata[WITHDRAW_KEY] = true` beside a signed envelope: its sender withdraws the
handoff — taken already, the target answers with its task; else it refuses the key for good
(REJECTED `withdrawn`), so no later try of it is taken."""

# The extension's limits, shared by both ends of a handoff and by the contract linter.
MAX_ENVELOPE_BYTES = 64 * 1024
DEFAULT_TTL_SECONDS = 300
DEFAULT_MAX_HOPS = 8

HANDING_OFF = "HANDING_OFF"
"""`metadata[URI].state` of a task whose handoff is checkpointed but not yet terminated."""


def ext_metadata(task: Task) -> dict[str, Any]:
    """The handoff extension's metadata on a task (empty when none)."""
    value = (task.metadata or {}).get(HANDOFF_EXTENSION_URI)
    return dict(value) if isinstance(value, dict) else {}


def with_ext_metadata(task: Task, **members: Any) -> Task:
    """A copy of `task` with `members` merged into the extension's metadata."""
    merged = {**ext_metadata(task), **members}
    metadata = {**(task.metadata or {}), HANDOFF_EXTENSION_URI: merged}
    return copied(task, {"metadata": metadata})


def parse_extensions(header: str | None) -> frozenset[str]:
    """The URIs listed in an `A2A-Extensions` header."""
    if not header:
        return frozenset()
    return frozenset(uri.strip() for uri in header.split(",") if uri.strip())


def render_task(task: Task, extension_active: bool) -> Task:
    """The task as this client may see it: TRANSFERRED becomes COMPLETED without the extension."""
    if extension_active or task.status.state is not TaskState.TRANSFERRED:
        return task
    status = copied(task.status, {"state": TaskState.COMPLETED})
    return copied(task, {"status": status})


def render_item(item: StreamResponse, extension_active: bool) -> StreamResponse:
    """A stream item as this client may see it (see `render_task`)."""
    if extension_active:
        return item
    if item.task is not None and item.task.status.state is TaskState.TRANSFERRED:
        return StreamResponse(task=render_task(item.task, False))
    update = item.status_update
    if update is not None and update.status.state is TaskState.TRANSFERRED:
        status = copied(update.status, {"state": TaskState.COMPLETED})
        return StreamResponse(
            status_update=TaskStatusUpdateEvent(
                task_id=update.task_id,
                context_id=update.context_id,
                status=status,
                metadata=update.metadata,
            )
        )
    return item
