"""Log lines with ids: one per task transition, handoff step, rejection, recovery, escalation
and breaker change, each carrying `event`, `agent`, `task_id`, `context_id`, `handoff_id` and
`trace_id` as fields (`note`), rendered as text or as JSON (`configure`).

Cheap when off: `note` asks the logger first, so a level that drops the line costs one
cached check — no formatting, no trace look-up. JSON is python-json-logger's formatter on
the standard `logging` module (rather than structlog): the library's loggers stay plain
`logging` loggers that an application configures as it configures any other.
"""

from __future__ import annotations

import logging
import sys
from typing import IO, Any

from a2a_handoff.observe import current, tracing

FIELDS = ("event", "agent", "task_id", "context_id", "handoff_id", "trace_id")
INFO = logging.INFO


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
    """The process's log lines: `level` (debug, info, warning, error) as `fmt` (text, json)."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(json_formatter() if fmt == "json" else TextFormatter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
    # uvicorn's access log is a line per request: not an event worth a line at INFO
    logging.getLogger("uvicorn.access").setLevel(max(logging.WARNING, root.level))
