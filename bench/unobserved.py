"""`python -m servers …` with observability taken out: the "without" of issue 18's cost target.

    .venv/bin/python bench/unobserved.py triage --port 8001 --store sqlite:///t.db …

Every hook the package calls where something worth seeing happens (`observe.events`: metrics
and log lines) does nothing, and trace context is neither read, carried nor sent
(`observe.tracing`: no `traceparent` in or out; an envelope's `traceId` is a fresh random id,
as before tracing existed). What is left of observability is the call to each hook itself
and the agent's observer made current per call: a few hundred instructions a handoff. The
same tree runs both sides of a comparison (`bench/overhead`), so nothing but observability
differs between them. Monkeypatching at start-up only: no file of the package is edited.
"""

from __future__ import annotations

import contextlib
import os
import runpy
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this tree's package

from a2a_handoff.observe import events, tracing


def _nothing(*args: Any, **kwargs: Any) -> None:
    return None


def _null(*args: Any, **kwargs: Any) -> contextlib.AbstractContextManager[None]:
    return contextlib.nullcontext()


# The hooks: the module's own public functions (not what it imports).
HOOKS = [
    name
    for name, value in vars(events).items()
    if not name.startswith("_") and getattr(value, "__module__", "") == events.__name__
]


def take_out(parts: str = "events,tracing") -> None:
    """Take out `parts`: `events` (metrics and log lines), `tracing` (trace context)."""
    if "events" in parts:
        for name in HOOKS:
            setattr(events, name, _nothing)
    if "tracing" not in parts:
        return
    tracing.incoming = _nothing  # type: ignore[assignment]
    tracing.leave = _nothing
    tracing.outgoing = _nothing
    tracing.record_span = _nothing  # type: ignore[assignment]
    tracing.trace_of = _nothing  # type: ignore[assignment]
    tracing.span = _null
    tracing.adopted = _null
    tracing.enabled = lambda: False


if __name__ == "__main__":
    take_out(os.environ.get("UNOBSERVED_PARTS", "events,tracing"))
    sys.argv = ["servers", *sys.argv[1:]]
    runpy.run_module("servers", run_name="__main__", alter_sys=True)
