"""Log lines with ids: one per task transition, handoff step, rejection, recovery, escalation
and breaker change, each carrying `event`, `agent`, `task_id`, `context_id`, `handoff_id` and
`trace_id` as fields (`note`), rendered as text or as JSON (`configure`).

Cheap when off: `note` asks the logger first, so a level that drops the line costs one
cached check — no formatting, no trace look-up. Cheap when on, too: the standard `logging`
path costs some 25 µs a line (a LogRecord, a formatter, a flush), a tenth of a whole echo
request, so once `configure` has set the process up, `note`'s lines take a fast path (`Sink`):
rendered straight to text or JSON with the same fields and written in batches — an INFO line
waits at most `FLUSH_AFTER` (50 ms) for the lines after it, a WARNING or worse goes out at
once with those before it, and so do the buffered lines before any line `logging` writes and
at exit (so the order holds; a process killed with SIGKILL loses at most 50 ms of INFO
lines). Every other line (uvicorn's, warnings, tracebacks) goes through `logging`, with
python-json-logger's formatter for JSON (rather than structlog: the library's loggers stay
plain `logging` loggers that an application configures as it configures any other).
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import json
import logging
import sys
import time
from collections.abc import Mapping, Sequence
from typing import IO, Any

from a2a_handoff.observe import current, tracing
from a2a_handoff.observe._labels import short_state

FIELDS = ("event", "agent", "task_id", "context_id", "handoff_id", "trace_id")
INFO = logging.INFO
TIME_FORMAT = "%Y-%m-%dT%H:%M:%S"  # then ".mmmZ": ISO 8601, UTC, as the tasks' timestamps
EVENTS = "a2a_handoff.events"  # the logger of the event lines
FLUSH_AFTER = 0.05  # seconds an INFO line may wait for the lines after it
_BATCH = 512  # lines: written at once when this many wait
_MILLIS = tuple(f".{n:03d}Z" for n in range(1000))

_LEVELS = {logging.DEBUG: "DEBUG", INFO: "INFO", logging.WARNING: "WARNING", logging.ERROR: "ERROR"}


class Sink:
    """Event lines written straight to a stream, in batches (see the module's docstring).
    Same fields and time format as the `logging` formatters.

    A line is kept as a record (its time and fields) and rendered when the batch is written:
    on the hot path a line costs a tuple, and rendering a batch in one loop costs less than
    line by line."""

    def __init__(self, stream: IO[str], as_json: bool) -> None:
        self.stream = stream
        self.as_json = as_json
        self.records: list[tuple[Any, ...]] = []
        self._timer: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._second = self._ms = -1
        self._head = self._last = ""

    def event(
        self,
        level: int,
        logger: str,
        message: str,
        event: str,
        agent: str | None,
        task_id: str | None,
        context_id: str | None,
        handoff_id: str | None,
        trace_id: str | None,
        more: Mapping[str, Any],
    ) -> None:
        """One line: `message` and the fields that are not None."""
        self.records.append(
            (
                time.time(),
                level,
                logger,
                message,
                event,
                agent,
                task_id,
                context_id,
                handoff_id,
                trace_id,
                more,
            )
        )
        if level > INFO:
            self.flush()
        elif self._timer is None or len(self.records) >= _BATCH:
            self._schedule()

    def transitions(
        self,
        agent: str | None,
        task_id: str,
        context_id: str,
        trace_id: str | None,
        states: Sequence[str],
    ) -> None:
        """A write's transition lines, `task.transition` events (one record: these are the
        hot lines, two for an echo request); `states` by their wire names."""
        self.records.append((time.time(), None, agent, task_id, context_id, trace_id, states))
        if self._timer is None or len(self.records) >= _BATCH:
            self._schedule()

    def _schedule(self) -> None:
        """See that the records are written within `FLUSH_AFTER` (now: outside an event loop,
        or a full batch). A timer whose loop has closed never runs: the records it was for
        are written with the next flush (a WARNING, a line through `logging`, a full batch,
        `flush()`, exit)."""
        if len(self.records) >= _BATCH:
            self.flush()
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.flush()
            return
        if self._timer is None or self._loop is not loop:
            self._loop = loop
            self._timer = loop.call_later(FLUSH_AFTER, self.flush)

    def flush(self) -> None:
        """Write the buffered lines."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if not self.records:
            return
        records, self.records = self.records, []
        lines = self._json(records) if self.as_json else self._text(records)
        self.stream.write("\n".join(lines) + "\n")
        self.stream.flush()

    def _stamp(self, when: float) -> str:
        """`when` in ISO 8601, UTC, to the millisecond (`_IsoTime`'s); strftime once a
        second."""
        ms = int(when * 1000)
        if ms != self._ms:
            self._ms = ms
            second, milli = divmod(ms, 1000)
            if second != self._second:
                self._second = second
                self._head = time.strftime(TIME_FORMAT, time.gmtime(second))
            self._last = self._head + _MILLIS[milli]
        return self._last

    def _text(self, records: list[tuple[Any, ...]]) -> list[str]:
        lines: list[str] = []
        for record in records:
            stamp = self._stamp(record[0])
            if record[1] is None:  # transitions
                _, _, agent, task_id, context_id, trace_id, states = record
                if agent and trace_id:  # the usual line: one f-string
                    for wire in states:
                        state = short_state(wire)
                        lines.append(
                            f"{stamp} INFO {EVENTS}: task {task_id} -> {state} agent={agent}"
                            f" task_id={task_id} context_id={context_id} trace_id={trace_id}"
                            f" state={state}"
                        )
                    continue
                tail = _ids(agent, task_id, context_id, None, trace_id)
                for wire in states:
                    state = short_state(wire)
                    lines.append(
                        f"{stamp} INFO {EVENTS}: task {task_id} -> {state}{tail} state={state}"
                    )
                continue
            _, level, logger, message, _, agent, task_id, context_id, handoff_id, trace_id, more = (
                record
            )
            line = f"{stamp} {_LEVELS.get(level) or logging.getLevelName(level)} {logger}: "
            line += message + _ids(agent, task_id, context_id, handoff_id, trace_id)
            for key, value in more.items():
                if value is not None:
                    line += f" {key}={value}"
            lines.append(line)
        return lines

    def _json(self, records: list[tuple[Any, ...]]) -> list[str]:
        lines: list[str] = []
        for record in records:
            stamp = self._stamp(record[0])
            if record[1] is None:  # transitions
                _, _, agent, task_id, context_id, trace_id, states = record
                many = [
                    (
                        INFO,
                        EVENTS,
                        f"task {task_id} -> {short_state(wire)}",
                        "task.transition",
                        agent,
                        task_id,
                        context_id,
                        None,
                        trace_id,
                        {"state": short_state(wire)},
                    )
                    for wire in states
                ]
            else:
                many = [record[1:]]
            for (
                level,
                logger,
                message,
                event,
                agent,
                task_id,
                context_id,
                handoff_id,
                trace_id,
                more,
            ) in many:
                fields = {
                    "time": stamp,
                    "level": _LEVELS.get(level) or logging.getLevelName(level),
                    "logger": logger,
                    "message": message,
                    "event": event,
                    "agent": agent,
                    "task_id": task_id,
                    "context_id": context_id,
                    "handoff_id": handoff_id,
                    "trace_id": trace_id,
                    **more,
                }
                lines.append(
                    json.dumps(
                        {k: v for k, v in fields.items() if v is not None},
                        default=str,
                        ensure_ascii=False,
                    )
                )
        return lines


