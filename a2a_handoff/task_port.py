"""The ports a handler's context asks the runtime through (`agent.TaskContext.port`): what the
runtime implements (`runtime.port.RunPort` and the objects it holds), and a test may stand in
for.

One small port for the step's own events (`EventPort`: status, artifacts, journaled steps, the
checkpoint), and one for each thing a handler reaches beyond its step — handing off, asking
another agent, calling a tool, asking a human. The handler sees each through an object of its
own (`ctx.handoffs`, `ctx.delegation`, `ctx.tools`, `ctx.escalation`): these ports are their
runtime side, positional and bare, the defaults and the documentation being the objects'.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol

from a2a_handoff.delegated import Delegated
from a2a_handoff.escalation import Escalation
from a2a_handoff.outcomes import Handoff, Route
from a2a_handoff.protocol.mcp_result import ToolResult
from a2a_handoff.protocol.models import Artifact


class EventPort(Protocol):
    """The step's own events: emitted, or recorded in the task's journal."""

    async def status(self, text: str) -> None:
        """Emit a WORKING status update carrying an agent message."""

    async def artifact(self, artifact: Artifact) -> None:
        """Emit a new artifact."""

    async def chunk(self, chunk: Artifact, append: bool, last_chunk: bool) -> None:
        """Emit an artifact with an id the handler chose: appended to it, or replacing it."""

    async def step(self, name: str, fn: Callable[[str], Awaitable[Any]]) -> Any:
        """A journaled step: `fn(key)` once per task, its result recorded, else replayed."""

    async def checkpoint(self, step: str, value: Any) -> None:
        """Record where step `step` got to (JSON), replacing its last checkpoint."""


class HandoffPort(Protocol):
    """Handing the task off (`ctx.handoffs`): the routes, and the gate asked first."""

    def route_names(self) -> list[str]:
        """The names of the routes this agent may hand off to."""

    async def route(self, name: str, kind: str) -> Route:
        """The route `name`: its target's card and the edge's contract."""

    async def refusal(self, decision: Handoff) -> str | None:
        """Why `decision` would be refused now, or None."""

    async def hand_off(self, decision: Handoff) -> str | None:
        """Hand the task off and wait: None when the target took it, else the refusal."""


class DelegationPort(Protocol):
    """Asking another agent for a sub-result (`ctx.delegation`), the task staying WORKING."""

    async def delegate(self, step: str, request: Handoff, within: float) -> Delegated:
        """Send `request` from step `step` and wait for its outcome (at most `within` s)."""

    def earlier(self, step: str) -> list[Delegated]:
        """The delegations of earlier steps, at their outcomes when the step `step` began."""


class ToolPort(Protocol):
    """Calling tools on the MCP servers the agent was configured with (`ctx.tools`)."""

    async def call_tool(
        self, server: str, tool: str, args: Mapping[str, Any] | None, key: str | None
    ) -> ToolResult:
        """Call a tool on a configured MCP server (a keyed call: at most once per task)."""


class EscalationPort(Protocol):
    """Asking a human (`ctx.escalation`): approvals used, notices sent."""

    def use_approval(self, decision_id: str) -> bool:
        """Record that an operator's approval was used; False if it was, already."""

    async def inform(self, escalation: Escalation) -> str:
        """Send a non-blocking escalation; the id of the human agent's task for it."""


class TaskPort(EventPort, Protocol):
    """Everything a run gives its handler's context: the event port, and one port for each
    thing the handler reaches beyond its step."""

    @property
    def handoffs(self) -> HandoffPort: ...

    @property
    def delegation(self) -> DelegationPort: ...

    @property
    def tools(self) -> ToolPort: ...

    @property
    def escalation(self) -> EscalationPort: ...
