from __future__ import annotations

import pytest

from a2a_handoff.errors import IllegalTransitionError
from a2a_handoff.protocol.states import (
    TERMINAL_STATES,
    TRANSITIONS,
    TaskState,
    can_transition,
    transition,
)


def test_terminal_states_are_exactly_the_five_endings() -> None:
    assert {
        TaskState.COMPLETED,
        TaskState.FAILED,
        TaskState.CANCELED,
        TaskState.REJECTED,
        TaskState.TRANSFERRED,
    } == TERMINAL_STATES
    assert all(state.terminal for state in TERMINAL_STATES)


def test_every_state_has_a_row_in_the_table() -> None:
    assert set(TRANSITIONS) == set(TaskState)


@pytest.mark.parametrize("state", sorted(TERMINAL_STATES))
def test_nothing_leaves_a_terminal_state(state: TaskState) -> None:
    for target in TaskState:
        with pytest.raises(IllegalTransitionError, match="terminal"):
            transition(state, target)


def test_working_can_end_in_transferred() -> None:
    assert transition(TaskState.WORKING, TaskState.TRANSFERRED) is TaskState.TRANSFERRED


def test_input_required_resumes_to_working_only_or_ends() -> None:
    assert can_transition(TaskState.INPUT_REQUIRED, TaskState.WORKING)
    assert can_transition(TaskState.INPUT_REQUIRED, TaskState.CANCELED)
    assert not can_transition(TaskState.INPUT_REQUIRED, TaskState.SUBMITTED)
    assert not can_transition(TaskState.INPUT_REQUIRED, TaskState.INPUT_REQUIRED)


def test_nothing_goes_back_to_submitted() -> None:
    for state in TaskState:
        assert not can_transition(state, TaskState.SUBMITTED)


def test_illegal_move_names_both_states() -> None:
    with pytest.raises(IllegalTransitionError, match="WORKING to SUBMITTED"):
        transition(TaskState.WORKING, TaskState.SUBMITTED)


def test_interrupted_states() -> None:
    assert {s for s in TaskState if s.interrupted} == {
        TaskState.INPUT_REQUIRED,
        TaskState.AUTH_REQUIRED,
    }