def _ids(
    agent: str | None,
    task_id: str | None,
    context_id: str | None,
    handoff_id: str | None,
    trace_id: str | None,
) -> str:
    """A text line's ids: ` agent=… task_id=…`, those that are not None."""
    if agent and task_id and context_id and trace_id:  # the usual line: one f-string
        if handoff_id is None:
            return f" agent={agent} task_id={task_id} context_id={context_id} trace_id={trace_id}"
        return (
            f" agent={agent} task_id={task_id} context_id={context_id} handoff_id={handoff_id}"
            f" trace_id={trace_id}"
        )
    ids = ""
    for key, value in (
        ("agent", agent),
        ("task_id", task_id),
        ("context_id", context_id),
        ("handoff_id", handoff_id),
        ("trace_id", trace_id),
    ):
        if value is not None:
            ids += f" {key}={value}"
    return ids


_sink: Sink | None = None


def sink() -> Sink | None:
    """The fast path, once `configure` set it up."""
    return _sink


def flush() -> None:
    """Write the event lines waiting in the fast path's buffer (if any)."""
    if _sink is not None:
        _sink.flush()


def note(
    logger: logging.Logger,
    event: str,
    message: str,
    *args: object,
    level: int = INFO,
    task_id: str | None = None,
    context_id: str | None = None,
    handoff_id: str | None = None,
    trace_id: str | None = None,
    exc_info: bool = False,
    **more: Any,
) -> None:
    """One line about `event`, with the ids as fields (`message` %-formatted with `args`)."""
    if not logger.isEnabledFor(level):
        return
    agent = current().agent or None
    if trace_id is None:
        trace_id = tracing.current_trace_id()
    if _sink is not None and not exc_info:
        _sink.event(
            level,
            logger.name,
            message % args if args else message,
            event,
            agent,
            task_id,
            context_id,
            handoff_id,
            trace_id,
            more,
        )
        return
    fields = {
        "event": event,
        "agent": agent,
        "task_id": task_id,
        "context_id": context_id,
        "handoff_id": handoff_id,
        "trace_id": trace_id,
        **more,
    }
    logger.log(level, message, *args, extra=fields, exc_info=exc_info)


