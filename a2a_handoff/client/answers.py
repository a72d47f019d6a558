"""The target's answer to a handoff's create, read for what the sender uses of it.

The source keeps only the successor's id and context (its TRANSFERRED pointer) and its state
(a refusal ends the delivery another way). Those members of the JSON-RPC answer are
validated straight from its bytes, with the rules `Task` holds them to (non-empty strings, a
known state), into a `Created`; the rest of the answer — the successor's status message,
artifacts, metadata — is parsed as JSON and not kept, so not built into models.

Anything else goes the general way, so its outcome is the one a full read gives: an error
member (RemoteError), another status, a body that is not that shape, a member spelt the
snake_case way, and a REJECTED task, whose metadata and status text say why — read whole,
as a `Task`, raising ValidationError when it is not one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, NotRequired

from pydantic import Field, TypeAdapter, ValidationError
from typing_extensions import TypedDict

from a2a_handoff.client.client import _result
from a2a_handoff.client.retry import Answer
from a2a_handoff.protocol.models import Task
from a2a_handoff.protocol.states import TaskState


@dataclass(frozen=True, slots=True)
class Created:
    """A successor the target created (and did not refuse): its id, context and state."""

    id: str
    context_id: str
    state: TaskState


_Id = Annotated[str, Field(min_length=1)]


class _Status(TypedDict):
    state: TaskState


class _Task(TypedDict):
    id: _Id
    contextId: _Id
    status: _Status


class _Result(TypedDict):
    task: _Task


class _Answer(TypedDict):
    result: _Result
    error: NotRequired[Any]


_ANSWER = TypeAdapter(_Answer)


def created_task(url: str, answer: Answer) -> Task | Created:
    """The task `answer` says was created: a `Created`, or the whole `Task` (see the
    module doc)."""
    status, content = answer
    if status == 200:
        try:
            brief = _ANSWER.validate_json(content)
        except ValidationError:
            brief = None
        if brief is not None and brief.get("error") is None:
            task = brief["result"]["task"]
            state = task["status"]["state"]
            if state is not TaskState.REJECTED:
                return Created(task["id"], task["contextId"], state)
    result = _result(url, answer)
    return Task.model_validate(result.get("task") if isinstance(result, dict) else None)
