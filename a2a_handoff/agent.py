"""The agent API: an agent is a small object with one async `handle(ctx)` method.

The handler reads the context (the message, the task, its history), emits progress through
it (`status`, `artifact`, and `artifact_stream` for an artifact sent in chunks, such as a
language model's tokens), and ends by returning an outcome — or None, which completes the
task; `Reply` answers with a direct Message instead of a task. An exception ends the task
FAILED with its message; cancelling the task cancels the handler. Emitting never waits for
the disk: the library groups a step's events into one durable write, and answers callers
only once that write is committed.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar, cast

from a2a_handoff.artifact_stream import ArtifactStream, artifact_of
from a2a_handoff.delegated import Delegated
from a2a_handoff.escalation import (
    Action,
    Decision,
    Escalate,
    Escalation,
    EscalationPolicy,
)
from a2a_handoff.guards import guarded
from a2a_handoff.outcomes import (
    Completed,
    Failed,
    Handoff,
    InputRequired,
    Outcome,
    Rejected,
    Reply,
    Route,
    delegation_request,
)
from a2a_handoff.protocol.extension import HANDOFF_EXTENSION_URI, ext_metadata
from a2a_handoff.protocol.mcp_result import ToolResult
from a2a_handoff.protocol.models import Artifact, Message, Part, Task
from a2a_handoff.protocol.steps import agent_message
from a2a_handoff.task_port import TaskPort

__all__ = [
    "Agent",
    "ArtifactStream",
    "Completed",
    "Failed",
    "Handoff",
    "InputRequired",
    "Outcome",
    "ProvenHandoff",
    "Rejected",
    "Reply",
    "Route",
    "TaskContext",
    "TaskPort",
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
    """What a handler sees and how it reports progress (through `port`)."""

    message: Message
    task: Task
    port: TaskPort = field(repr=False)
    envelope: ProvenHandoff | None = None  # the proven handoff that started this step
    policy: EscalationPolicy = field(default_factory=EscalationPolicy)
    principal: str = ""  # the caller the task belongs to: its owner ("" without authentication)
    _artifacts: int = field(default=0, init=False, repr=False)  # artifact ids given out

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

    def guard(
        self,
        action: Action,
        *,
        what_happened: str,
        tried: list[str],
        resume: Mapping[str, Any] | None = None,
    ) -> Escalate | Rejected | None:
        """Hold `action` back until a human approved it, when the policy says so.

        None: run it (no rule holds it, or an operator approved exactly this action: by a
        decision a trusted human agent signed, not expired, and not used before).
        `Escalate`: return it — the task goes to the human agent before anything runs.
        `Rejected`: return it — the operator (or the timeout fallback) said no, or the
        approval was used already.
        """
        return guarded(self, action, what_happened, tried, resume)

    async def inform(self, escalation: Escalation) -> str:
        """A non-blocking escalation: the human agent takes it durably, the task goes on.

        Returns the id of the task the human agent holds for it. Raises when the human
        agent cannot be reached (after retries): nothing goes on uninformed.
        """
        return await self.port.inform(escalation)

    async def call_tool(
        self,
        server: str,
        tool: str,
        args: Mapping[str, Any] | None = None,
        *,
        idempotency_key: str | None = None,
    ) -> ToolResult:
        """Call `tool` on the MCP server configured as `server` (`ToolsConfig.mcp`,
        `--mcp NAME=URL`); its result. `ToolCallError` when the tool answered `isError`
        (its text), the server failed, could not be reached or gave no answer in time
        (`ToolsConfig.timeout`), or `server` is not configured.

        With an `idempotency_key` the call is retried on a failed connection (the server
        gets the key in the call's `_meta`), and recorded in the task's journal once it
        completed: made again with the same key on this task — by a handler the agent runs
        again after a restart (`resumes = True`), or in a later step — it answers the
        recorded result (or raises the recorded error) without calling. Without a key the
        call is made once, as it is.
        """
        return await self.port.call_tool(server, tool, args, idempotency_key)

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
    def routes(self) -> list[str]:
        """The names of the routes this agent may hand off to."""
        return self.port.route_names()

    async def route(self, name: str, kind: str = "handoff") -> Route:
        """The route `name`: its target's card and the edge's contract (when contracts are
        on). Raises GateRefused for a name that is not a route."""
        return await self.port.route(name, kind)

    async def check_handoff(self, decision: Handoff | Escalate) -> str | None:
        """Why returning `decision` now would fail the task — the capability gate, the
        edge's contract, the target's loop guard — or None when it would go. Nothing is
        sent or written: a handler may choose again. (A target may still refuse what it
        alone can judge, such as its own acceptance criteria: the contract's `on_reject`
        path then applies, as to any handoff.)"""
        if isinstance(decision, Escalate):
            decision = Handoff.to_human(decision.escalation)
        return await self.port.refusal(self.task, decision)

    async def hand_off(self, decision: Handoff) -> str | None:
        """Hand the task off now and wait for the answer, instead of returning the handoff.

        None: the target took it — the task is TRANSFERRED and the step is over (what the
        handler returns after it is ignored). A reason: refused by the gate, the edge's
        contract, the target's loop guard, or the target itself where the contract sends
        a refusal back to the source (`on_reject: source`, or no contract) — the task is
        WORKING again, the refusal in its history, and the handler may choose again.

        From its checkpoint on, the handoff is as durable as a returned one: if the process
        dies while it waits, the outbox replays it after the restart with today's rules (a
        refusal then fails the task or follows the contract: no handler waits any more).
        """
        return await self.port.hand_off(decision)

    async def delegate(
        self, route: str, request: str | Message, *, context: Mapping[str, Any] | None = None,
        required: tuple[str, ...] = (), reason: str | None = None, within: float = 60.0,
    ) -> Delegated:  # fmt: skip
        """Ask the agent at `route` for a sub-result and wait for it, this task staying
        WORKING (docs/delegation.md). The delegate reads `request` as `ctx.text` and `context`
        as `ctx.transfer_context`; signed, gated (`required`), under the edge's contract and
        the delegate's trust list, as a handoff. The outcome is a `Delegated` whatever happens
        (FAILED after `within` seconds), recorded before it is returned: a handler run again
        after a restart gets it back for the same request, and the delegate works once."""
        decision = delegation_request(route, request, context, required, reason)
        return await self.port.delegate(self.message.message_id, decision, within)

    @property
    def delegations(self) -> list[Delegated]:
        """The delegations of earlier steps, at the outcome each had when this step began
        (the same after a restart): one asking for input is answered here (`answer()`)."""
        return self.port.delegated(self.message.message_id)

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
