"""Serving an agent: its service (lifecycle and the A2A operations), the faces over it
(JSON-RPC, HTTP+JSON, A2A 0.3, MCP) as routes, gRPC beside them, the app and its settings,
and the HTTP server that drains it before it stops (`run`, `DrainingServer`);
`uvicorn_options` and `client_context`: uvicorn's TLS arguments and the client's TLS
context of a `TlsConfig` (`server.tls`); `tenant_of`: the tenant a request's params name,
checked."""

from a2a_handoff.server._call import tenant_of
from a2a_handoff.server._grpc import serve_grpc
from a2a_handoff.server.app import create_app
from a2a_handoff.server.app_config import (
    DrainConfig,
    GrpcConfig,
    HandoffConfig,
    LimitsConfig,
    ObservabilityConfig,
    OidcConfig,
    RetentionConfig,
    TlsConfig,
    ToolsConfig,
    TrustConfig,
    parse_duration,
)
from a2a_handoff.server.limits import ServerLimits, return_freed_memory
from a2a_handoff.server.results import Caller, EventStream, Sent, TaskPage, TaskView
from a2a_handoff.server.routes import agent_routes
from a2a_handoff.server.service import AgentService
from a2a_handoff.server.shutdown import DrainingServer, run
from a2a_handoff.server.tls import client_context, uvicorn_options

__all__ = [
    "AgentService",
    "Caller",
    "DrainConfig",
    "DrainingServer",
    "EventStream",
    "GrpcConfig",
    "HandoffConfig",
    "LimitsConfig",
    "ObservabilityConfig",
    "OidcConfig",
    "RetentionConfig",
    "Sent",
    "ServerLimits",
    "TaskPage",
    "TaskView",
    "TlsConfig",
    "ToolsConfig",
    "TrustConfig",
    "agent_routes",
    "client_context",
    "create_app",
    "parse_duration",
    "return_freed_memory",
    "run",
    "serve_grpc",
    "tenant_of",
    "uvicorn_options",
]
