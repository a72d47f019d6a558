"""Serving an agent: the app and its settings, the JSON-RPC binding, the methods, streams,
card and health."""

from a2a_handoff.server.app import create_app
from a2a_handoff.server.app_config import (
    HandoffConfig,
    LimitsConfig,
    ObservabilityConfig,
    ToolsConfig,
    TrustConfig,
)
from a2a_handoff.server.limits import ServerLimits, return_freed_memory

__all__ = [
    "HandoffConfig",
    "LimitsConfig",
    "ObservabilityConfig",
    "ServerLimits",
    "ToolsConfig",
    "TrustConfig",
    "create_app",
    "return_freed_memory",
]
