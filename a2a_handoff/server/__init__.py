"""Serving an agent: the app, the JSON-RPC binding, the methods, streams, card and health."""

from a2a_handoff.server.app import create_app
from a2a_handoff.server.limits import ServerLimits, return_freed_memory

__all__ = ["ServerLimits", "create_app", "return_freed_memory"]
