"""a2a-handoff: A2A 1.0 agents as HTTP services, with atomic handoff between them.

The front door: what a handler author (the agent API, outcomes, escalation, cards, the wire
values a handler reads) and an app author (`create_app` and its settings, stores, the
client, the root of the errors) use. Everything else is imported from its room
(`a2a_handoff.errors` for each error, `a2a_handoff.escalation`, `a2a_handoff.client`,
`a2a_handoff.contracts`, `a2a_handoff.trust`, …).

The handler API is imported with the package; the server, the stores and the client — and
with them httpx, joserfc, aiosqlite and prometheus-client — the first time one of their
names is looked up here (`from a2a_handoff import create_app`).
"""

import typing as _typing
from importlib import import_module as _import_module

from a2a_handoff.agent import Agent, ArtifactStream, TaskContext
from a2a_handoff.delegated import Delegated
from a2a_handoff.errors import HandoffError
from a2a_handoff.escalation import Decision, Escalate, Escalation, EscalationPolicy, Verdict
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
from a2a_handoff.protocol.agent_card import AgentCard, build_card, skill
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
    from a2a_handoff.stores import MemoryTaskStore, SqliteTaskStore, TaskStore, open_store

# name → the module it is imported from when first looked up
_LAZY = {
    "AgentClient": "a2a_handoff.client.client",
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
    "Agent",
    "AgentCard",
    "AgentClient",
    "ApiKeyAuth",
    "Artifact",
    "ArtifactStream",
    "Completed",
    "Decision",
    "Delegated",
    "Escalate",
    "Escalation",
    "EscalationPolicy",
    "Failed",
    "HANDOFF_EXTENSION_URI",
    "Handoff",
    "HandoffConfig",
    "HandoffError",
    "InputRequired",
    "LimitsConfig",
    "LocalTasks",
    "MemoryTaskStore",
    "Message",
    "ObservabilityConfig",
    "Outcome",
    "Part",
    "PushSettings",
    "Rejected",
    "Reply",
    "RetryPolicy",
    "Role",
    "Route",
    "SqliteTaskStore",
    "Task",
    "TaskContext",
    "TaskState",
    "TaskStore",
    "ToolResult",
    "ToolsConfig",
    "TrustConfig",
    "Verdict",
    "build_card",
    "create_app",
    "open_store",
    "skill",
]
