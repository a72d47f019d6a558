"""The observe room on its own: per-agent registries, the hooks, the log sink, trace context."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from a2a_handoff.client.breaker import CircuitBreaker
from a2a_handoff.observe import Observer, events, logs, tracing, use


@pytest.fixture
def observer() -> Iterator[Observer]:
    mine = Observer("billing")
    token = use(mine)
    try:
        yield mine
    finally:
        from a2a_handoff.observe import _CURRENT

        _CURRENT.reset(token)


@pytest.fixture
def lines() -> Iterator[io.StringIO]:
    out = io.StringIO()
    saved = logs._sink, logging.getLogger().handlers[:], logging.getLogger().level
    logs.configure("info", "json", out)
    try:
        yield out
    finally:
        root = logging.getLogger()
        logs._sink = saved[0]
        root.handlers[:] = saved[1]
        root.setLevel(saved[2])


def test_two_agents_in_one_process_count_apart(observer: Observer) -> None:
    other = Observer("triage")
    events.request("SendMessage", "ok")
    events.transitions("t-1", "c-1", ["TASK_STATE_WORKING", "TASK_STATE_COMPLETED"])
    labels = {"method": "SendMessage", "outcome": "ok"}
    assert observer.metrics.value("a2a_requests_total", labels) == 1
    assert observer.metrics.value("a2a_task_transitions_total", {"state": "completed"}) == 1
    assert other.metrics.value("a2a_requests_total", labels) == 0
    assert b"a2a_task_transitions_total" in observer.metrics.render()


def test_a_state_counts_the_same_by_its_wire_name_or_its_member(observer: Observer) -> None:
    from a2a_handoff.protocol.states import TaskState

    events.transitions("t-1", "c-1", ["TASK_STATE_WORKING"])
    events.transitions("t-2", "c-2", [TaskState.WORKING, TaskState.COMPLETED])
    count = observer.metrics.value
    assert count("a2a_task_transitions_total", {"state": "working"}) == 2
    assert count("a2a_task_transitions_total", {"state": "completed"}) == 1
    assert observer.metrics.render().count(b'a2a_task_transitions_total{state="working"}') == 1


def test_a_breaker_change_is_counted_and_logged(observer: Observer, lines: io.StringIO) -> None:
    breaker = CircuitBreaker("http://127.0.0.1:9/", threshold=2, cooldown=60)

    async def fail() -> None:
        for _ in range(3):
            with pytest.raises((OSError, ConnectionError)):
                async with breaker.guard():
                    raise OSError("refused")

    asyncio.run(fail())
    logs.flush()  # an INFO line waits in the sink's batch (its loop is gone)
    changes = {"target": "http://127.0.0.1:9/", "state": "open"}
    assert observer.metrics.value("a2a_breaker_changes_total", changes) == 1
    logged = [json.loads(line) for line in lines.getvalue().splitlines()]
    (line,) = [e for e in logged if e["event"] == "breaker.change"]
    assert line["state"] == "open"
    assert line["level"] == "INFO"
    assert line["agent"] == "billing"


def test_info_lines_are_written_in_batches_and_warnings_at_once(
    observer: Observer, lines: io.StringIO
) -> None:
    async def run() -> None:
        events.transitions("t-1", "c-1", ["TASK_STATE_WORKING"])
        await asyncio.sleep(0)
        assert lines.getvalue() == ""  # waiting for the lines after it
        await asyncio.sleep(logs.FLUSH_AFTER * 3)
        assert [json.loads(x)["state"] for x in lines.getvalue().splitlines()] == ["working"]
        events.transitions("t-1", "c-1", ["TASK_STATE_COMPLETED"])
        events.recovery("replayed", "handoff %s replayed", "h-1", handoff_id="h-1")
        # the WARNING went out at once, after the INFO line buffered before it
        said = [json.loads(x)["event"] for x in lines.getvalue().splitlines()]
        assert said == ["task.transition", "task.transition", "recovery.replayed"]

    asyncio.run(run())


def test_a_logging_line_comes_after_the_event_lines_before_it(
    observer: Observer, lines: io.StringIO
) -> None:
    async def run() -> None:
        events.transitions("t-1", "c-1", ["TASK_STATE_WORKING"])
        logging.getLogger("uvicorn.error").warning("shutting down")
        said = [json.loads(x)["message"] for x in lines.getvalue().splitlines()]
        assert said == ["task t-1 -> working", "shutting down"]

    asyncio.run(run())


def test_text_lines_are_ascii(observer: Observer) -> None:
    # One non-ASCII character (an arrow) made every line a wide string, copied wide and
    # encoded on the slow path: about a third of a line's cost.
    out = io.StringIO()
    saved = logs._sink, logging.getLogger().handlers[:], logging.getLogger().level
    logs.configure("info", "text", out)
    try:
        events.transitions("t-1", "c-1", ["TASK_STATE_WORKING", "TASK_STATE_COMPLETED"])
        events.recovery("replayed", "handoff %s replayed", "h-1", handoff_id="h-1")
    finally:
        root = logging.getLogger()
        logs._sink = saved[0]
        root.handlers[:] = saved[1]
        root.setLevel(saved[2])
    lines = out.getvalue().splitlines()
    assert len(lines) == 3
    assert all(line.isascii() for line in lines), lines


def test_buffered_lines_are_written_at_exit(tmp_path: Path) -> None:
    script = (
        "import asyncio\n"
        "from a2a_handoff.observe import events, logs\n"
        "logs.configure('info', 'text')\n"
        "async def main():\n"
        "    events.transitions('t-9', 'c-9', ['TASK_STATE_COMPLETED'])\n"
        "asyncio.run(main())\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    assert "task t-9 -> completed" in done.stderr


def test_contract_metrics_are_named_for_the_contract(observer: Observer) -> None:
    events.contract(["handoff.latency_ms", "handoff.rejected"], "triage-to-billing", 42.0)
    metrics = observer.metrics
    labels = {"contract": "triage-to-billing"}
    assert metrics.value("a2a_contract_handoff_latency_ms_count", labels) == 1
    assert metrics.value("a2a_contract_handoff_latency_ms_sum", labels) == 42.0
    assert metrics.value("a2a_contract_handoff_rejected_total", labels) == 1


def test_a_line_below_the_level_costs_no_formatting(observer: Observer) -> None:
    class Loud:
        def __str__(self) -> str:
            raise AssertionError("formatted although the level drops the line")

    logger = logging.getLogger("a2a_handoff.test_quiet")
    logger.setLevel(logging.WARNING)
    logs.note(logger, "x", "value %s", Loud(), task_id="t")  # INFO: dropped unformatted


def test_json_lines_carry_the_ids_and_the_current_trace(
    observer: Observer, lines: io.StringIO
) -> None:
    trace_id = "4bf92f3577b34da6a3ce929d0e0e4736"
    with tracing.adopted(trace_id):
        events.transitions("t-1", "c-1", ["TASK_STATE_WORKING"])
    (line,) = [json.loads(x) for x in lines.getvalue().splitlines()]
    assert line["event"] == "task.transition"
    assert (line["task_id"], line["context_id"], line["trace_id"]) == ("t-1", "c-1", trace_id)
    assert line["agent"] == "billing"
    assert line["logger"] == "a2a_handoff.events"


def test_trace_context_travels_in_traceparent() -> None:
    assert tracing.current_trace_id() is None
    headers: dict[str, str] = {}
    tracing.outgoing(headers)
    assert headers == {}  # no trace, no header
    trace_id = "0af7651916cd43dd8448eb211c80319c"
    with tracing.adopted(trace_id):
        tracing.outgoing(headers)
        assert tracing.trace_of("01a209a7-e443-7fe5-bb16-99953c57752c") == trace_id
    version, sent, parent, flags = headers["traceparent"].split("-")
    assert (version, sent, flags) == ("00", trace_id, "01")
    assert len(parent) == 16
    token = tracing.incoming({"traceparent": headers["traceparent"]})
    try:
        assert tracing.current_trace_id() == trace_id
    finally:
        tracing.leave(token)
    assert tracing.current_trace_id() is None
    # Outside a trace, a task's work is the trace named for the task.
    assert tracing.trace_of("01a209a7-E443-7fe5-bb16-99953c57752c") == (
        "01a209a7e4437fe5bb1699953c57752c"
    )
    assert tracing.trace_of("not-a-uuid") is None
    # Not a trace id: nothing adopted.
    with tracing.adopted("not-hex-and-not-32-long"):
        assert tracing.current_trace_id() is None


@pytest.mark.parametrize(
    "traceparent",
    [
        "00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7",  # a part missing
        "00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01-extra",  # v00 has four
        "00-00000000000000000000000000000000-00f067aa0ba902b7-01",  # all-zero trace id
        "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",  # all-zero parent
        "ff-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01",  # version ff
        "00-0af7651916cd43dd8448eb211c80319g-00f067aa0ba902b7-01",  # not hex
        "00-0af7651916cd43dd8448eb211c8031-00f067aa0ba902b7-01",  # too short
        "",
    ],
)
def test_a_malformed_traceparent_is_ignored(traceparent: str) -> None:
    token = tracing.incoming({"traceparent": traceparent})
    try:
        assert tracing.current_trace_id() is None
    finally:
        tracing.leave(token)


def test_traceparent_is_read_from_an_asgi_scopes_headers() -> None:
    trace_id = "0af7651916cd43dd8448eb211c80319c"
    raw = [(b"host", b"127.0.0.1"), (b"traceparent", f"00-{trace_id}-00f067aa0ba902b7-01".encode())]
    token = tracing.incoming_raw(raw)
    try:
        assert tracing.current_trace_id() == trace_id
    finally:
        tracing.leave(token)
    assert tracing.incoming_raw([(b"host", b"127.0.0.1")]) is None
    assert tracing.current_trace_id() is None


def test_a_later_version_of_traceparent_is_read_for_its_trace_id() -> None:
    # W3C: a version above 00 may carry more parts; its first four are read as version 00's.
    header = "01-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01-more"
    token = tracing.incoming({"traceparent": header})
    try:
        assert tracing.current_trace_id() == "0af7651916cd43dd8448eb211c80319c"
    finally:
        tracing.leave(token)
    assert tracing.current_trace_id() is None


def test_a_status_note_in_the_same_state_is_not_a_transition(
    observer: Observer, lines: io.StringIO
) -> None:
    from a2a_handoff.protocol.models import Task, TaskStatus
    from a2a_handoff.protocol.states import TaskState
    from a2a_handoff.protocol.steps import status_event

    def event(state: TaskState) -> Any:
        task = Task(id="t-1", context_id="c-1", status=TaskStatus(state=state))
        return status_event(task)

    working, done = event(TaskState.WORKING), event(TaskState.COMPLETED)
    # A new task: submitted → working, then two notes while working, then completed.
    events.committed_items("t-1", "c-1", [event(TaskState.SUBMITTED), working, working])
    events.committed_items("t-1", "c-1", [working], before=TaskState.WORKING.value)
    events.committed_items("t-1", "c-1", [working, done], before=TaskState.WORKING.value)
    count = observer.metrics.value
    assert count("a2a_task_transitions_total", {"state": "submitted"}) == 1
    assert count("a2a_task_transitions_total", {"state": "working"}) == 1
    assert count("a2a_task_transitions_total", {"state": "completed"}) == 1
    said = [json.loads(line)["state"] for line in lines.getvalue().splitlines()]
    assert said == ["submitted", "working", "completed"]
