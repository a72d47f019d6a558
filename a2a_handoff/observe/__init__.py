"""Seeing inside an agent: its metrics, log lines with ids, and trace context.

A low room: every other room may call it, it imports none of them. What an agent measures
goes to its own `Observer` (a Prometheus registry of its own, so several agents in one
process never mix their counters): the server makes its app's observer current for every
ASGI call and for the lifespan (`use`), so the runtime, the handoff side, the stores and the
client reach it with `current()` — a context variable, copied into every task they start —
without threading it through their constructors.

Nothing here imports prometheus-client: an observer's `Metrics` are made (and the library
loaded) the first time something counts.
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar, Token
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from a2a_handoff.observe._metrics import Metrics


class Observer:
    """One agent's metrics (and its name, for log lines)."""

    __slots__ = ("agent", "metrics")

    metrics: Metrics  # made on first use (`__getattr__`), then a plain slot read

    def __init__(self, agent: str = "") -> None:
        self.agent = agent

    def __getattr__(self, name: str) -> Metrics:
        # Called only while the slot is empty: the hot path reads the slot directly.
        if name != "metrics":
            raise AttributeError(name)
        from a2a_handoff.observe._metrics import Metrics

        self.metrics = metrics = Metrics()
        return metrics


_FALLBACK = Observer()
_CURRENT: ContextVar[Observer] = ContextVar("a2a_handoff_observer", default=_FALLBACK)


# The observer of the agent whose work is running (a fallback outside any app): the context
# variable's own `get`, a C call (the hooks ask for it several times a request).
current: Callable[[], Observer] = _CURRENT.get


# Make an observer current in this context (and the tasks it starts): the variable's own
# `set` (a C call; the server makes its agent's current for every request).
use: Callable[[Observer], Token[Observer]] = _CURRENT.set


__all__ = ["Observer", "current", "use"]
