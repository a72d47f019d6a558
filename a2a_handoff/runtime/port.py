"""What a running handler reaches through its context: the run's side of `task_port.TaskPort`
— the step's own events here, and one object for each thing the handler reaches beyond its
step: `handing.RunHandoffs`, `delegating.Delegations`, `tool_journal.RunTools`,
`escalations.RunEscalation`.

Invariant: everything a handler emits goes through its run's phase (`runtime.phases`): taken
while the handler runs, dropped once the run was aborted, refused once its step is over.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import cached_property
from typing import Any, Protocol

from a2a_handoff.protocol.models import Artifact, StreamResponse
from a2a_handoff.protocol.shallow import copied
from a2a_handoff.protocol.states import TaskState
from a2a_handoff.protocol.steps import agent_message, appended
from a2a_handoff.runtime.delegating import Delegations
from a2a_handoff.runtime.delegation_writes import Delegator
from a2a_handoff.runtime.escalations import Asking, RunEscalation
from a2a_handoff.runtime.handing import Handing, RunHandoffs
from a2a_handoff.runtime.step_journal import checkpoint, journaled_step
from a2a_handoff.runtime.tool_journal import Caller, RunTools

_event = StreamResponse.__pydantic_validator__.validate_python  # from one dict (`steps`)


class Speaker(Handing, Delegator, Caller, Asking, Protocol):
    """What the port needs from the run it belongs to (`runtime.run.TaskRun`): what each of
    its objects needs."""


class RunPort:
    """One run's port: what its handler's `TaskContext` asks of the runtime."""

    def __init__(self, run: Speaker) -> None:
        self.run = run

    # Each capability made when its handler first reaches for it: most steps use none.

    @cached_property
    def handoffs(self) -> RunHandoffs:
        return RunHandoffs(self.run)

    @cached_property
    def delegation(self) -> Delegations:
        return Delegations(self.run)

    @cached_property
    def tools(self) -> RunTools:
        return RunTools(self.run)

    @cached_property
    def escalation(self) -> RunEscalation:
        return RunEscalation(self.run)

    async def status(self, text: str) -> None:
        run = self.run
        run.speak()
        run.emit_state(TaskState.WORKING, agent_message(text, run.journal.task))

    async def artifact(self, artifact: Artifact) -> None:
        run = self.run
        run.speak()
        task = run.journal.task
        task = copied(task, {"artifacts": [*(task.artifacts or []), artifact]})
        update = {"task_id": task.id, "context_id": task.context_id, "artifact": artifact}
        run.emit(task, _event({"artifact_update": update}))

    async def chunk(self, chunk: Artifact, append: bool, last_chunk: bool) -> None:
        """An artifact (or a piece of one) with an id the handler chose: appended to the
        artifact of that id, or replacing it; the event carries just the chunk."""
        run = self.run
        run.speak()
        artifacts = list(run.journal.task.artifacts or [])
        index = next(
            (i for i, a in enumerate(artifacts) if a.artifact_id == chunk.artifact_id), None
        )
        if append and index is None:
            raise ValueError(f"append: this task has no artifact {chunk.artifact_id!r}")
        if index is None:
            artifacts.append(chunk)
        else:
            artifacts[index] = appended(artifacts[index], chunk) if append else chunk
        task = copied(run.journal.task, {"artifacts": artifacts})
        update = {
            "task_id": task.id,
            "context_id": task.context_id,
            "artifact": chunk,
            "append": append or None,
            "last_chunk": last_chunk,
        }
        run.emit(task, _event({"artifact_update": update}))

    async def step(self, name: str, fn: Callable[[str], Awaitable[Any]]) -> Any:
        """`ctx.step`: done once per task, its result recorded in the task's journal before
        it is returned, and answered from there when asked again (`runtime.step_journal`)."""
        return await journaled_step(self.run, name, fn)

    async def checkpoint(self, step: str, value: Any) -> None:
        """`ctx.checkpoint`: where the step got to, recorded (`runtime.step_journal`)."""
        await checkpoint(self.run, step, value)
