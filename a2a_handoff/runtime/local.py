"""What an agent's own background job may do with the agent's tasks (`agent.background`).

A human agent's timer, say, lists the tasks waiting for input and answers them as their owner
would: the answer is an ordinary follow-up, run and stored like any other.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from a2a_handoff.errors import TaskBusyError, UnsupportedOperationError
from a2a_handoff.protocol.models import Message, Role, Task
from a2a_handoff.protocol.states import TaskState
from a2a_handoff.runtime.submission import Submission
from a2a_handoff.stores.base import Store, TaskQuery

FollowUp = Callable[[Message, str], Awaitable[Submission]]
"""`follow_up(message, owner)`: continue a task as its owner (see `TaskManager`)."""


class LocalTasks:
    """What an agent's background job may do with this agent's own tasks."""

    def __init__(self, store: Store, follow_up: FollowUp) -> None:
        self._store = store
        self._follow_up = follow_up

    async def waiting(self) -> list[Task]:
        """Every task waiting for input (INPUT_REQUIRED), whoever owns it."""
        tasks: list[Task] = []
        token: str | None = None
        while token != "":
            page = await self._store.list_tasks(
                TaskQuery(
                    owner=None, state=TaskState.INPUT_REQUIRED, page_size=100, page_token=token
                )
            )
            tasks += [r.task for r in page.records]
            token = page.next_page_token
        return tasks

    async def answer(self, task_id: str, message: Message) -> bool:
        """Resume a waiting task with `message`, as its owner would; False when it no
        longer waits (someone answered first)."""
        record = await self._store.get(task_id)
        if record is None or not record.state.interrupted:
            return False
        bound = message.model_copy(update={"task_id": task_id, "role": Role.USER})
        try:
            submission = await self._follow_up(bound, record.owner)
        except (TaskBusyError, UnsupportedOperationError):
            return False
        await asyncio.shield(submission.created)
        return True
