"""The hooks other rooms call where something worth seeing happens: each moves the current
agent's metrics and writes its log line (`logs.note`), in one call at the call site.

Every hook is cheap on the hot path: a cached metric child, and a log line only when the
logger's level lets it through.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from a2a_handoff.observe import current, tracing
from a2a_handoff.observe._labels import short_state
from a2a_handoff.observe.logs import EVENTS, INFO, note, sink

log = logging.getLogger(EVENTS)


def request(method: str, outcome: str) -> None:
    """A JSON-RPC call answered: `outcome` is `ok` or the error's name."""
    requests = current().metrics.hot.requests
    key = (method, outcome)
    requests[key] = requests.get(key, 0) + 1


def transitions(task_id: str, context_id: str, states: Sequence[str]) -> None:
    """Task state changes committed (wire names, `TASK_STATE_WORKING`, or the TaskState
    members, whose hash is cheaper than their `.value`): a line each."""
    observer = current()
    counts = observer.metrics.hot.transitions  # (inline: these are every request's)
    for state in states:
        counts[state] = counts.get(state, 0) + 1
    if not log.isEnabledFor(INFO):
        return
    trace_id = tracing.trace_of(task_id)
    fast = sink()
    if fast is not None:
        fast.transitions(observer.agent or None, task_id, context_id, trace_id, states)
        return
    for state in states:
        name = short_state(state)
        note(
            log,
            "task.transition",
            "task %s -> %s",
            task_id,
            name,
            task_id=task_id,
            context_id=context_id,
            trace_id=trace_id,
            state=name,
        )


def committed_items(
    task_id: str, context_id: str, items: Sequence[Any], before: str | None = None
) -> None:
    """The state changes among a write's events (StreamResponse items), from the state
    `before` the write (its wire name, or the TaskState; None: a new task). A status update
    in the state the task is already in (a WORKING note) is not a transition."""
    states: list[str] = []
    last = before
    for item in items:
        update = item.status_update
        if update is not None:
            state = update.status.state  # a StrEnum: compared and sliced as its wire name
            if state != last:
                states.append(state)
                last = state
    if states:
        transitions(task_id, context_id, states)


def _edge(envelope: Any) -> tuple[str, str, str]:
    return envelope.source.agent, envelope.target.agent, envelope.kind


_MADE: list[Any] = ["", 0.0]  # the last envelope time parsed, and its epoch seconds


def _epoch(created_at: str) -> float | None:
    """An envelope's `createdAt` as epoch seconds (the last one kept: a handoff asks twice)."""
    if _MADE[0] == created_at:
        return float(_MADE[1])
    try:
        seconds = datetime.fromisoformat(created_at.replace("Z", "+00:00")).timestamp()
    except (ValueError, AttributeError):
        return None
    _MADE[:] = [created_at, seconds]
    return seconds


def handoff_step(envelope: Any, step: str, task_id: str | None = None, **more: Any) -> None:
    """A step of a handoff on the sending side (decided, checkpointed, delivering), logged."""
    note(
        log,
        f"handoff.{step}",
        "handoff %s %s -> %s: %s",
        envelope.handoff_id,
        envelope.source.agent,
        envelope.target.agent,
        step,
        task_id=task_id or envelope.source.task_id,
        context_id=envelope.context_id,
        handoff_id=envelope.handoff_id,
        trace_id=envelope.trace_id,
        **more,
    )


def handoff_sent(envelope: Any, outcome: str, detail: str = "") -> None:
    """A handoff's delivery ended (`accepted`, `duplicate`, `rejected:<code>`, `expired`,
    `failed`); counted once per handoff, when its outbox entry closes."""
    obs = current()
    source, target, kind = _edge(envelope)
    obs.metrics.handoff_sent((source, target, kind, outcome))
    level = logging.INFO if outcome in ("accepted", "duplicate") else logging.WARNING
    note(
        log,
        "handoff.sent",
        "handoff %s %s -> %s (%s): %s%s",
        envelope.handoff_id,
        source,
        target,
        kind,
        outcome,
        f" ({detail})" if detail else "",
        level=level,
        task_id=envelope.source.task_id,
        context_id=envelope.context_id,
        handoff_id=envelope.handoff_id,
        trace_id=envelope.trace_id,
        outcome=outcome,
    )
    if kind == "escalation" and outcome == "accepted":
        escalation(envelope, "sent")


def handoff_delayed(envelope: Any, why: str, tries: int) -> None:
    """A handoff's delivery failed and is retried: logged when what is wrong changes (the
    first failure, another reason, its target's breaker opened), never once per retry."""
    source, target, _ = _edge(envelope)
    note(
        log,
        "handoff.delayed",
        "handoff %s %s -> %s: %s (%d failed %s so far)",
        envelope.handoff_id,
        source,
        target,
        why,
        tries,
        "try" if tries == 1 else "tries",
        level=logging.WARNING,
        task_id=envelope.source.task_id,
        context_id=envelope.context_id,
        handoff_id=envelope.handoff_id,
        trace_id=envelope.trace_id,
    )


def claimed(text: str, limit: int = 64) -> str:
    """An unproven value as a log field: control characters escaped (a newline in a made-up
    agent name must not start a forged log line), cut at `limit` characters."""
    escaped = text.encode("unicode_escape").decode("ascii") if not text.isprintable() else text
    return escaped if len(escaped) <= limit else escaped[: limit - 1] + "…"


