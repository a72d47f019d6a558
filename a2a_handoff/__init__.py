"""a2a-handoff: A2A 1.0 agents as HTTP services, with atomic handoff between them."""

from a2a_handoff._runtime import LocalTasks
from a2a_handoff.agent import (
    Agent,
    Completed,
    Failed,
    Handoff,
    InputRequired,
    Outcome,
    Rejected,
    TaskContext,
    agent_message,
)
from a2a_handoff.auth import ApiKeyAuth
from a2a_handoff.breaker import BreakerState, CircuitBreaker, CircuitOpenError
from a2a_handoff.card import build_card, skill
from a2a_handoff.client import AgentClient, RemoteError, RetryPolicy, UnavailableError
from a2a_handoff.envelope import HandoffEnvelope
from a2a_handoff.errors import (
    ConflictError,
    HandoffError,
    IllegalTransitionError,
    RpcError,
    StoreError,
)
from a2a_handoff.escalation import (
    Action,
    Decision,
    Escalate,
    Escalation,
    EscalationPolicy,
    IncompleteEscalationError,
    Need,
    Trigger,
    Verdict,
)
from a2a_handoff.extension import HANDOFF_EXTENSION_URI
from a2a_handoff.models import (
    AgentCard,
    Artifact,
    Message,
    Part,
    Role,
    StreamResponse,
    Task,
    TaskStatus,
)
from a2a_handoff.server import create_app
from a2a_handoff.states import TaskState, transition
from a2a_handoff.stores import (
    MemoryTaskStore,
    SqliteTaskStore,
    TaskStore,
    open_store,
)
from a2a_handoff.transport import Http11Transport

__all__ = [  # noqa: RUF022 - plain sorted(), as the export test checks
    "Action",
    "Agent",
    "AgentCard",
    "AgentClient",
    "ApiKeyAuth",
    "Artifact",
    "BreakerState",
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
    "IllegalTransitionError",
    "IncompleteEscalationError",
    "InputRequired",
    "LocalTasks",
    "MemoryTaskStore",
    "Message",
    "Need",
    "Outcome",
    "Part",
    "Rejected",
    "RemoteError",
    "RetryPolicy",
    "Role",
    "RpcError",
    "SqliteTaskStore",
    "StoreError",
    "StreamResponse",
    "Task",
    "TaskContext",
    "TaskState",
    "TaskStatus",
    "TaskStore",
    "Trigger",
    "UnavailableError",
    "Verdict",
    "agent_message",
    "build_card",
    "create_app",
    "open_store",
    "skill",
    "transition",
]
