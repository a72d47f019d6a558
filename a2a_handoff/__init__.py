"""a2a-handoff: A2A 1.0 agents as HTTP services, with atomic handoff between them.

The front door: what a handler author (the agent API, outcomes, escalation, cards, the wire
values a handler reads) and an app author (`create_app` and its settings, stores, the
client, the root of the errors) use. Everything else is imported from its room
(`a2a_handoff.errors` for each error, `a2a_handoff.escalation`, `a2a_handoff.client`,
`a2a_handoff.contracts`, `a2a_handoff.trust`, …).

The handler API is imported with the package; the server, the stores and the client — and
with them httpx, joserfc, aiosqlite and prometheus-client — the first time one of their
names is looked up here (`from a2a_handoff import create_app`).

Each name is written once for each reader: an eager one in its import (`X as X`, which type
checkers read as an export); a lazy one in the `TYPE_CHECKING` block for type checkers and
in `_LAZY` for the interpreter (a test holds the two equal). `__all__` is made from them.
"""

import typing as _typing
from importlib import import_module as _import_module
from types import ModuleType as _ModuleType

from a2a_handoff.agent import Agent as Agent
from a2a_handoff.agent import ArtifactStream as ArtifactStream
from a2a_handoff.agent import TaskContext as TaskContext
from a2a_handoff.delegated import Delegated as Delegated
from a2a_handoff.errors import HandoffError as HandoffError
from a2a_handoff.escalation import Decision as Decision
from a2a_handoff.escalation import Escalate as Escalate
from a2a_handoff.escalation import Escalation as Escalation
from a2a_handoff.escalation import EscalationPolicy as EscalationPolicy
from a2a_handoff.escalation import Verdict as Verdict
from a2a_handoff.outcomes import Completed as Completed
from a2a_handoff.outcomes import Failed as Failed
from a2a_handoff.outcomes import Handoff as Handoff
from a2a_handoff.outcomes import InputRequired as InputRequired
from a2a_handoff.outcomes import Outcome as Outcome
from a2a_handoff.outcomes import Rejected as Rejected
from a2a_handoff.outcomes import Reply as Reply
from a2a_handoff.outcomes import Route as Route
from a2a_handoff.protocol.agent_card import AgentCard as AgentCard
from a2a_handoff.protocol.agent_card import build_card as build_card
from a2a_handoff.protocol.agent_card import skill as skill
from a2a_handoff.protocol.extension import HANDOFF_EXTENSION_URI as HANDOFF_EXTENSION_URI
from a2a_handoff.protocol.mcp_result import ToolResult as ToolResult
from a2a_handoff.protocol.models import Artifact as Artifact
from a2a_handoff.protocol.models import Message as Message
from a2a_handoff.protocol.models import Part as Part
from a2a_handoff.protocol.models import Role as Role
from a2a_handoff.protocol.models import Task as Task
from a2a_handoff.protocol.states import TaskState as TaskState
from a2a_handoff.version import __version__ as __version__

if _typing.TYPE_CHECKING:
    from a2a_handoff.auth import ApiKeyAuth as ApiKeyAuth
    from a2a_handoff.client.client import AgentClient as AgentClient
    from a2a_handoff.client.retry import RetryPolicy as RetryPolicy
    from a2a_handoff.push import PushSettings as PushSettings
    from a2a_handoff.runtime.local import LocalTasks as LocalTasks
    from a2a_handoff.server.app import create_app as create_app
    from a2a_handoff.server.app_config import GrpcConfig as GrpcConfig
    from a2a_handoff.server.app_config import HandoffConfig as HandoffConfig
    from a2a_handoff.server.app_config import LimitsConfig as LimitsConfig
    from a2a_handoff.server.app_config import ObservabilityConfig as ObservabilityConfig
    from a2a_handoff.server.app_config import ToolsConfig as ToolsConfig
    from a2a_handoff.server.app_config import TrustConfig as TrustConfig
    from a2a_handoff.stores import MemoryTaskStore as MemoryTaskStore
    from a2a_handoff.stores import SqliteTaskStore as SqliteTaskStore
    from a2a_handoff.stores import TaskStore as TaskStore
    from a2a_handoff.stores import open_store as open_store

# room → the names imported from it the first time one of them is looked up
_LAZY = {
    "a2a_handoff.auth": ("ApiKeyAuth",),
    "a2a_handoff.client.client": ("AgentClient",),
    "a2a_handoff.client.retry": ("RetryPolicy",),
    "a2a_handoff.push": ("PushSettings",),
    "a2a_handoff.runtime.local": ("LocalTasks",),
    "a2a_handoff.server.app": ("create_app",),
    "a2a_handoff.server.app_config": (
        "GrpcConfig",
        "HandoffConfig",
        "LimitsConfig",
        "ObservabilityConfig",
        "ToolsConfig",
        "TrustConfig",
    ),
    "a2a_handoff.stores": ("MemoryTaskStore", "SqliteTaskStore", "TaskStore", "open_store"),
}
_ROOM_OF = {name: room for room, names in _LAZY.items() for name in names}


def __getattr__(name: str) -> object:
    room = _ROOM_OF.get(name)
    if room is None:
        raise AttributeError(f"module 'a2a_handoff' has no attribute {name!r}")
    value = getattr(_import_module(room), name)
    globals()[name] = value  # looked up once
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_ROOM_OF})


__all__ = sorted(
    [
        name
        for name, value in globals().items()
        if not name.startswith("_") and not isinstance(value, _ModuleType)
    ]
    + list(_ROOM_OF)
)
