"""A request that comes without a trace: the sampler decides on a trace id chosen first; a
trace it drops is current as a non-recording span only (no span of the SDK's made), a kept one
is recorded under that very id, and the id travels either way."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ParentBased, SamplingResult, TraceIdRatioBased

from a2a_handoff.observe import tracing
from a2a_handoff.observe._trace_ids import PRESET, PresetIds

RATIO = TraceIdRatioBased(0.5)


class Counting(TraceIdRatioBased):
    """One in two, by trace id, counting what it is asked (the root of the usual production
    sampler, `ParentBased`)."""

    def __init__(self) -> None:
        super().__init__(0.5)
        self.asked: list[str] = []

    def should_sample(
        self, parent_context: Any, trace_id: int, name: str, *args: Any, **kwargs: Any
    ) -> SamplingResult:
        self.asked.append(name)
        return super().should_sample(parent_context, trace_id, name, *args, **kwargs)


@pytest.fixture
def sampler() -> Iterator[tuple[Counting, InMemorySpanExporter]]:
    counting, exporter = Counting(), InMemorySpanExporter()
    provider = TracerProvider(sampler=ParentBased(counting))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.use_provider(provider)
    try:
        yield counting, exporter
    finally:
        tracing.use_provider(None)


def kept(trace_id: str) -> bool:
    return RATIO.should_sample(None, int(trace_id, 16), "x").decision.is_sampled()


def test_a_dropped_root_makes_no_span_and_a_kept_one_keeps_its_id(
    sampler: tuple[Counting, InMemorySpanExporter],
) -> None:
    counting, exporter = sampler
    seen: list[tuple[str, bool, dict[str, str]]] = []
    for _ in range(64):
        with tracing.root_span("a2a.receive", "http.route", "/"):
            trace_id = tracing.current_trace_id()
            assert trace_id is not None
            with tracing.span("a2a.handler", "a2a.task_id", "t-1"):
                headers: dict[str, str] = {}
                tracing.outgoing(headers)
            recording = trace.get_current_span().is_recording()
            seen.append((trace_id, recording, headers))
    kept_ids = {trace_id for trace_id, _, _ in seen if kept(trace_id)}
    assert 0 < len(kept_ids) < len(seen)  # both kinds happened (64 draws at one in two)
    recorded = {f"{s.context.trace_id:032x}" for s in exporter.get_finished_spans()}
    assert recorded == kept_ids  # every kept id recorded as itself: not kept twice over
    for trace_id, recording, headers in seen:
        _, sent_id, _, flags = headers["traceparent"].split("-")
        assert sent_id == trace_id
        assert bool(int(flags, 16) & 1) is (trace_id in kept_ids)  # the callee decides alike
        assert recording is (trace_id in kept_ids)
    # A dropped root asks the sampler once and nothing within it asks again; a kept root is
    # asked before and by the SDK (its handler span then follows its parent).
    assert counting.asked.count("a2a.receive") == len(seen) + len(kept_ids)
    assert counting.asked.count("a2a.handler") == 0


def test_spans_of_others_within_a_dropped_root_belong_to_it(
    sampler: tuple[Counting, InMemorySpanExporter],
) -> None:
    _, exporter = sampler
    for _ in range(32):
        with tracing.root_span("a2a.receive", "http.route", "/"):
            ours = tracing.current_trace_id()
            # An instrumentation's span (httpx, a database driver) in the same request.
            with trace.get_tracer("app").start_as_current_span("app.query") as theirs:
                assert f"{theirs.get_span_context().trace_id:032x}" == ours
    recorded = [f"{s.context.trace_id:032x}" for s in exporter.get_finished_spans()]
    names = {s.name for s in exporter.get_finished_spans()}
    assert names <= {"a2a.receive", "app.query"}
    assert all(kept(trace_id) for trace_id in recorded)  # none recorded in a dropped trace


def test_a_chosen_id_is_taken_once() -> None:
    class Ids:
        def generate_trace_id(self) -> int:
            return 42

    ids = PresetIds(Ids())
    token = PRESET.set(7)
    try:
        assert [ids.generate_trace_id(), ids.generate_trace_id()] == [7, 42]
    finally:
        PRESET.reset(token)


def test_a_sampler_of_its_own_is_asked_by_the_sdk_alone() -> None:
    class RatioPlus(TraceIdRatioBased):
        """Keeps by trace id, and more: not one whose decision can be taken beforehand."""

        asked = 0

        def should_sample(self, *args: Any, **kwargs: Any) -> SamplingResult:
            RatioPlus.asked += 1
            return super().should_sample(*args, **kwargs)

    tracing.use_provider(TracerProvider(sampler=RatioPlus(0.5)))
    try:
        for _ in range(8):
            with tracing.root_span("a2a.receive", "http.route", "/"):
                pass
    finally:
        tracing.use_provider(None)
    assert RatioPlus.asked == 8


def test_an_adopted_trace_within_a_dropped_one_is_decided_by_its_own_id(
    sampler: tuple[Counting, InMemorySpanExporter],
) -> None:
    _, exporter = sampler
    keep, drop = f"{7:016x}{1:016x}", f"{7:016x}{'f' * 16}"  # the low 64 bits decide
    assert kept(keep)
    assert not kept(drop)
    with tracing.adopted(drop):
        assert tracing.current_trace_id() == drop
        with tracing.adopted(keep), tracing.span("a2a.create", "a2a.target", "billing"):
            assert tracing.current_trace_id() == keep
        assert tracing.current_trace_id() == drop
        with tracing.span("a2a.terminate", "a2a.handoff_id", "h-1"):
            pass
    assert [(s.name, f"{s.context.trace_id:032x}") for s in exporter.get_finished_spans()] == [
        ("a2a.create", keep)
    ]
