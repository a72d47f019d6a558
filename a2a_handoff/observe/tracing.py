"""Trace context: W3C `traceparent` in, on the envelope, and out on every call to an agent.

The library uses `opentelemetry-api` only: without an SDK configured (`a2a-handoff[otel]`,
see `a2a_handoff.observe.otel`) its tracer records nothing, and this module takes a fast
path — no span objects at all; the trace id still travels (it is the envelope's `traceId`,
and log lines carry it). opentelemetry-api itself is not imported by this module until
something else has loaded it (an SDK, an instrumentation, the application: only they can set
a provider) or `OTEL_PYTHON_TRACER_PROVIDER` names one. The envelope's `traceId` becomes the
trace's id on every agent a chain reaches, whether or not the HTTP header made it (a handoff
replayed after a crash carries no header, only its signed envelope).
"""

from __future__ import annotations

import contextlib
import os
import random
import sys
import time
from collections.abc import Iterable, Mapping, MutableMapping
from contextvars import ContextVar, Token
from typing import TYPE_CHECKING, Any

from a2a_handoff.observe import current
from a2a_handoff.observe._trace_ids import (
    PRESET,
    PresetIds,
    named_trace,
    preset_ids,
    trace_id_of,
)
from a2a_handoff.observe._trace_ids import traceparent_in as traceparent_in  # the servers' check

if TYPE_CHECKING:
    from opentelemetry import trace

_tracer: trace.Tracer | None = None  # None: the global provider's (made on first use)
_own: trace.TracerProvider | None = None  # a provider given to `use_provider`, if any
_NULL: contextlib.nullcontext[None] = contextlib.nullcontext()


def use_provider(provider: trace.TracerProvider | None) -> None:
    """Record this library's spans with `provider` rather than the global one (None: the
    global again) — for tests, which must not set the process-wide provider."""
    global _tracer, _own, _decider
    _tracer = preset_ids(provider.get_tracer("a2a_handoff")) if provider is not None else None
    _own = provider
    _decider = _UNASKED


def _get_tracer() -> trace.Tracer:
    global _tracer
    if _tracer is None:
        from opentelemetry import trace

        _tracer = preset_ids(trace.get_tracer("a2a_handoff"))
    return _tracer


# With tracing off, the current trace is only an id: kept here, not in an OpenTelemetry
# context (making, attaching and reading one cost more than all the rest of this module).
_TRACE: ContextVar[str | None] = ContextVar("a2a_handoff_trace", default=None)

_PROVIDER_ENV = "OTEL_PYTHON_TRACER_PROVIDER"  # opentelemetry-api loads the provider it names
_on = False  # a global SDK provider was seen (it can be set only once: it stays)
_checked = -1.0  # when the global provider was last looked at (not set yet)


def enabled() -> bool:
    """Whether an SDK's tracer provider is set (spans are recorded). The global provider is
    looked at once a second until one is set (looking costs an environment read)."""
    global _on, _checked
    if _own is not None or _on:
        return True
    now = time.monotonic()
    if now - _checked < 1.0:
        return False
    _checked = now
    if "opentelemetry.trace" not in sys.modules and _PROVIDER_ENV not in os.environ:
        return False  # not loaded: nobody set a provider, and none is named: off
    from opentelemetry import trace

    provider = trace.get_tracer_provider()
    _on = not isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider)
    return _on


def _attributes(attributes: dict[str, Any]) -> dict[str, Any]:
    attrs = {k: v for k, v in attributes.items() if v is not None}
    agent = current().agent
    if agent:
        attrs["a2a.agent"] = agent
    return attrs


def span(name: str, key: str, value: Any) -> contextlib.AbstractContextManager[Any]:
    """A span around a block with one attribute, `key` = `value` (nothing at all when
    tracing is off: the attribute is not even put in a dict; nothing either within a span of
    ours that the sampler dropped — samplers decide per trace, and an unsampled span costs
    nearly what a recorded one does)."""
    if not enabled():
        return _NULL
    from opentelemetry import trace

    parent = trace.get_current_span()
    if not parent.is_recording():  # dropped, or ended (a task it started goes on after it)
        context = parent.get_span_context()
        if context.is_valid and not context.is_remote and not context.trace_flags.sampled:
            return _NULL
    return _get_tracer().start_as_current_span(name, attributes=_attributes({key: value}))


