"""The A2A wire: models, states, the handoff extension, the agent card, SSE framing.

Everything here is data and pure functions over it: no I/O, nothing that knows a store, a
server or a client. Every other room of the package may import it; it imports none of them.
"""

from a2a_handoff.protocol.agent_card import (
    AgentCard,
    AgentProvider,
    AgentSkill,
    build_card,
    named_tenant,
    skill,
)
from a2a_handoff.protocol.extension import HANDOFF_EXTENSION_URI
from a2a_handoff.protocol.models import (
    Artifact,
    Message,
    Part,
    Role,
    StreamResponse,
    Task,
    TaskStatus,
    parse_time,
    utc_now,
)
from a2a_handoff.protocol.states import TaskState
from a2a_handoff.protocol.urls import check_agent_url

__all__ = [
    "HANDOFF_EXTENSION_URI",
    "AgentCard",
    "AgentProvider",
    "AgentSkill",
    "Artifact",
    "Message",
    "Part",
    "Role",
    "StreamResponse",
    "Task",
    "TaskState",
    "TaskStatus",
    "build_card",
    "check_agent_url",
    "named_tenant",
    "parse_time",
    "skill",
    "utc_now",
]
