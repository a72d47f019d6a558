"""A task's steps as wire objects: agent messages, status changes and their stream events.

Every status change goes through `states.transition()` (via `with_status`), so no step built
here can be an illegal move.
"""

from __future__ import annotations

from typing import Any

from a2a_handoff.ids import new_id
from a2a_handoff.protocol.models import (
    Artifact,
    Message,
    Part,
    Role,
    StreamResponse,
    Task,
    TaskStatus,
    utc_now,
)
from a2a_handoff.protocol.shallow import copied
from a2a_handoff.protocol.states import TaskState, transition

# Models built from one dict by their validator: the members' models made in the same call,
# and no Python `__init__` in between (a quarter fewer instructions than constructors).
_message = Message.__pydantic_validator__.validate_python
_event = StreamResponse.__pydantic_validator__.validate_python
_status = TaskStatus.__pydantic_validator__.validate_python


def agent_message(text: str, task: Task | None = None, **metadata: Any) -> Message:
    """A message from the agent, bound to a task when given."""
    message: Message = _message(
        {
            "message_id": new_id(),
            "role": Role.AGENT,
            "parts": [{"text": text}],
            "task_id": task.id if task else None,
            "context_id": task.context_id if task else None,
            "metadata": metadata or None,
        }
    )
    return message


def status_event(task: Task, metadata: dict[str, Any] | None = None) -> StreamResponse:
    """The stream event announcing the task's current status."""
    event: StreamResponse = _event(
        {
            "status_update": {
                "task_id": task.id,
                "context_id": task.context_id,
                "status": task.status,
                "metadata": metadata,
            }
        }
    )
    return event


def with_status(task: Task, state: TaskState, message: Message | None = None) -> Task:
    """A copy of `task` in `state` (checked by the transition table), the message appended."""
    transition(task.status.state, state)
    history = task.history or []
    if message is not None:
        history = [*history, message]
    status = _status({"state": state, "message": message, "timestamp": utc_now()})
    return copied(task, {"status": status, "history": history})


def status_text(task: Task) -> str:
    """The text of the task's status message, else its state's name."""
    message = task.status.message
    return message.text if message is not None else task.status.state.name


def _plain_text(part: Part) -> bool:
    return part.text is not None and part.metadata is None and part.media_type is None


def appended(artifact: Artifact, chunk: Artifact) -> Artifact:
    """`artifact` with `chunk`'s parts added (an `append` artifact update), as one artifact.

    Plain text running on from plain text is joined into one part, so a reply streamed
    token by token is stored as its text, not as thousands of parts.
    """
    parts = list(artifact.parts)
    for part in chunk.parts:
        last = parts[-1] if parts else None
        if last is not None and _plain_text(last) and _plain_text(part):
            parts[-1] = copied(last, {"text": (last.text or "") + (part.text or "")})
        else:
            parts.append(part)
    return copied(artifact, {"parts": parts})
