"""The phases of one task's run: one table, one `advance()`.

A run's phase says what its handler is doing and what the run may still do: whether a
cancel stops the handler, waits for it, or is refused; whether the handler may still answer
with a direct Message; whether emitting is taken, dropped or refused. Nothing else in the
runtime keeps a flag for it. (The journal's scheduled write is not a phase: it is when a
step's events go to the store, whatever the run does.)
"""

from __future__ import annotations

from enum import StrEnum


class PhaseError(RuntimeError):
    """A run was asked for a phase change the table forbids (a bug, or a handler using its
    context after its step ended)."""


class Phase(StrEnum):
    """Where one task's run is."""

    STARTING = "starting"  # the handler is not running yet (the task claimed, WORKING)
    RUNNING = "running"  # the handler runs and emitted nothing: it may still reply directly
    SPEAKING = "speaking"  # the handler runs and emitted: its task is written, no direct reply
    CANCELING = "canceling"  # a cancel stops the handler: the task ends CANCELED
    ENDING = "ending"  # the handler returned: its outcome is carried out, a cancel waits
    HANDING_OFF = "handing_off"  # a handoff is checkpointed or delivered: not cancelable
    HANDED_OVER = "handed_over"  # `ctx.handoffs.hand_off` gave the task away: the step is over
    ABORTED = "aborted"  # its work cannot be stored, or belongs to another task

    @property
    def handler_running(self) -> bool:
        """Whether a cancel stops the handler (rather than waiting for the run to end)."""
        return self in _CANCELABLE

    @property
    def cancelable(self) -> bool:
        """Whether a cancel is taken (refused while a handoff is under way or done)."""
        return self not in (Phase.HANDING_OFF, Phase.HANDED_OVER)

    @property
    def emits(self) -> bool:
        """Whether the run takes events in this phase (ABORTED drops them silently; any
        other phase not listed refuses them)."""
        return self in _EMITTING


_CANCELABLE = frozenset({Phase.STARTING, Phase.RUNNING, Phase.SPEAKING})
_EMITTING = frozenset(
    {Phase.STARTING, Phase.RUNNING, Phase.SPEAKING, Phase.CANCELING, Phase.ENDING}
)

PHASES: dict[Phase, frozenset[Phase]] = {
    # (every phase but ABORTED may end ABORTED: a write lost, the store gone, a duplicate)
    Phase.STARTING: frozenset({Phase.RUNNING, Phase.CANCELING, Phase.ABORTED}),
    Phase.RUNNING: frozenset({Phase.SPEAKING, Phase.CANCELING, Phase.ENDING, Phase.ABORTED}),
    Phase.SPEAKING: frozenset({Phase.HANDING_OFF, Phase.CANCELING, Phase.ENDING, Phase.ABORTED}),
    # A handler that swallows its cancellation and returns: its outcome is carried out.
    Phase.CANCELING: frozenset({Phase.ENDING, Phase.ABORTED}),
    Phase.ENDING: frozenset({Phase.HANDING_OFF, Phase.ABORTED}),
    # `ctx.handoffs.hand_off`: refused (or failed before it was checkpointed) → the handler goes on;
    # taken → the step is over. A returned handoff stays HANDING_OFF until it settles.
    Phase.HANDING_OFF: frozenset({Phase.SPEAKING, Phase.HANDED_OVER, Phase.ABORTED}),
    Phase.HANDED_OVER: frozenset({Phase.ABORTED}),
    Phase.ABORTED: frozenset(),
}


def advance(current: Phase, target: Phase) -> Phase:
    """Return `target` when `current -> target` is in the table, else raise PhaseError."""
    if target not in PHASES[current]:
        raise PhaseError(f"a task's run cannot go from {current.name} to {target.name}")
    return target
