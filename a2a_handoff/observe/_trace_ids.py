"""Trace ids without OpenTelemetry objects: W3C `traceparent` read, a task's own trace id,
and an SDK tracer's id generator that takes a root's trace id chosen beforehand."""

from __future__ import annotations

import re
from collections.abc import Iterable
from contextvars import ContextVar
from typing import Any

ZERO_TRACE, ZERO_SPAN = "0" * 32, "0" * 16
# version-traceid-parentid-flags, lower-case hex; a version above 00 may carry more parts
_TRACEPARENT = re.compile(r"([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}(-.*)?")
_HEX32 = re.compile(r"[0-9a-f]{32}")
_NAMED: dict[str, str | None] = {}


def trace_id_of(traceparent: str) -> str | None:
    """The trace id of a W3C `traceparent` (`00-<32 hex>-<16 hex>-<2 hex>`), None when it
    is not one (an all-zero id included)."""
    found = _TRACEPARENT.fullmatch(traceparent.strip().lower())
    if found is None:
        return None
    version, trace_id, span_id, more = found.groups()
    if version == "ff" or (version == "00" and more is not None):
        return None
    if trace_id == ZERO_TRACE or span_id == ZERO_SPAN:
        return None
    return trace_id


def traceparent_in(headers: Iterable[tuple[bytes, bytes]]) -> bool:
    """Whether an ASGI scope's headers (lower-case byte names) carry `traceparent` (a loop,
    not any() over a generator: this is every request's path)."""
    for name, _ in headers:  # noqa: SIM110
        if name == b"traceparent":
            return True
    return False


def named_trace(task_id: str) -> str | None:
    """The trace id named for a task: its UUID's 32 hex digits (kept a while: a task's log
    lines ask several times)."""
    try:
        return _NAMED[task_id]
    except KeyError:
        if len(_NAMED) >= 1024:
            _NAMED.clear()
        digits = task_id.replace("-", "").lower()
        named = digits if _HEX32.fullmatch(digits) and digits != ZERO_TRACE else None
        _NAMED[task_id] = named
        return named


PRESET: ContextVar[int] = ContextVar("a2a_handoff_preset_trace", default=0)
"""The next root's trace id, set around one synchronous start of a span (0: none)."""


class PresetIds:
    """An SDK tracer's id generator, except that a root's trace id may be chosen first
    (`tracing.root_span`: the sampler has decided on it before any span object is made)."""

    __slots__ = ("inner",)

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def generate_trace_id(self) -> int:
        chosen = PRESET.get()
        if chosen:
            PRESET.set(0)  # taken: no other span of this call gets it
            return chosen
        return int(self.inner.generate_trace_id())

    def generate_span_id(self) -> int:
        return int(self.inner.generate_span_id())

    def is_trace_id_random(self) -> bool:
        return bool(getattr(self.inner, "is_trace_id_random", lambda: True)())


def preset_ids(tracer: Any) -> Any:
    """`tracer`, its id generator wrapped in `PresetIds` (an SDK tracer; others as they are)."""
    inner = getattr(tracer, "id_generator", None)  # an SDK tracer's; an API one has none
    if inner is not None and not isinstance(inner, PresetIds):
        tracer.id_generator = PresetIds(inner)
    return tracer
