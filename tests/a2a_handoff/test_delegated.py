"""`Delegated`: a delegation's outcome survives the journal's round trip, and says what it is."""

from __future__ import annotations

import json

import pytest

from a2a_handoff import Artifact, Delegated, Part, TaskState
from a2a_handoff.delegated import MAX_NAME_CHARS, MAX_OMITTED, MAX_OUTCOME_BYTES
from a2a_handoff.llm.asking import told
from a2a_handoff.outcomes import Handoff
from a2a_handoff.protocol.models import Message, Role, Task, TaskStatus
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
    assert request_digest(one) == request_digest(
        Handoff("billing", "other reason", {"summary": "refund 1"})
    )
    assert request_digest(one) != request_digest(Handoff("billing", "r", {"summary": "refund 2"}))
    assert request_digest(one) != request_digest(Handoff("logistics", "r", {"summary": "refund 1"}))


def test_an_outcome_keeps_what_fits_and_names_the_rest() -> None:
    big = Artifact(artifact_id="a1", name="scan", parts=[Part(text="x" * MAX_OUTCOME_BYTES)])
    refund = Artifact(artifact_id="a2", name="refund", parts=[Part(data={"orderId": "1"})])
    status = TaskStatus(
        state=TaskState.COMPLETED,
        message=Message(message_id="m", role=Role.AGENT, parts=[Part(text="y" * 10_000)]),
    )
    task = Task(id="t1", context_id="c", status=status, artifacts=[big, refund])
    outcome = Delegated.of_task("billing", "k", 0, task)
    assert outcome.artifacts == (refund,)  # whole, in order, while they fit
    assert outcome.omitted == ({"artifactId": "a1", "name": "scan", "bytes": len(big.dump_json())},)
    assert outcome.text.startswith("y" * 8192)
    assert outcome.text.endswith("(1808 characters more)")
    assert len(json.dumps(outcome.to_stored())) < MAX_OUTCOME_BYTES
    assert Delegated.from_stored("billing", "k", 0, outcome.to_stored()) == outcome
    assert json.loads(told(outcome))["omitted"] == ["scan"]  # the model is told too


def test_a_hostile_delegates_left_out_artifacts_are_named_within_a_bound() -> None:
    # Each artifact too large to keep, with an id and a name of 100 000 characters: the names
    # in `omitted` are cut, so what the delegating task keeps stays bounded.
    huge = [
        Artifact(
            artifact_id=f"{i}" + "i" * 100_000,
            name="n" * 100_000,
            parts=[Part(text="x" * MAX_OUTCOME_BYTES)],
        )
        for i in range(MAX_OMITTED + 5)
    ]
    status = TaskStatus(state=TaskState.COMPLETED)
    outcome = Delegated.of_task(
        "billing", "k", 0, Task(id="t", context_id="c", status=status, artifacts=huge)
    )
    assert len(outcome.omitted) == MAX_OMITTED
    assert all(
        len(o["name"]) == len(o["artifactId"]) == MAX_NAME_CHARS + 1 for o in outcome.omitted
    )
    assert len(json.dumps(outcome.to_stored())) < MAX_OMITTED * (2 * MAX_NAME_CHARS + 100)
