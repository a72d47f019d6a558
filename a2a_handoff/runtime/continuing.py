"""Continuing a task: a follow-up message (the input a task asked for, or a note).

Invariants: follow-ups to one task are serialized, across replicas too: each one accepted is
in the history in the order of acceptance; one sent while the task works, or while another
follow-up is being accepted, gets "task is busy" (-32104) and nothing is stored; a message to
a terminal task is refused (terminal tasks are immutable). On an escalated task, only an
operator decides; anyone else who may see it only adds a note, which never reaches the handler.
"""

from __future__ import annotations

from a2a_handoff.errors import InvalidParamsError, TaskBusyError, UnsupportedOperationError
from a2a_handoff.protocol.extension import ext_metadata
from a2a_handoff.protocol.models import Message, Task
from a2a_handoff.protocol.shallow import copied
from a2a_handoff.protocol.states import TaskState
from a2a_handoff.protocol.steps import status_event, with_status
from a2a_handoff.runtime.escalations import add_note
from a2a_handoff.runtime.lookup import TaskLookup
from a2a_handoff.runtime.run import RunHost, TaskRun
from a2a_handoff.runtime.running import Runs
from a2a_handoff.runtime.submission import Submission, resolved


class FollowUps:
    """Accepts the messages sent to an existing task, one at a time."""

    def __init__(
        self, host: RunHost, runs: Runs, lookup: TaskLookup, *, dedupe_message_ids: bool
    ) -> None:
        self.host = host
        self.runs = runs
        self.lookup = lookup
        self.dedupe_message_ids = dedupe_message_ids

    async def follow_up(self, message: Message, owner: str, operator: bool = False) -> Submission:
        """Run the task's handler on `message`, or keep it as a note on an escalation; a
        repeated message id answers with what the first one did."""
        assert message.task_id is not None
        record = (
            await self.lookup.owned(message.task_id, owner)
            if operator
            else await self.lookup.answerable(message.task_id, owner)
        )
        task = record.task
        noting = "escalation" in ext_metadata(task) and not (operator or self.lookup.decides(owner))
        if message.context_id and message.context_id != task.context_id:
            raise InvalidParamsError(
                f"message.contextId: task {task.id} belongs to context {task.context_id}"
            )
        running = self.runs.by_task.get(task.id)
        if self._seen(message, task):
            return running.submission if running is not None else resolved(record)
        if running is not None:
            if self._seen(message, running.task):
                return running.submission
            raise TaskBusyError(
                f"task {task.id} is busy: it is still working on an earlier message; send"
                " this one when it asks for input"
            )
        self._check_waiting(task)
        bound = copied(message, {"context_id": task.context_id})
        if noting:  # a note on an escalation: kept, never a decision, no handler runs
            return resolved(await add_note(self.host.store, record, bound, owner))
        resumed = with_status(
            copied(task, {"history": [*(task.history or []), bound]}),
            TaskState.WORKING,
        )
        run = TaskRun(
            self.host,
            resumed,
            owner,
            committed=record,
            dedupe_key=None,
            first=status_event(resumed),
        )
        self.runs.add(run)
        run.run(bound)
        return run.submission

    def _seen(self, message: Message, task: Task) -> bool:
        """Whether the task's history holds this message id already (when ids dedupe)."""
        return self.dedupe_message_ids and any(
            m.message_id == message.message_id for m in task.history or ()
        )

    @staticmethod
    def _check_waiting(task: Task) -> None:
        """Refuse a message to a task that is not waiting for input."""
        if task.status.state.terminal:
            raise UnsupportedOperationError(
                f"task {task.id} is {task.status.state.name} and cannot take messages;"
                " start a new task in the same context with referenceTaskIds"
            )
        if not task.status.state.interrupted:
            raise TaskBusyError(
                f"task {task.id} is busy: it is {task.status.state.name}, not waiting for"
                " input; send this message when it asks for input"
            )
