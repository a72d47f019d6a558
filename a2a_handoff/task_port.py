"""The one port a handler's context asks the runtime through (`agent.TaskContext.port`):
what the runtime implements (`runtime.port.RunPort`), and a test may stand in for."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol

from a2a_handoff.delegated import Delegated
from a2a_handoff.escalation import Escalation
from a2a_handoff.outcomes import Handoff, Route
from a2a_handoff.protocol.mcp_result import ToolResult
from a2a_handoff.protocol.models import Artifact, Task


class TaskPort(Protocol):
    """What a handler's context asks of the runtime that runs the step (the runtime's
    `runtime.port.RunPort`): emit, escalate, hand off, and learn the routes first."""

    async def status(self, text: str) -> None:
        """Emit a WORKING status update carrying an agent message."""

    async def artifact(self, artifact: Artifact) -> None:
        """Emit a new artifact."""

    async def chunk(self, chunk: Artifact, append: bool, last_chunk: bool) -> None:
        """Emit an artifact with an id the handler chose: appended to it, or replacing it."""

    def use_approval(self, decision_id: str) -> bool:
        """Record that an operator's approval was used; False if it was, already."""

    async def inform(self, escalation: Escalation) -> str:
        """Send a non-blocking escalation; the id of the human agent's task for it."""

    async def hand_off(self, decision: Handoff) -> str | None:
        """Hand the task off and wait: None when the target took it, else the refusal."""

    async def delegate(self, step: str, request: Handoff, within: float) -> Delegated:
        """Ask another agent for a sub-result, the task staying WORKING; its outcome."""

    def delegated(self, step: str) -> list[Delegated]:
        """The delegations of earlier steps, at their outcomes when the step `step` began."""

    def route_names(self) -> list[str]:
        """The names of the routes this agent may hand off to."""

    async def route(self, name: str, kind: str = "handoff") -> Route:
        """The route `name`: its target's card and the edge's contract."""

    async def refusal(self, task: Task, decision: Handoff) -> str | None:
        """Why `decision` would be refused now, or None."""

    async def call_tool(
        self,
        server: str,
        tool: str,
        args: Mapping[str, Any] | None,
        idempotency_key: str | None,
    ) -> ToolResult:
        """Call a tool on a configured MCP server (a keyed call: at most once per task)."""

    async def step(self, name: str, fn: Callable[[str], Awaitable[Any]]) -> Any:
        """A journaled step: `fn(key)` once per task, its result recorded, else replayed."""

    async def checkpoint(self, step: str, value: Any) -> None:
        """Record where step `step` got to (JSON), replacing its last checkpoint."""