def record_span(name: str, start_ns: int, **attributes: Any) -> None:
    """A span that began at `start_ns` (time.time_ns) and ends now (an escalation's wait)."""
    if not enabled():
        return
    _get_tracer().start_span(name, start_time=start_ns, attributes=_attributes(attributes)).end()


def current_trace_id() -> str | None:
    """The current trace's id as 32 hex digits, or None outside a trace."""
    if not enabled():
        return _TRACE.get()
    from opentelemetry import trace

    ctx = trace.get_current_span().get_span_context()
    return format(ctx.trace_id, "032x") if ctx.is_valid else None


def incoming(headers: Mapping[str, str]) -> object | None:
    """Take the request's `traceparent` (when it has one) as the current context; the token
    to give `leave`."""
    traceparent = headers.get("traceparent")
    if traceparent is None:
        return None
    if enabled():
        from opentelemetry import context, propagate

        return context.attach(propagate.extract(headers))
    trace_id = trace_id_of(traceparent)
    return _TRACE.set(trace_id) if trace_id is not None else None


def incoming_raw(headers: Iterable[tuple[bytes, bytes]]) -> object | None:
    """`incoming` for an ASGI scope's headers: a request without `traceparent` costs one
    scan, no mapping made."""
    if not traceparent_in(headers):
        return None
    return incoming({k.decode("latin-1"): v.decode("latin-1") for k, v in headers})


def leave(token: object | None) -> None:
    if isinstance(token, Token) and token.var is _TRACE:
        # A token set in another context (a block left in another task) cannot be reset
        # there, and nothing of ours was set in this one: as OpenTelemetry's detach, go on.
        # (try/except, not contextlib.suppress: this is every traced request's path)
        try:  # noqa: SIM105
            _TRACE.reset(token)
        except ValueError:
            pass
    elif token is not None:
        from opentelemetry import context

        context.detach(token)  # type: ignore[arg-type]


def outgoing(headers: MutableMapping[str, str]) -> None:
    """Add `traceparent` for the current span to a call's headers (none outside a trace)."""
    if not enabled():
        trace_id = _TRACE.get()
        if trace_id is not None:
            headers["traceparent"] = f"00-{trace_id}-{random.getrandbits(64) or 1:016x}-01"
        return
    from opentelemetry import trace

    ctx = trace.get_current_span().get_span_context()
    if ctx.is_valid:
        headers["traceparent"] = f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-{ctx.trace_flags:02x}"


class _Adopted:
    """The context of `adopted`: a remote parent in the trace made current, then undone
    (with tracing off, only the trace's id)."""

    __slots__ = ("number", "token")

    def __init__(self, number: int) -> None:
        self.number = number
        self.token: object = None

    def __enter__(self) -> None:
        if not enabled():
            self.token = _TRACE.set(f"{self.number:032x}")
            return
        from opentelemetry import context, trace

        flags = trace.TraceFlags(
            trace.TraceFlags.SAMPLED if _sampled(self.number) else trace.TraceFlags.DEFAULT
        )
        parent = trace.SpanContext(self.number, random.getrandbits(64) or 1, True, flags)
        self.token = context.attach(trace.set_span_in_context(trace.NonRecordingSpan(parent)))

    def __exit__(self, *exc: object) -> None:
        leave(self.token)


def _sampled(number: int) -> bool:
    """Whether the provider's sampler would keep a new trace with id `number`: what an
    adopted trace (known only by the envelope's `traceId`) is taken as. With a sampler
    deterministic in the trace id (TraceIdRatioBased, alone or as ParentBased's root) that
    is the decision the trace got where it began, so a dropped trace stays dropped across a
    replayed delivery or an operator's answer; a provider without a sampler: kept."""
    from opentelemetry import context

    sampler = _provider_sampler()
    if sampler is None:
        return True
    result = sampler.should_sample(context.Context(), number, "a2a.adopted")
    return bool(result.decision.is_sampled())


def _provider_sampler() -> Any:
    """The sampler of the provider spans are recorded with (None: it has none)."""
    if _own is not None:
        return getattr(_own, "sampler", None)
    from opentelemetry import trace

    return getattr(trace.get_tracer_provider(), "sampler", None)


_UNASKED = object()
_decider: Any = _UNASKED  # the sampler when it decides on the trace id alone, else None


