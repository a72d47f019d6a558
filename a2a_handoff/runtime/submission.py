"""What a caller of SendMessage is handed: the futures of the task its message started (or
found), and the stream's start; `Replied` when the handler answered with a direct Message."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from a2a_handoff.protocol.extension import ext_metadata
from a2a_handoff.protocol.models import Message, StreamResponse, Task
from a2a_handoff.protocol.shallow import copied
from a2a_handoff.stores.base import TaskRecord


class Replied(Exception):
    """What a submission's futures raise when its handler replied with a direct Message
    (`outcomes.Reply`): the task was never created; `message` is the answer."""

    def __init__(self, message: Message) -> None:
        super().__init__("replied with a message")
        self.message = message


@dataclass(slots=True)
class Submission:
    """What a SendMessage started (or found, for a repeated message id).

    A stream of it starts with `head` (a Task snapshot, when set) and goes on with the
    task's events after seq `after`.
    """

    task_id: str
    created: asyncio.Future[TaskRecord]
    settled: asyncio.Future[TaskRecord]
    head: Task | None
    after: int
    duplicate: bool = False
    # A new task's first committed events (seq 1, 2, …), filled when its creation commits: a
    # stream of it starts with them, not with a read of what was just written.
    first: list[StreamResponse] | None = None
    # When a stream of it may start: at `created`, or — a new task whose handler may still
    # answer with a direct Message — once the handler emitted or ended (Replied: the Message).
    opened: asyncio.Future[TaskRecord] | None = None

    @property
    def streams_from(self) -> asyncio.Future[TaskRecord]:
        """The future a stream of this submission waits on before its first event."""
        return self.opened if self.opened is not None else self.created


def resolved(record: TaskRecord, duplicate: bool = False) -> Submission:
    """A submission for a task already stored (nothing runs for it here). A task that
    answered its caller with a direct Message (its receipt, marked `reply`) answers a
    caller who waits for the outcome with that same Message again."""
    loop = asyncio.get_running_loop()
    created: asyncio.Future[TaskRecord] = loop.create_future()
    created.set_result(record)
    settled: asyncio.Future[TaskRecord] = loop.create_future()
    opened: asyncio.Future[TaskRecord] | None = None
    reply = record.task.status.message
    if reply is not None and ext_metadata(record.task).get("reply") is True:
        opened = loop.create_future()
        for future in (settled, opened):
            future.set_exception(Replied(copied(reply, {"task_id": None})))
            future.exception()  # retrieved here: a caller may not be waiting for it
    else:
        settled.set_result(record)
    return Submission(
        record.id, created, settled, record.task, record.version, duplicate, opened=opened
    )
