"""Serving an agent: its service (lifecycle and the A2A operations), the faces over it
(JSON-RPC, HTTP+JSON, A2A 0.3, MCP) as routes, gRPC beside them, the app and its settings."""

from a2a_handoff.server._grpc import serve_grpc
from a2a_handoff.server.app import create_app
from a2a_handoff.server.app_config import (
    GrpcConfig,
    HandoffConfig,
    LimitsConfig,
    ObservabilityConfig,
    RetentionConfig,
    ToolsConfig,
    TrustConfig,
    parse_duration,
)
from a2a_handoff.server.limits import ServerLimits, return_freed_memory
from a2a_handoff.server.results import Caller, EventStream, Sent, TaskPage, TaskView
from a2a_handoff.server.routes import agent_routes
from a2a_handoff.server.service import AgentService

__all__ = [
    "AgentService",
    "Caller",
    "EventStream",
    "GrpcConfig",
    "HandoffConfig",
    "LimitsConfig",
    "ObservabilityConfig",
    "RetentionConfig",
    "Sent",
    "ServerLimits",
    "TaskPage",
    "TaskView",
    "ToolsConfig",
    "TrustConfig",
    "agent_routes",
    "create_app",
    "parse_duration",
    "return_freed_memory",
    "serve_grpc",
]
