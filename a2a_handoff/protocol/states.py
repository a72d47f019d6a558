"""The task state machine: one table, one `transition()`.

Nothing else in the package decides whether a state change is legal or whether a state is
terminal. Terminal tasks are immutable: a follow-up starts a new task in the same context.
TRANSFERRED is terminal and internal-first: on the wire it is rendered per client (see
`a2a_handoff.protocol.extension.render_task`).
"""

from __future__ import annotations

from enum import StrEnum

from a2a_handoff.errors import IllegalTransitionError


class TaskState(StrEnum):
    """A2A task states, valued by their ProtoJSON names, plus TRANSFERRED."""

    SUBMITTED = "TASK_STATE_SUBMITTED"
    WORKING = "TASK_STATE_WORKING"
    INPUT_REQUIRED = "TASK_STATE_INPUT_REQUIRED"
    AUTH_REQUIRED = "TASK_STATE_AUTH_REQUIRED"
    COMPLETED = "TASK_STATE_COMPLETED"
    FAILED = "TASK_STATE_FAILED"
    CANCELED = "TASK_STATE_CANCELED"
    REJECTED = "TASK_STATE_REJECTED"
    TRANSFERRED = "TASK_STATE_TRANSFERRED"

    @property
    def terminal(self) -> bool:
        """True when no transition leaves this state."""
        return not TRANSITIONS[self]

    @property
    def interrupted(self) -> bool:
        """True when the task waits for its caller (input or authentication)."""
        return self in (TaskState.INPUT_REQUIRED, TaskState.AUTH_REQUIRED)


_ENDINGS = frozenset(
    {
        TaskState.COMPLETED,
        TaskState.FAILED,
        TaskState.CANCELED,
        TaskState.REJECTED,
        TaskState.TRANSFERRED,
    }
)

TRANSITIONS: dict[TaskState, frozenset[TaskState]] = {
    TaskState.SUBMITTED: _ENDINGS
    | {TaskState.WORKING, TaskState.INPUT_REQUIRED, TaskState.AUTH_REQUIRED},
    TaskState.WORKING: _ENDINGS
    | {TaskState.WORKING, TaskState.INPUT_REQUIRED, TaskState.AUTH_REQUIRED},
    # An interrupted task resumes (WORKING) on a follow-up, or ends without one
    # (canceled by its caller, or handed off / failed by the agent).
    TaskState.INPUT_REQUIRED: _ENDINGS | {TaskState.WORKING},
    TaskState.AUTH_REQUIRED: _ENDINGS | {TaskState.WORKING},
    TaskState.COMPLETED: frozenset(),
    TaskState.FAILED: frozenset(),
    TaskState.CANCELED: frozenset(),
    TaskState.REJECTED: frozenset(),
    TaskState.TRANSFERRED: frozenset(),
}

TERMINAL_STATES = frozenset(state for state, nexts in TRANSITIONS.items() if not nexts)


def can_transition(current: TaskState, target: TaskState) -> bool:
    """Whether `current -> target` is a legal move."""
    return target in TRANSITIONS[current]


def transition(current: TaskState, target: TaskState) -> TaskState:
    """Return `target` when `current -> target` is legal, else raise IllegalTransitionError."""
    if target not in TRANSITIONS[current]:
        if current.terminal:
            raise IllegalTransitionError(
                f"task is {current.name}, a terminal state: it cannot become {target.name}"
            )
        raise IllegalTransitionError(f"a task cannot go from {current.name} to {target.name}")
    return target
