"""A `Commit` checks its own combinations as it is made: no backend sees one it could not
write as one transaction."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

from a2a_handoff.errors import StoreError
from a2a_handoff.protocol.states import TaskState
from a2a_handoff.stores.base import Closing, Commit, TaskRecord, check_ledger
from a2a_handoff.stores.conformance.samples import (
    creating,
    entry,
    moving,
    new_record,
    received,
    step,
)


def test_a_commit_creates_its_task_without_a_version_and_moves_one_with_it() -> None:
    record = new_record()
    made = creating(record, dedupe_key="k", dedupe_ttl=5.0, received=received(record))
    assert made.creates
    assert made.first_seq == 1
    later, moved = moving(record, TaskState.WORKING, outbox=entry(record))
    assert not moved.creates
    assert moved.first_seq == 2
    assert moved.record == later


@pytest.mark.parametrize(
    ("parts", "says"),
    [
        ({"close": Closing("h1", "done")}, "no pending entry to close"),
        ({"dedupe_ttl": 5.0}, "dedupe TTL needs a dedupe key"),
        ({"dedupe_key": "k", "dedupe_ttl": 0.0}, "positive"),
        ({"dedupe_key": "k", "dedupe_ttl": -1.0}, "positive"),
    ],
)
def test_a_new_task_refuses_what_it_cannot_carry(parts: dict[str, Any], says: str) -> None:
    with pytest.raises(ValueError, match=says):
        creating(new_record(), **parts)


@pytest.mark.parametrize(
    ("parts", "says"),
    [
        (lambda r: {"dedupe_key": "k"}, "taken by a new task only"),
        (lambda r: {"received": received(r)}, "goes with the task it creates"),
        (
            lambda r: {"outbox": entry(r, "h1"), "close": Closing("h1", "failed")},
            "cannot close the entry it adds",
        ),
        (lambda r: {"outbox": replace(entry(r), task_id="another")}, "must be its task's"),
    ],
)
def test_a_move_refuses_what_it_cannot_carry(
    parts: Callable[[TaskRecord], dict[str, Any]], says: str
) -> None:
    record = new_record()
    with pytest.raises(ValueError, match=says):
        moving(record, TaskState.WORKING, **parts(record))


def test_the_version_must_count_the_events() -> None:
    record = new_record()
    with pytest.raises(ValueError, match="version must equal its number of events"):
        Commit(replace(record, version=2), creating(record).events)
    later, events = step(record, TaskState.WORKING)
    with pytest.raises(ValueError, match="expected_version"):
        Commit(later, events, expected_version=0)
    with pytest.raises(TypeError):  # every part is named: a version is never taken for another
        Commit(later, events, 1)  # type: ignore[misc]


def test_a_ledger_row_created_for_another_task_is_refused() -> None:
    record = new_record()
    with pytest.raises(ValueError, match="must name the task it creates"):
        creating(record, received=received(new_record()))


def test_a_store_without_a_ledger_refuses_only_the_ledger_parts() -> None:
    record = new_record()
    check_ledger(creating(record, dedupe_key="k"), None)  # the core: taken
    later, unit = moving(
        record, TaskState.WORKING, outbox=entry(record, "h2"), close=Closing("h1", "failed")
    )
    assert unit.record == later
    with pytest.raises(StoreError, match=r"declares no ledger .* outbox and close"):
        check_ledger(unit, None)
    check_ledger(unit, object())  # a store with a ledger takes it
