"""`Delegated`: a delegation's outcome survives the journal's round trip, and says what it is."""

from __future__ import annotations

import pytest

from a2a_handoff import Artifact, Delegated, Part, TaskState
from a2a_handoff.outcomes import Handoff
from a2a_handoff.runtime.delegation_record import request_digest


def test_an_outcome_read_back_from_the_journal_is_the_same() -> None:
    refund = Artifact(artifact_id="a1", name="refund", parts=[Part(data={"orderId": "1"})])
    note = Artifact(artifact_id="a2", name="note", parts=[Part(text="hi"), Part(data=[1, 2])])
    outcome = Delegated("billing", TaskState.COMPLETED, "done", (note, refund), "t1", "k", 0)
    back = Delegated.from_stored("billing", "k", 0, outcome.to_stored())
    assert back == outcome
    assert back.ok
    assert not back.needs_input
    assert back.question is None
    assert back.data("refund") == {"orderId": "1"}
    assert back.data() == [1, 2]  # the first data part of any artifact
    assert back.data("missing") is None


@pytest.mark.anyio
async def test_only_a_question_can_be_answered() -> None:
    asking = Delegated("billing", TaskState.INPUT_REQUIRED, "Which order?", task_id="t1")
    assert asking.needs_input
    assert asking.question == "Which order?"
    done = Delegated("billing", TaskState.COMPLETED, "done", task_id="t1")
    with pytest.raises(RuntimeError, match="asks nothing"):
        await done.answer("order 1")


def test_a_request_is_told_apart_by_what_it_asks() -> None:
    one = Handoff("billing", "r", {"summary": "refund 1"}, kind="delegation")
    assert request_digest(one) == request_digest(Handoff("billing", "other reason",
                                                         {"summary": "refund 1"}))  # fmt: skip
    assert request_digest(one) != request_digest(Handoff("billing", "r", {"summary": "refund 2"}))
    assert request_digest(one) != request_digest(Handoff("logistics", "r", {"summary": "refund 1"}))
