"""a2a-handoff: A2A 1.0 agents as HTTP services, with atomic handoff between them."""

from a2a_handoff.agent import Agent, ArtifactStream, TaskContext
from a2a_handoff.auth import ApiKeyAuth
from a2a_handoff.client.breaker import BreakerState, CircuitBreaker
from a2a_handoff.client.client import AgentClient
from a2a_handoff.client.retry import RetryPolicy
from a2a_handoff.client.transport import Http11Transport
from a2a_handoff.contracts.catalog import Catalog
from a2a_handoff.errors import (
    AgentUrlError,
    CircuitOpenError,
    ConflictError,
    HandoffError,
    IllegalTransitionError,
    IncompleteEscalationError,
    RemoteError,
    RpcError,
    SignatureError,
    StoreDownError,
    StoreError,
    StoreUnavailableError,
    TaskBusyError,
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
from a2a_handoff.handoff.envelope import HandoffEnvelope
from a2a_handoff.handoff.verified import VerifiedEnvelope
from a2a_handoff.outcomes import (
    Completed,
    Failed,
    Handoff,
    InputRequired,
    Outcome,
    Rejected,
    Reply,
)
from a2a_handoff.protocol.agent_card import (
    AgentCard,
    AgentInterface,
    AgentProvider,
    AgentSkill,
    build_card,
    skill,
)
from a2a_handoff.protocol.events import agent_message
from a2a_handoff.protocol.extension import HANDOFF_EXTENSION_URI
from a2a_handoff.protocol.models import (
    Artifact,
    Message,
    Part,
    Role,
    StreamResponse,
    Task,
    TaskStatus,
)
from a2a_handoff.protocol.states import TaskState, transition
from a2a_handoff.runtime.local import LocalTasks
from a2a_handoff.server.app import create_app
from a2a_handoff.stores import (
    MemoryTaskStore,
    SqliteTaskStore,
    TaskStore,
    open_store,
)
from a2a_handoff.trust.keys import Identity, KeyFile
from a2a_handoff.trust.trustlist import TrustedAgent, load_trust_file
from a2a_handoff.version import __version__ as __version__

__all__ = [  # noqa: RUF022 - plain sorted(), as the export test checks
    "Action",
    "Agent",
    "AgentCard",
    "AgentClient",
    "AgentInterface",
    "AgentProvider",
    "AgentSkill",
    "AgentUrlError",
    "ApiKeyAuth",
    "Artifact",
    "ArtifactStream",
    "BreakerState",
    "Catalog",
    "CircuitBreaker",
    "CircuitOpenError",
    "Completed",
    "ConflictError",
    "Decision",
    "Escalate",
    "Escalation",
    "EscalationPolicy",
    "Failed",
    "HANDOFF_EXTENSION_URI",
    "Handoff",
    "HandoffEnvelope",
    "HandoffError",
    "Http11Transport",
    "Identity",
    "IllegalTransitionError",
    "IncompleteEscalationError",
    "InputRequired",
    "KeyFile",
    "LocalTasks",
    "MemoryTaskStore",
    "Message",
    "Need",
    "Outcome",
    "Part",
    "Rejected",
    "RemoteError",
    "Reply",
    "RetryPolicy",
    "Role",
    "RpcError",
    "SignatureError",
    "SqliteTaskStore",
    "StoreDownError",
    "StoreError",
    "StoreUnavailableError",
    "StreamResponse",
    "Task",
    "TaskBusyError",
    "TaskContext",
    "TaskState",
    "TaskStatus",
    "TaskStore",
    "Trigger",
    "TrustError",
    "TrustedAgent",
    "UnavailableError",
    "Verdict",
    "VerifiedEnvelope",
    "agent_message",
    "build_card",
    "create_app",
    "load_trust_file",
    "open_store",
    "skill",
    "transition",
]
