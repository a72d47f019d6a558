"""a2a-handoff: A2A 1.0 agents as HTTP services, with atomic handoff between them.

The front door: what a handler author (the agent API, outcomes, escalation, cards, the wire
values a handler reads) and an app author (`create_app` and its settings — or the agent's
`AgentService` and its `agent_routes`, for an app of one's own —, stores, the client, the
public errors) use. Everything else is imported from its room
(`a2a_handoff.client`, `a2a_handoff.contracts`, `a2a_handoff.trust`, …).

The handler API is imported with the package; the server, the stores and the client — and
with them httpx, joserfc, aiosqlite and prometheus-client — the first time one of their
names is looked up here (`from a2a_handoff import create_app`).
"""

import typing as _typing
from importlib import import_module as _import_module

from a2a_handoff.agent import Agent, ArtifactStream, TaskContext
from a2a_handoff.delegated import Delegated
from a2a_handoff.errors import (
    AgentUrlError,
    CircuitOpenError,
    ConfigError,
    GateRefused,
    HandoffError,
    IncompleteEscalationError,
    RemoteError,
    StoreError,
    ToolCallError,
    TrustError,
    UnavailableError,
)
from a2a_handoff.escalation import (
    Action,
    Decision,
    Escalate,
    Escalation,
    EscalationPolicy,
    Need,
    Trigger,
    Verdict,
)
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
from a2a_handoff.protocol.agent_card import AgentCard, AgentProvider, AgentSkill, build_card, skill
from a2a_handoff.protocol.extension import HANDOFF_EXTENSION_URI
from a2a_handoff.protocol.mcp_result import ToolResult
from a2a_handoff.protocol.models import Artifact, Message, Part, Role, Task
from a2a_handoff.protocol.states import TaskState
from a2a_handoff.version import __version__ as __version__

if _typing.TYPE_CHECKING:
    from a2a_handoff.auth import ApiKeyAuth
    from a2a_handoff.client.client import AgentClient
    from a2a_handoff.client.retry import RetryPolicy
    from a2a_handoff.push import PushSettings
    from a2a_handoff.runtime.local import LocalTasks
    from a2a_handoff.server.app import create_app
    from a2a_handoff.server.app_config import (
        HandoffConfig,
        LimitsConfig,
        ObservabilityConfig,
        ToolsConfig,
        TrustConfig,
    )
    from a2a_handoff.server.routes import agent_routes
    from a2a_handoff.server.service import AgentService
    from a2a_handoff.stores import MemoryTaskStore, SqliteTaskStore, TaskStore, open_store

# name → the module it is imported from when first looked up
_LAZY = {
    "AgentClient": "a2a_handoff.client.client",
    "AgentService": "a2a_handoff.server.service",
    "ApiKeyAuth": "a2a_handoff.auth",
    "HandoffConfig": "a2a_handoff.server.app_config",
    "LimitsConfig": "a2a_handoff.server.app_config",
    "LocalTasks": "a2a_handoff.runtime.local",
    "MemoryTaskStore": "a2a_handoff.stores",
    "ObservabilityConfig": "a2a_handoff.server.app_config",
    "PushSettings": "a2a_handoff.push",
    "RetryPolicy": "a2a_handoff.client.retry",
    "SqliteTaskStore": "a2a_handoff.stores",
    "TaskStore": "a2a_handoff.stores",
    "ToolsConfig": "a2a_handoff.server.app_config",
    "TrustConfig": "a2a_handoff.server.app_config",
    "agent_routes": "a2a_handoff.server.routes",
    "create_app": "a2a_handoff.server.app",
    "open_store": "a2a_handoff.stores",
}


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'a2a_handoff' has no attribute {name!r}")
    value = getattr(_import_module(module), name)
    globals()[name] = value  # looked up once
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


__all__ = [  # noqa: RUF022 - plain sorted(), as the export test checks
    "Action",
    "Agent",
    "AgentCard",
    "AgentClient",
    "AgentProvider",
    "AgentService",
    "AgentSkill",
    "AgentUrlError",
    "ApiKeyAuth",
    "Artifact",
    "ArtifactStream",
    "CircuitOpenError",
    "Completed",
    "ConfigError",
    "Decision",
    "Delegated",
    "Escalate",
    "Escalation",
    "EscalationPolicy",
    "Failed",
    "GateRefused",
    "HANDOFF_EXTENSION_URI",
    "Handoff",
    "HandoffConfig",
    "HandoffError",
    "IncompleteEscalationError",
    "InputRequired",
    "LimitsConfig",
    "LocalTasks",
    "MemoryTaskStore",
    "Message",
    "Need",
    "ObservabilityConfig",
    "Outcome",
    "Part",
    "PushSettings",
    "Rejected",
    "RemoteError",
    "Reply",
    "RetryPolicy",
    "Role",
    "Route",
    "SqliteTaskStore",
    "StoreError",
    "Task",
    "TaskContext",
    "TaskState",
    "TaskStore",
    "ToolCallError",
    "ToolResult",
    "ToolsConfig",
    "Trigger",
    "TrustConfig",
    "TrustError",
    "UnavailableError",
    "Verdict",
    "agent_routes",
    "build_card",
    "create_app",
    "open_store",
    "skill",
]
