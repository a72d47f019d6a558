"""The agent API: an agent is a small object with one async `handle(ctx)` method.

The handler reads the context (the message, the task, its history), emits progress through
it (`status`, `artifact`, and `artifact_stream` for an artifact sent in chunks, such as a
language model's tokens), and ends by returning an outcome — or None, which completes the
task; `Reply` answers with a direct Message instead of a task. What it reaches beyond its own
step has an object each: `ctx.handoffs` (routes, hand off now), `ctx.delegation` (ask another
agent), `ctx.tools` (MCP tools), `ctx.escalation` (approvals, notices to a human).

An exception ends the task FAILED with its message; cancelling the task cancels the handler.
Emitting never waits for the disk: the library groups a step's events into one durable
write, and answers callers only once that write is committed.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar, cast

from a2a_handoff.artifact_stream import ArtifactStream, artifact_of
from a2a_handoff.delegation import Delegation
from a2a_handoff.escalation import Decision, EscalationPolicy
from a2a_handoff.guards import Escalations
from a2a_handoff.handoff_routes import HandoffRoutes
from a2a_handoff.outcomes import (
    Completed,
    Failed,
    Handoff,
    InputRequired,
    Outcome,
    Rejected,
    Reply,
    Route,
)
from a2a_handoff.protocol.extension import HANDOFF_EXTENSION_URI, ext_metadata
from a2a_handoff.protocol.mcp_result import ToolResult
from a2a_handoff.protocol.models import Artifact, Message, Part, Task
from a2a_handoff.protocol.steps import agent_message
from a2a_handoff.task_port import TaskPort
from a2a_handoff.tool_calls import ToolCalls

__all__ = [
    "Agent",
    "ArtifactStream",
    "Completed",
    "Delegation",
    "Escalations",
    "Failed",
    "Handoff",
    "HandoffRoutes",
    "InputRequired",
    "Outcome",
    "ProvenHandoff",
    "Rejected",
    "Reply",
    "Route",
    "TaskContext",
    "TaskPort",
    "ToolCalls",
    "ToolResult",
    "agent_message",
]


T = TypeVar("T")


class Agent(Protocol):
    """What the server runs for each task step."""

    async def handle(self, ctx: TaskContext) -> Outcome | None:
        """Work on `ctx.message`; return how the step ends (None = completed)."""
        ...


class ProvenHandoff(Protocol):
    """The handoff that started a step, as a handler reads it: proven when it arrived
    (signature, signer and caller — see `handoff.verified.VerifiedEnvelope`)."""

    @property
    def transfer_context(self) -> dict[str, Any]: ...

    @property
    def decision(self) -> Decision | None: ...

    @property
    def signer(self) -> str: ...


@dataclass(slots=True)
class TaskContext:
    """What a handler sees and how it reports progress (through `port`); what it reaches
    beyond its step, one object each: `handoffs`, `delegation`, `tools`, `escalation`."""

    message: Message
    task: Task
    port: TaskPort = field(repr=False)
    envelope: ProvenHandoff | None = None  # the proven handoff that started this step
    policy: EscalationPolicy = field(default_factory=EscalationPolicy)
    principal: str = ""  # the caller the task belongs to: its owner ("" without authentication)
    tenant: str = ""  # the tenant the task was made in ("": the default tenant)
    _artifacts: int = field(default=0, init=False, repr=False)  # artifact ids given out
    # Each capability made when the handler first reaches for it: most steps use none.
    _handoffs: HandoffRoutes | None = field(default=None, init=False, repr=False)
    _delegation: Delegation | None = field(default=None, init=False, repr=False)
    _tools: ToolCalls | None = field(default=None, init=False, repr=False)
    _escalation: Escalations | None = field(default=None, init=False, repr=False)

    @property
    def handoffs(self) -> HandoffRoutes:
        """The routes this agent may hand off on; a handoff made now."""
        if self._handoffs is None:
            self._handoffs = HandoffRoutes(self.port.handoffs)
        return self._handoffs

    @property
    def delegation(self) -> Delegation:
        """Sub-results asked of other agents."""
        if self._delegation is None:
            self._delegation = Delegation(self.port.delegation, self.message.message_id)
        return self._delegation

    @property
    def tools(self) -> ToolCalls:
        """The configured MCP servers' tools."""
        if self._tools is None:
            self._tools = ToolCalls(self.port.tools)
        return self._tools

    @property
    def escalation(self) -> Escalations:
        """Approvals asked of a human; notices to one."""
        if self._escalation is None:
            self._escalation = Escalations(self.port.escalation, self)
        return self._escalation

    def new_artifact_id(self) -> str:
        """An id for a new artifact of this step: the n-th asked for is the same each time
        the step's handler runs (a resumed run's artifacts match what was sent before)."""
        self._artifacts += 1
        name = f"{self.task.id}/{self.message.message_id}/{self._artifacts}"
        h = hashlib.blake2b(name.encode(), digest_size=16).hexdigest()
        return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"  # a UUID's shape

    @property
    def transfer_context(self) -> dict[str, Any]:
        """What the agent that handed this task over passed along (empty otherwise).

        Kept across follow-ups: the handoff message, first in the history, carries it (it
        was proven when it arrived, and the store keeps it as it was).
        """
        if self.envelope is not None:
            return self.envelope.transfer_context
        history = self.task.history or []
        carried = (history[0].metadata or {}).get(HANDOFF_EXTENSION_URI) if history else None
        context = carried.get("transferContext") if isinstance(carried, dict) else None
        return dict(context) if isinstance(context, dict) else {}

    @property
    def decision(self) -> Decision | None:
        """The operator's decision this task was handed back with, after an escalation.

        Only a decision a trusted human agent signed, proven when it arrived (see
        `handoff.verified`); never one read from the message's text or data.
        """
        if self.envelope is not None:
            return self.envelope.decision
        return Decision.from_stored(ext_metadata(self.task).get("decision"))

    async def step(self, name: str, fn: Callable[[str], Awaitable[T]]) -> T:
        """A side effect of the handler's own, done once for this task: `fn(key)` is awaited
        and its result (JSON) recorded in the task's journal before it is returned. Asked
        again on this task — by the handler run again after a crash (`resumes = True`), or in
        a later step — it returns the recorded result without calling `fn`.

        `key` (the task's id and `name`) is the same on every run: pass it to the service
        that does the work as its idempotency key. A crash after `fn` finished but before
        its record committed calls `fn` again with that key, so the service does the work
        once. An exception from `fn` is not recorded (asked again, `fn` runs again)::

            paid = await ctx.step("refund", lambda key: payments.refund(order, 49.99, key))
        """
        return cast(T, await self.port.step(name, fn))

    async def checkpoint(self, value: Any) -> None:
        """Record where this step got to (JSON, at most 256 KiB), replacing its last
        checkpoint, before it returns: run again after a crash, the step reads it back as
        `ctx.checkpointed` and goes on from there (the Agents SDK adapter keeps its run's
        state this way)."""
        await self.port.checkpoint(self.message.message_id, value)

    @property
    def checkpointed(self) -> Any:
        """What this step recorded with `checkpoint` before a crash cut it (None: nothing,
        or a step that runs for the first time)."""
        kept = ext_metadata(self.task).get("checkpoint")
        if isinstance(kept, dict) and kept.get("step") == self.message.message_id:
            return kept.get("value")
        return None

    @property
    def delegated(self) -> bool:
        """Whether this task is a sub-task another agent delegated to this one."""
        return (ext_metadata(self.task).get("handoff") or {}).get("kind") == "delegation"

    @property
    def text(self) -> str:
        """The text of the message that started this step."""
        return self.message.text

    @property
    def history(self) -> list[Message]:
        """Every message of the task so far, this step's included."""
        return list(self.task.history or [])

    @property
    def task_id(self) -> str:
        return self.task.id

    @property
    def context_id(self) -> str:
        return self.task.context_id

    async def status(self, text: str) -> None:
        """Report progress: a WORKING status update carrying an agent message."""
        await self.port.status(text)

    async def artifact(
        self,
        *parts: Part,
        text: str | None = None,
        data: Any = None,
        name: str | None = None,
        description: str | None = None,
        artifact_id: str | None = None,
        append: bool = False,
        last_chunk: bool | None = None,
    ) -> Artifact:
        """Publish an artifact made of `parts`, or of a text and/or a data part.

        A chunk of an artifact sent in pieces: `append=True` adds the parts to the artifact
        `artifact_id` published before (the task stores one artifact), `last_chunk=True`
        says it is complete (`artifact_stream()` does both for you). Publishing again an
        `artifact_id` without `append` replaces that artifact.
        """
        if append and not artifact_id:
            raise ValueError("append needs the artifact_id of the artifact to append to")
        given = artifact_id or self.new_artifact_id()
        artifact = artifact_of(given, parts, text, data, name, description)
        if append or last_chunk is not None or artifact_id:
            await self.port.chunk(artifact, append, bool(last_chunk))
        else:
            await self.port.artifact(artifact)
        return artifact

    @contextlib.asynccontextmanager
    async def artifact_stream(
        self, name: str | None = None, *, description: str | None = None
    ) -> AsyncIterator[ArtifactStream]:
        """An artifact written in chunks: `async with ctx.artifact_stream("answer") as a:
        await a.write(token)`. Each write is an artifact update (`append` after the first);
        leaving the block sends the last chunk (`lastChunk`). The task keeps one artifact,
        its text chunks joined. An exception inside the block leaves it unfinished."""
        stream = ArtifactStream(self, self.new_artifact_id(), name, description)
        yield stream
        await stream.close()
