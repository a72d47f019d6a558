"""Creating a task: a new message (or a proven handoff) becomes a task with a running handler.

Invariant: a message id creates at most one task — a repeat returns the task the first one
created, while it is being created (`Runs.creating`) and once stored (the store's dedupe key) —
unless message-id deduplication is switched off (the caller passes no key).
"""

from __future__ import annotations

from a2a_handoff.handoff.receiver import Accept
from a2a_handoff.ids import new_id
from a2a_handoff.protocol.extension import HANDOFF_EXTENSION_URI
from a2a_handoff.protocol.models import Message, StreamResponse, Task, utc_now
from a2a_handoff.protocol.shallow import copied
from a2a_handoff.protocol.states import TaskState
from a2a_handoff.runtime.run import Answer, RunHost, TaskRun
from a2a_handoff.runtime.running import Runs
from a2a_handoff.runtime.submission import Submission, resolved

# A new task and its first event, each built from one dict (`protocol.steps`).
_task = Task.__pydantic_validator__.validate_python
_event = StreamResponse.__pydantic_validator__.validate_python


def dedupe_key(owner: str, message: Message) -> str:
    """Message ids are unique per owner and context (or per owner, without a context)."""
    return "\x1f".join((owner, message.context_id or "", message.message_id))


class TaskCreator:
    """Creates tasks and starts their handlers, once per dedupe key."""

    def __init__(self, host: RunHost, runs: Runs) -> None:
        self.host = host
        self.runs = runs

    async def create(
        self, message: Message, owner: str, key: str, *, answer: Answer = "task"
    ) -> Submission:
        """The task `key` names (running or stored), else a new one."""
        running = self.runs.creating.get(key)
        if running is not None:
            return running.submission
        existing_id = await self.host.store.find(key)
        running = self.runs.creating.get(key)  # it may have started while we read
        if running is not None:
            return running.submission
        if existing_id is not None:
            record = await self.host.store.get(existing_id)
            if record is not None:
                run = self.runs.by_task.get(record.id)
                return run.submission if run is not None else resolved(record)
        return self.start(message, owner, key, answer=answer)

    def start(
        self,
        message: Message,
        owner: str,
        key: str | None,
        *,
        accepted: Accept | None = None,
        answer: Answer = "task",
    ) -> Submission:
        """Create a task — a handoff's when `accepted` — and run its handler; synchronous so
        the key is claimed atomically."""
        task_id = new_id()
        context_id = message.context_id or new_id()
        bound = copied(message, {"task_id": task_id, "context_id": context_id})
        task: Task = _task(
            {
                "id": task_id,
                "context_id": context_id,
                "status": {"state": TaskState.SUBMITTED, "timestamp": utc_now()},
                "history": [bound],
                "metadata": {HANDOFF_EXTENSION_URI: accepted.metadata} if accepted else None,
            }
        )
        run = TaskRun(
            self.host,
            task,
            owner,
            committed=None,
            dedupe_key=key,
            first=_event({"task": task}),
            envelope=accepted.verified if accepted else None,
            dedupe_ttl=accepted.window if accepted else None,
            received=accepted.for_task(task_id) if accepted else None,
            keep_first=answer == "stream",  # a stream starts from its first events
        )
        self.runs.add(run, key)
        run.run(bound, answer=answer)
        return run.submission