def handoff_received(
    envelope: Any, task_id: str, outcome: str, reason: str = "", *, verified: bool = True
) -> None:
    """A handoff received: `accepted`, `duplicate`, or `rejected:<code>` (a rejection).

    An envelope refused before it was proven names whatever its sender made up: its names
    are counted as `unknown` (one label, however many names) and logged escaped and cut."""
    obs = current()
    source, target, kind = _edge(envelope)
    handoff_id, context_id = envelope.handoff_id, envelope.context_id
    if not verified:
        obs.metrics.handoff_received(("unknown", "unknown", kind, outcome))
        source, target, reason = claimed(source), claimed(target), claimed(reason, 300)
        handoff_id, context_id = claimed(handoff_id), claimed(context_id)
    else:
        obs.metrics.handoff_received((source, target, kind, outcome))
    rejected = outcome.startswith("rejected")
    note(
        log,
        "handoff.rejected" if rejected else "handoff.received",
        "handoff %s %s -> %s (%s) %s%s",
        handoff_id,
        source,
        target,
        kind,
        outcome,
        f": {reason}" if reason else "",
        level=logging.WARNING if rejected else logging.INFO,
        task_id=task_id,
        context_id=context_id,
        handoff_id=handoff_id,
        trace_id=envelope.trace_id if verified else None,
        outcome=outcome,
    )
    if kind in ("escalation",) and outcome == "accepted":
        escalation(envelope, "received", task_id)


def latency(envelope: Any, stage: str) -> None:
    """The time from the handoff decided (its envelope made) to `stage` (created,
    terminated)."""
    made = _epoch(envelope.created_at or "")
    if made is None:
        return
    seconds = max(0.0, time.time() - made)
    stage_of = (envelope.source.agent, envelope.target.agent, envelope.kind, stage)
    current().metrics.handoff_latency(stage_of, seconds)


def contract(names: Iterable[str], contract_id: str, value: float | None = None) -> None:
    """A ledger row under a contract naming metrics (`Metrics.contract`)."""
    current().metrics.contract(names, contract_id, value)


def escalation(envelope: Any, event: str, task_id: str | None = None, **more: Any) -> None:
    """An escalation `sent`, `received`, `decided` or `timed_out`."""
    if event != "sent":
        current().metrics.escalations.labels(event).inc()
    note(
        log,
        f"escalation.{event}",
        "escalation %s %s -> %s: %s",
        envelope.handoff_id,
        envelope.source.agent,
        envelope.target.agent,
        event,
        level=logging.WARNING if event == "timed_out" else logging.INFO,
        task_id=task_id or envelope.source.task_id,
        context_id=envelope.context_id,
        handoff_id=envelope.handoff_id,
        trace_id=envelope.trace_id,
        **more,
    )


def recovery(kind: str, message: str, *args: object, count: int = 1, **ids: Any) -> None:
    """A recovery action (`replayed`, `orphaned`, `resumed`, `contract_path`,
    `return_given_up`)."""
    current().metrics.recoveries.labels(kind).inc(count)
    note(log, f"recovery.{kind}", message, *args, level=logging.WARNING, **ids)


def breaker(target: str, state: str, failures: int, *, routine: bool = False) -> None:
    """A circuit breaker changed state (INFO: a client such as the orchestrator CLI, which
    configures no logging, must not print it on its users' terminal). `routine`: a probe
    let through, or a failed probe opening it again — counted, logged at DEBUG only: while
    a target stays down that is every cool-down."""
    current().metrics.breaker_changes.labels(target, state).inc()
    note(
        log,
        "breaker.change",
        "circuit for %s is %s after %d consecutive failure(s)",
        target,
        state,
        failures,
        level=logging.DEBUG if routine else logging.INFO,
        target=target,
        state=state,
    )


def commit(started: float, batch: int) -> None:
    """A store commit of `batch` writes that began at `started` (time.perf_counter)."""
    current().metrics.commit(time.perf_counter() - started, batch)


def handler_failed(task_id: str, context_id: str, error: BaseException) -> None:
    """A handler raised: its traceback, with the task's ids."""
    note(
        log,
        "handler.exception",
        "handler of task %s raised %s",
        task_id,
        type(error).__name__,
        level=logging.ERROR,
        task_id=task_id,
        context_id=context_id,
        trace_id=tracing.trace_of(task_id),
        exc_info=True,
    )


def escalation_decided(
    event: str,
    task_id: str,
    context_id: str,
    handoff_id: str,
    trace_id: str | None,
    verdict: Any = None,
) -> None:
    """An escalation held by a human agent is answered: `decided` by an operator, or
    `timed_out` (the fallback answered)."""
    current().metrics.escalations.labels(event).inc()
    note(
        log,
        f"escalation.{event}",
        "escalation %s on task %s: %s (%s)",
        handoff_id,
        task_id,
        event,
        verdict,
        level=logging.WARNING if event == "timed_out" else logging.INFO,
        task_id=task_id,
        context_id=context_id,
        handoff_id=handoff_id or None,
        trace_id=trace_id,
        verdict=verdict,
    )
