"""Serving an agent: the app, the JSON-RPC binding, the methods, streams, card and health."""

from a2a_handoff.server.app import create_app

__all__ = ["create_app"]
