"""Log lines with ids: one per task transition, handoff step, rejection, recovery, escalation
and breaker change, each carrying `event`, `agent`, `task_id`, `context_id`, `handoff_id` and
`trace_id` as fields (`note`), rendered as text or as JSON (`configure`).

Cheap when off: `note` asks the logger first, so a level that drops the line costs one
cached check — no formatting, no trace look-up. Cheap when on, too: the standard `logging`
path costs some 25 µs a line (a LogRecord, a formatter, a flush), a tenth of a whole echo
request, so once `configure` has set the process up, `note`'s lines take a fast path (`Sink`):
rendered straight to text or JSON with the same fields, gathered and written once per turn of
the event loop. Every other line (uvicorn's, warnings, tracebacks) goes through `logging`,
with python-json-logger's formatter for JSON (rather than structlog: the library's loggers stay
plain `logging` loggers that an application configures as it configures any other).
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
import time
from typing import IO, Any

from a2a_handoff.observe import current, tracing

FIELDS = ("event", "agent", "task_id", "context_id", "handoff_id", "trace_id")
INFO = logging.INFO
TIME_FORMAT = "%Y-%m-%d %H:%M:%S"  # then ",mmm": logging's default asctime
EVENTS = "a2a_handoff.events"  # the logger of the event lines


class Sink:
    """Event lines written straight to a stream, flushed once per turn of the event loop
    (outside a loop: at once). Same fields and time format as the `logging` formatters."""

    def __init__(self, stream: IO[str], as_json: bool) -> None:
        self.stream = stream
        self.as_json = as_json
        self.lines: list[str] = []
        self.scheduled = False
        self._second = -1
        self._stamp = ""

    def _time(self, now: float) -> str:
        second = int(now)
        if second != self._second:  # strftime once a second
            self._second = second
            self._stamp = time.strftime(TIME_FORMAT, time.localtime(second))
        return f"{self._stamp},{int((now - second) * 1000):03d}"

    def write(self, level: int, logger: str, message: str, fields: dict[str, Any]) -> None:
        stamp = self._time(time.time())
        name = _LEVELS.get(level) or logging.getLevelName(level)
        if self.as_json:
            record = {"time": stamp, "level": name, "logger": logger, "message": message}
            record.update((k, v) for k, v in fields.items() if v is not None)
            line = json.dumps(record, default=str, ensure_ascii=False)
        else:
            extra = "".join(
                f" {k}={v}" for k, v in fields.items() if v is not None and k != "event"
            )
            line = f"{stamp} {name} {logger}: {message}{extra}"
        self.add(line)

    def transitions(
        self, agent: str, task_id: str, context_id: str, trace_id: str | None, states: list[str]
    ) -> None:
        """The lines of a write's transitions (`note`'s, made without its generic path: these
        are the hot lines, two for an echo request)."""
        stamp = self._time(time.time())
        for state in states:
            if self.as_json:
                self.write(INFO, EVENTS, f"task {task_id} → {state}", {
                    "event": "task.transition", "agent": agent or None, "task_id": task_id,
                    "context_id": context_id, "trace_id": trace_id, "state": state,
                })  # fmt: skip
                continue
            self.add(
                f"{stamp} INFO {EVENTS}: task {task_id} → {state} agent={agent}"
                f" task_id={task_id} context_id={context_id} trace_id={trace_id} state={state}"
            )

    def add(self, line: str) -> None:
        self.lines.append(line)
        if self.scheduled:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.flush()
            return
        self.scheduled = True
        loop.call_soon(self.flush)

    def flush(self) -> None:
        self.scheduled = False
        if self.lines:
            text = "\n".join(self.lines) + "\n"
            self.lines.clear()
            self.stream.write(text)
            self.stream.flush()


_sink: Sink | None = None


def sink() -> Sink | None:
    """The fast path, once `configure` set it up."""
    return _sink


_LEVELS = {logging.DEBUG: "DEBUG", INFO: "INFO", logging.WARNING: "WARNING", logging.ERROR: "ERROR"}


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
    fields = {
        "event": event,
        "agent": current().agent or None,
        "task_id": task_id,
        "context_id": context_id,
        "handoff_id": handoff_id,
        "trace_id": trace_id or tracing.current_trace_id(),
        **more,
    }
    if _sink is not None and not exc_info:
        _sink.write(level, logger.name, message % args if args else message, fields)
        return
    logger.log(level, message, *args, extra=fields, exc_info=exc_info)


class TextFormatter(logging.Formatter):
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


def json_formatter() -> logging.Formatter:
    from pythonjsonlogger.json import JsonFormatter

    return JsonFormatter(
        "%(asctime)s %(levelname)s %(name)s %(message)s",
        rename_fields={"asctime": "time", "levelname": "level", "name": "logger"},
    )


def configure(level: str = "info", fmt: str = "text", stream: IO[str] | None = None) -> None:
    """The process's log lines: `level` (debug, info, warning, error) as `fmt` (text, json),
    to `stream` (stderr); `note`'s lines take the fast path (`Sink`)."""
    global _sink
    out = stream or sys.stderr
    handler = logging.StreamHandler(out)
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
