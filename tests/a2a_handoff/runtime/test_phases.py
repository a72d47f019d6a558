"""The phase table of a task's run, walked: every move it lists is taken, every other one
raises; what each phase lets a run do follows from it."""

from __future__ import annotations

import itertools

import pytest

from a2a_handoff.runtime.phases import PHASES, Phase, PhaseError, advance

PAIRS = list(itertools.product(Phase, Phase))
ALLOWED = [(a, b) for a, b in PAIRS if b in PHASES[a]]
FORBIDDEN = [(a, b) for a, b in PAIRS if b not in PHASES[a]]


def test_the_table_names_every_phase() -> None:
    assert set(PHASES) == set(Phase)
    assert len(ALLOWED) + len(FORBIDDEN) == len(Phase) ** 2
    assert len(ALLOWED) == 19  # a guard on the walk itself: a table emptied passes nothing


@pytest.mark.parametrize(("current", "target"), ALLOWED, ids=lambda p: p.name)
def test_every_move_the_table_lists_is_taken(current: Phase, target: Phase) -> None:
    assert advance(current, target) is target


@pytest.mark.parametrize(("current", "target"), FORBIDDEN, ids=lambda p: p.name)
def test_every_other_move_raises(current: Phase, target: Phase) -> None:
    with pytest.raises(PhaseError, match=f"from {current.name} to {target.name}"):
        advance(current, target)


def test_every_phase_is_reached_from_starting_and_every_run_may_be_aborted() -> None:
    reached, todo = {Phase.STARTING}, [Phase.STARTING]
    while todo:
        for target in PHASES[todo.pop()] - reached:
            reached.add(target)
            todo.append(target)
    assert reached == set(Phase)
    assert all(Phase.ABORTED in PHASES[p] for p in Phase if p is not Phase.ABORTED)
    assert not PHASES[Phase.ABORTED]  # aborted is the end: nothing leaves it


def test_what_each_phase_allows() -> None:
    # A cancel stops the handler only while it runs; it is refused once a handoff is under
    # way; in the other phases it waits for the run to end.
    assert {p for p in Phase if p.handler_running} == {
        Phase.STARTING,
        Phase.RUNNING,
        Phase.SPEAKING,
    }
    assert {p for p in Phase if not p.cancelable} == {Phase.HANDING_OFF, Phase.HANDED_OVER}
    # Events are taken until the step's outcome is written; not while a handoff is under
    # way or after it (ABORTED drops them, see test_run).
    assert {p for p in Phase if not p.emits} == {
        Phase.HANDING_OFF,
        Phase.HANDED_OVER,
        Phase.ABORTED,
    }
    # Only a handoff the handler makes itself comes back: refused, the handler goes on.
    assert [p for p in Phase if Phase.SPEAKING in PHASES[p]] == [Phase.RUNNING, Phase.HANDING_OFF]
