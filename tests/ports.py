"""A handler's port outside any runtime, for tests that run a handler (or a piece of one)
directly: it records what the handler emits and answers its handoffs as told."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from a2a_handoff.agent import Route, TaskContext, TaskPort, ToolResult
from a2a_handoff.delegated import Delegated
from a2a_handoff.escalation import Escalation, EscalationPolicy
from a2a_handoff.outcomes import Handoff
from a2a_handoff.protocol.models import Artifact, Message, Task


@dataclass
class RecordingPort:
    """Implements `agent.TaskPort` and, itself, each of the ports it holds (handoffs,
    delegation, tools, escalation): what is emitted is kept, `hand_off` answers `refused`."""

    refused: str | None = None  # what `hand_off` answers (None: handed over)
    used: set[str] = field(default_factory=set)  # approvals used so far
    statuses: list[str] = field(default_factory=list)
    artifacts: list[Artifact] = field(default_factory=list)
    attempts: list[Handoff] = field(default_factory=list)
    routes: dict[str, Route] = field(default_factory=dict)
    steps: dict[str, Any] = field(default_factory=dict)  # journaled steps' results
    checkpoints: list[Any] = field(default_factory=list)

    @property
    def handoffs(self) -> RecordingPort:
        return self

    @property
    def delegation(self) -> RecordingPort:
        return self

    @property
    def tools(self) -> RecordingPort:
        return self

    @property
    def escalation(self) -> RecordingPort:
        return self

    async def status(self, text: str) -> None:
        self.statuses.append(text)

    async def artifact(self, artifact: Artifact) -> None:
        self.artifacts.append(artifact)

    async def chunk(self, chunk: Artifact, append: bool, last_chunk: bool) -> None:
        self.artifacts.append(chunk)

    def use_approval(self, decision_id: str) -> bool:
        if decision_id in self.used:
            return False
        self.used.add(decision_id)
        return True

    async def inform(self, escalation: Escalation) -> str:
        raise RuntimeError("no human agent outside a runtime")

    async def hand_off(self, decision: Handoff) -> str | None:
        self.attempts.append(decision)
        return self.refused

    def route_names(self) -> list[str]:
        return list(self.routes)

    async def route(self, name: str, kind: str) -> Route:
        return self.routes[name]

    async def refusal(self, decision: Handoff) -> str | None:
        return None

    async def delegate(self, step: str, request: Handoff, within: float) -> Delegated:
        raise RuntimeError("no other agents outside a runtime")

    def earlier(self, step: str) -> list[Delegated]:
        return []

    async def call_tool(
        self, server: str, tool: str, args: Mapping[str, Any] | None, key: str | None
    ) -> ToolResult:
        raise RuntimeError("no MCP servers outside a runtime")

    async def checkpoint(self, step: str, value: Any) -> None:
        self.checkpoints.append(value)

    async def step(self, name: str, fn: Callable[[str], Awaitable[Any]]) -> Any:
        if name not in self.steps:
            self.steps[name] = await fn(f"task/{name}")
        return self.steps[name]


def context(
    message: Message,
    task: Task,
    port: TaskPort | None = None,
    policy: EscalationPolicy | None = None,
) -> TaskContext:
    """A handler's context for `message` on `task`, through `port` (a new recording one)."""
    return TaskContext(message, task, port or RecordingPort(), policy=policy or EscalationPolicy())