class _Handler(logging.StreamHandler):  # type: ignore[type-arg]
    """logging's lines, after the event lines buffered before them (the order holds)."""

    def emit(self, record: logging.LogRecord) -> None:
        flush()
        super().emit(record)


class _IsoTime(logging.Formatter):
    """A line's time in ISO 8601, UTC, to the millisecond: `2026-05-04T12:00:00.123Z`."""

    converter = staticmethod(time.gmtime)
    default_time_format = TIME_FORMAT
    default_msec_format = "%s.%03dZ"


class TextFormatter(_IsoTime):
    """`time level logger: message key=value …` (the ids present on the record)."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        extra = [
            f"{name}={value}"
            for name in FIELDS
            if (value := record.__dict__.get(name)) is not None and name != "event"
        ]
        if not extra:
            return line
        head, sep, rest = line.partition("\n")  # a traceback stays below the line
        return f"{head} {' '.join(extra)}{sep}{rest}"


# Attributes of a record that are no field of a JSON line: uvicorn's `color_message` is its
# message again, with ANSI colour escapes in it, for its own coloured console formatter.
NOT_FIELDS = ("color_message",)


def json_formatter() -> logging.Formatter:
    from pythonjsonlogger.core import RESERVED_ATTRS
    from pythonjsonlogger.json import JsonFormatter

    class _Json(_IsoTime, JsonFormatter):
        pass

    return _Json(
        "%(asctime)s %(levelname)s %(name)s %(message)s",
        rename_fields={"asctime": "time", "levelname": "level", "name": "logger"},
        reserved_attrs=[*RESERVED_ATTRS, *NOT_FIELDS],
    )


def configure(level: str = "info", fmt: str = "text", stream: IO[str] | None = None) -> None:
    """The process's log lines: `level` (debug, info, warning, error) as `fmt` (text, json),
    to `stream` (stderr); `note`'s lines take the fast path (`Sink`)."""
    global _sink, _at_exit
    out = stream or sys.stderr
    flush()  # the lines of an earlier configuration, to their stream
    handler = _Handler(out)
    handler.setFormatter(json_formatter() if fmt == "json" else TextFormatter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
    # uvicorn's access log is a line per request: detail for debug, not an event worth a line
    # at INFO
    access = logging.INFO if root.level <= logging.DEBUG else max(logging.WARNING, root.level)
    logging.getLogger("uvicorn.access").setLevel(access)
    _sink = Sink(out, fmt == "json")
    if not _at_exit:
        atexit.register(_flush_at_exit)
        _at_exit = True


_at_exit = False


def _flush_at_exit() -> None:
    with contextlib.suppress(OSError, ValueError):  # the stream gone (closed, a broken pipe)
        flush()