def _drops(number: int, name: str, attributes: dict[str, Any]) -> bool:
    """Whether the sampler drops a new trace with id `number`, known before any span object
    is made: only for the SDK's own samplers that decide on the trace id (TraceIdRatioBased,
    alone or as ParentBased's root; AlwaysOff), asked as the SDK would ask them."""
    global _decider
    if _decider is _UNASKED:
        _decider = _deciding_on_id()
    if _decider is None:
        return False
    from opentelemetry import context

    result = _decider.should_sample(context.Context(), number, name, attributes=attributes)
    return not result.decision.is_sampled()


def _deciding_on_id() -> Any:
    try:
        from opentelemetry.sdk.trace import sampling
    except ImportError:  # pragma: no cover - a provider of another SDK
        return None
    if not isinstance(getattr(_get_tracer(), "id_generator", None), PresetIds):
        return None  # the root's id cannot be chosen: the SDK's own decision only
    sampler = _provider_sampler()
    if type(sampler) in (sampling.ParentBased, sampling.ParentBasedTraceIdRatio):
        root = str(sampler.get_description()).removeprefix("ParentBased{root:")  # its root's
        decides = root.startswith(("TraceIdRatioBased{", "AlwaysOffSampler"))
    else:
        decides = type(sampler) is sampling.TraceIdRatioBased or sampler is sampling.ALWAYS_OFF
    return sampler if decides else None


def root_span(name: str, key: str, value: Any) -> contextlib.AbstractContextManager[Any]:
    """`span`, for a request that came without a trace: with a sampler that decides on the
    trace id, it is asked about an id chosen here first; a trace it drops is made current as
    a non-recording span (what the SDK makes of it, without the SDK's span machinery), and a
    kept one is recorded under that id — so the decision is the one it would have made."""
    if not enabled():
        return _NULL
    from opentelemetry import trace

    if trace.get_current_span().get_span_context().is_valid:
        return span(name, key, value)
    number = random.getrandbits(128) or 1
    attributes = _attributes({key: value})
    if _drops(number, name, attributes):
        return _Dropped(number)
    return _Rooted(number, name, attributes)


class _Dropped:
    """A trace the sampler dropped, current within the block as a non-recording span."""

    __slots__ = ("number", "token")

    def __init__(self, number: int) -> None:
        self.number = number
        self.token: object = None

    def __enter__(self) -> None:
        from opentelemetry import context, trace

        dropped = trace.SpanContext(self.number, random.getrandbits(64) or 1, False)
        self.token = context.attach(trace.set_span_in_context(trace.NonRecordingSpan(dropped)))

    def __exit__(self, *exc: object) -> None:
        leave(self.token)


class _Rooted:
    """A root span recorded under a trace id chosen (and sampled) beforehand."""

    __slots__ = ("attributes", "entered", "name", "number")

    def __init__(self, number: int, name: str, attributes: dict[str, Any]) -> None:
        self.number = number
        self.name = name
        self.attributes = attributes
        self.entered: contextlib.AbstractContextManager[Any] = _NULL

    def __enter__(self) -> Any:
        self.entered = _get_tracer().start_as_current_span(self.name, attributes=self.attributes)
        chosen = PRESET.set(self.number)
        try:
            return self.entered.__enter__()
        finally:
            PRESET.reset(chosen)

    def __exit__(self, *exc: Any) -> Any:
        return self.entered.__exit__(*exc)


def adopted(trace_id: str | None) -> contextlib.AbstractContextManager[Any]:
    """Within the block, the current trace is `trace_id` (an envelope's `traceId`): kept as
    it is when already current, else a remote parent in that trace is made current."""
    if not trace_id or len(trace_id) != 32 or current_trace_id() == trace_id:
        return _NULL
    try:
        number = int(trace_id, 16)
    except ValueError:
        return _NULL
    return _Adopted(number) if number else _NULL


def trace_of(task_id: str) -> str | None:
    """The trace of a task's work: the current trace, else one named for the task — its
    UUID's 32 hex digits (a message that came without `traceparent`: its task's log lines and
    handoffs share that id, at no cost on the hot path)."""
    current = current_trace_id()
    if current is not None:
        return current
    return named_trace(task_id)


def new_trace() -> contextlib.AbstractContextManager[Any]:
    """A new trace (the orchestrator's, for one user message): a root span when tracing is
    on, else a fresh trace id made current, so calls carry it."""
    if enabled():
        from opentelemetry import context

        return _get_tracer().start_as_current_span("a2a.user_message", context=context.Context())
    return adopted(f"{random.getrandbits(128) or 1:032x}")
