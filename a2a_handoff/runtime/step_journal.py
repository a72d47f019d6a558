"""Journaled steps — a handler's own side effect, done once per task and recorded — and a
step's checkpoint: where a handler got to, for it to go on from there when run again.

`await ctx.step(name, fn)` calls `fn(key)` — `key` is the step's idempotency key, stable for
the task and the name — and records its result in the task's journal
(`metadata[URI].steps[name]`), written with a status event and committed before the handler
sees it. A handler run again on the task (resumed after a crash, or in a later step) that
asks for the same step gets the recorded result back, `fn` not called again.

A step is done at least once: a crash after `fn` finished but before its record committed
calls `fn` again on the resumed run, with the same key. So a step whose effect leaves the
process (a payment, an e-mail) passes the key to the service that does it, as a payment
API's idempotency key: the effect then happens once, whatever crashes. An exception from
`fn` is not recorded: the step did not complete, and a run that asks for it again calls `fn`
again. The result must be JSON (what `json.dumps` takes: a tuple comes back as a list), at
most `MAX_RESULT_BYTES` once encoded.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from a2a_handoff.failpoints import failpoint, pausepoint
from a2a_handoff.protocol.extension import HANDOFF_EXTENSION_URI, ext_metadata, with_ext_metadata
from a2a_handoff.protocol.models import StreamResponse, Task
from a2a_handoff.protocol.steps import status_event
from a2a_handoff.runtime.journal import Journal

STEPS = "steps"
CHECKPOINT = "checkpoint"
MAX_RESULT_BYTES = 64 * 1024
MAX_CHECKPOINT_BYTES = 256 * 1024
MAX_NAME_LENGTH = 100


class Stepper(Protocol):
    """What a journaled step needs from the run it belongs to (`runtime.run.TaskRun`)."""

    journal: Journal

    def speak(self) -> None: ...

    def emit(self, task: Task, item: StreamResponse) -> None: ...


def step_key(task_id: str, name: str) -> str:
    """The idempotency key of step `name` of a task: the same on every run of the task."""
    return f"{task_id}/{name}"


async def journaled_step(run: Stepper, name: str, fn: Callable[[str], Awaitable[Any]]) -> Any:
    """`ctx.step`: the recorded result of step `name`, or `fn(key)`'s, recorded first."""
    if not name or len(name) > MAX_NAME_LENGTH:
        raise ValueError(f"a step's name: 1 to {MAX_NAME_LENGTH} characters, not {name!r}")
    entry = (ext_metadata(run.journal.task).get(STEPS) or {}).get(name)
    if isinstance(entry, dict) and "result" in entry:
        return entry["result"]
    result = await fn(step_key(run.journal.task.id, name))
    # What a re-run gets back, handed out now too.
    recorded = _as_json(result, f"step {name!r}: its result", MAX_RESULT_BYTES)
    await pausepoint("step.before_record")
    run.speak()
    task = run.journal.task
    steps = dict(ext_metadata(task).get(STEPS) or {})
    steps[name] = {"result": recorded}
    task = with_ext_metadata(task, **{STEPS: steps})
    run.emit(task, status_event(task, {HANDOFF_EXTENSION_URI: {"step": name}}))
    await run.journal.drain()
    failpoint("step.after_record")
    return recorded


async def checkpoint(run: Stepper, step: str, value: Any) -> None:
    """`ctx.checkpoint`: `value` (JSON) recorded as where step `step` got to, replacing the
    last one, committed before it returns; the step run again after a crash reads it
    (`ctx.checkpointed`). ValueError when it is over `MAX_CHECKPOINT_BYTES` (nothing kept)."""
    kept = _as_json(value, "a checkpoint", MAX_CHECKPOINT_BYTES)
    run.speak()
    task = with_ext_metadata(run.journal.task, **{CHECKPOINT: {"step": step, "value": kept}})
    run.emit(task, status_event(task, {HANDOFF_EXTENSION_URI: {CHECKPOINT: step}}))
    await run.journal.drain()


def _as_json(value: Any, what: str, most: int) -> Any:
    """`value` as it reads back from the journal's JSON; TypeError when it is not JSON,
    ValueError when it is over `most` bytes."""
    try:
        encoded = json.dumps(value, separators=(",", ":"))
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{what} must be JSON ({exc})") from None
    if len(encoded) > most:
        raise ValueError(f"{what}: {len(encoded)} bytes, over {most}")
    return json.loads(encoded)
