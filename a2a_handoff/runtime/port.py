"""What a running handler reaches through its context: the run's side of `agent.TaskPort`.

Invariants:
- everything a handler emits goes through its run's phase (`runtime.phases`): taken while
  the handler runs, dropped once the run was aborted, refused once its step is over;
- a handoff the handler makes itself (`ctx.hand_off`) is checkpointed before anything is
  sent, and while it is under way the task cannot be canceled.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol

from a2a_handoff.client.mcp_tools import McpTools
from a2a_handoff.delegated import Delegated
from a2a_handoff.errors import GateRefused, InternalError
from a2a_handoff.escalation import Escalation
from a2a_handoff.handoff.handoffs import Handoffs
from a2a_handoff.handoff.job import DeliveryJob
from a2a_handoff.outcomes import Handoff, Route
from a2a_handoff.protocol.extension import HANDOFF_EXTENSION_URI, ext_metadata, with_ext_metadata
from a2a_handoff.protocol.mcp_result import ToolResult
from a2a_handoff.protocol.models import (
    Artifact,
    Message,
    StreamResponse,
    Task,
    TaskArtifactUpdateEvent,
)
from a2a_handoff.protocol.shallow import copied
from a2a_handoff.protocol.states import TaskState
from a2a_handoff.protocol.steps import agent_message, appended, status_event
from a2a_handoff.runtime.delegating import Delegations
from a2a_handoff.runtime.journal import Journal
from a2a_handoff.runtime.phases import Phase
from a2a_handoff.runtime.replay import Replay
from a2a_handoff.runtime.step_journal import checkpoint, journaled_step
from a2a_handoff.runtime.tool_journal import call_tool


class Speaker(Protocol):
    """What the port needs from the run it belongs to (`runtime.run.TaskRun`)."""

    journal: Journal
    replay: Replay | None

    @property
    def phase(self) -> Phase: ...

    @property
    def handoffs(self) -> Handoffs: ...

    @property
    def acting_for(self) -> str: ...

    @property
    def tools(self) -> McpTools | None: ...

    def advance(self, phase: Phase) -> None: ...

    def speak(self) -> None: ...

    def emit(self, task: Task, item: StreamResponse) -> None: ...

    def emit_state(self, state: TaskState, message: Message | None = None) -> None: ...


class RunPort:
    """One run's port: what its handler's `TaskContext` asks of the runtime."""

    def __init__(self, run: Speaker) -> None:
        self.run = run
        self.notices = 0  # non-blocking escalations sent, each with a key of its own
        self.delegations = Delegations(run)

    async def status(self, text: str) -> None:
        run = self.run
        run.speak()
        run.emit_state(TaskState.WORKING, agent_message(text, run.journal.task))

    async def artifact(self, artifact: Artifact) -> None:
        run = self.run
        run.speak()
        task = run.journal.task
        task = copied(task, {"artifacts": [*(task.artifacts or []), artifact]})
        run.emit(
            task,
            StreamResponse(
                artifact_update=TaskArtifactUpdateEvent(
                    task_id=task.id, context_id=task.context_id, artifact=artifact
                )
            ),
        )

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
        task = run.journal.task.model_copy(update={"artifacts": artifacts})
        run.emit(
            task,
            StreamResponse(
                artifact_update=TaskArtifactUpdateEvent(
                    task_id=task.id,
                    context_id=task.context_id,
                    artifact=chunk,
                    append=append or None,
                    last_chunk=last_chunk,
                )
            ),
        )

    def use_approval(self, decision_id: str) -> bool:
        """Record that an operator's approval was used (False: it was, already). Kept in the
        task's metadata, written with the step's events — the receiver makes sure no other
        task ever holds the same decision (it deduplicates returns on the decision's id)."""
        run = self.run
        run.speak()
        used = ext_metadata(run.journal.task).get("approvalsUsed") or []
        if decision_id in used:  # used — by this very step, when it is run again: replayed
            return run.replay is not None and run.replay.reuse(decision_id)
        task = with_ext_metadata(run.journal.task, approvalsUsed=[*used, decision_id])
        run.emit(task, status_event(task, {HANDOFF_EXTENSION_URI: {"approvalUsed": decision_id}}))
        return True

    async def inform(self, escalation: Escalation) -> str:
        """A non-blocking escalation: delivered (durably taken by the human agent) first."""
        run = self.run
        run.speak()
        self.notices += 1
        handoffs = run.handoffs
        envelope, envelope_json = await handoffs.sender.prepare(
            run.journal.task,
            Handoff.to_human(escalation, blocking=False),
            run.acting_for,
            key_salt=f"notice:{self.notices}",
        )
        created = await handoffs.notices.send(envelope, envelope_json)
        await self.status(
            f"Informed {envelope.target.agent} (task {created.id}): {escalation.what_is_needed}"
        )
        return created.id

    async def delegate(self, step: str, request: Handoff, within: float) -> Delegated:
        """Ask another agent for a sub-result, the task staying WORKING (`runtime.delegating`)."""
        return await self.delegations.delegate(step, request, within)

    def delegated(self, step: str) -> list[Delegated]:
        return self.delegations.made(step)

    async def call_tool(
        self,
        server: str,
        tool: str,
        args: Mapping[str, Any] | None,
        idempotency_key: str | None,
    ) -> ToolResult:
        """`ctx.call_tool`: a keyed call is recorded in the task's journal before its result
        is returned, and answered from there when made again (`runtime.tool_journal`)."""
        return await call_tool(self.run, server, tool, args, idempotency_key)

    async def step(self, name: str, fn: Callable[[str], Awaitable[Any]]) -> Any:
        """`ctx.step`: done once per task, its result recorded in the task's journal before
        it is returned, and answered from there when asked again (`runtime.step_journal`)."""
        return await journaled_step(self.run, name, fn)

    async def checkpoint(self, step: str, value: Any) -> None:
        """`ctx.checkpoint`: where the step got to, recorded (`runtime.step_journal`)."""
        await checkpoint(self.run, step, value)

    def route_names(self) -> list[str]:
        return self.run.handoffs.sender.route_names()

    async def route(self, name: str, kind: str = "handoff") -> Route:
        return await self.run.handoffs.sender.route(name, kind)

    async def refusal(self, task: Task, decision: Handoff) -> str | None:
        return await self.run.handoffs.sender.refusal(task, decision)

    async def hand_off(self, decision: Handoff) -> str | None:
        """`ctx.hand_off`: checkpoint the handoff and wait for its delivery's answer; the
        reason it was refused (the task WORKING again), or None: handed over."""
        run = self.run
        if run.phase is Phase.HANDED_OVER:
            raise RuntimeError("this task was handed off already")
        journal, handoffs = run.journal, run.handoffs
        try:
            envelope, envelope_json = await handoffs.sender.prepare(
                journal.task, decision, run.acting_for
            )
        except GateRefused as exc:
            return str(exc)
        refusal = handoffs.sender.loop_refusal(envelope)
        if refusal is not None:
            return refusal
        run.speak()  # the task is written now: no direct Message after this
        await journal.drain()
        if journal.pending or journal.committed is None or journal.settled.done():
            raise InternalError("the task could not be stored before the handoff")
        run.advance(Phase.HANDING_OFF)
        try:
            record, entry = await handoffs.sender.checkpoint(
                journal.committed, envelope, envelope_json
            )
        except BaseException:
            if run.phase is Phase.HANDING_OFF:
                run.advance(Phase.SPEAKING)
            raise
        journal.committed = record
        journal.task = record.task
        job = handoffs.outbox.spawn(
            DeliveryJob(entry, True, envelope, record, True), journal.settle
        )
        try:
            final = await asyncio.shield(job)
        except Exception:
            final = None  # left pending: the outbox replays it and settles the task
        if final is not None and not final.state.terminal:
            journal.committed = final
            journal.task = final.task
            run.advance(Phase.SPEAKING)
            refused = ext_metadata(final.task).get("refused") or {}
            return str(refused.get("reason") or "the handoff was refused")
        run.advance(Phase.HANDED_OVER)
        return None
