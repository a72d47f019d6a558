"""A resumed step's replay: the cut run's emissions, matched in order, not sent twice."""

from __future__ import annotations

from a2a_handoff.protocol.extension import HANDOFF_EXTENSION_URI as URI
from a2a_handoff.protocol.models import (
    Artifact,
    Part,
    StreamResponse,
    Task,
    TaskArtifactUpdateEvent,
    TaskStatus,
)
from a2a_handoff.protocol.states import TaskState
from a2a_handoff.protocol.steps import agent_message, status_event, with_status
from a2a_handoff.runtime.replay import step_replay
from a2a_handoff.stores.base import TaskEvent

TASK = Task(id="t", context_id="c", status=TaskStatus(state=TaskState.SUBMITTED))


def said(text: str) -> StreamResponse:
    return status_event(with_status(TASK, TaskState.WORKING, agent_message(text, TASK)))


def artifact(text: str) -> StreamResponse:
    made = Artifact(artifact_id="a1", parts=[Part(text=text)], name="echo")
    return StreamResponse(
        artifact_update=TaskArtifactUpdateEvent(task_id="t", context_id="c", artifact=made)
    )


def log(*items: StreamResponse) -> list[TaskEvent]:
    return [TaskEvent(i, item) for i, item in enumerate(items, start=1)]


def test_only_the_cut_steps_own_emissions_are_replayed_in_order() -> None:
    working = with_status(TASK, TaskState.WORKING)
    asked = with_status(working, TaskState.INPUT_REQUIRED, agent_message("which?", TASK))
    used = status_event(working, {URI: {"approvalUsed": "d1"}})
    first_step = [StreamResponse(task=TASK), status_event(working), said("step one")]
    asking = status_event(asked)  # the first step ended here
    slept, made = said("slept 1"), artifact("hi")
    cut_step = [status_event(working), slept, used, made]
    replay = step_replay(log(*first_step, asking, *cut_step))
    assert replay.emitted == [slept, made]  # not the bare WORKING, nor the approval's note
    assert replay.approvals == {"d1"}
    assert replay.reuse("d1")
    assert not replay.reuse("d1")  # once


def test_a_matching_emission_is_consumed_and_the_first_other_ends_the_replay() -> None:
    working = status_event(with_status(TASK, TaskState.WORKING))
    replay = step_replay(log(working, said("1"), said("2"), artifact("x")))
    assert replay.matches(said("1"))  # a new message id, the same words: the same event
    assert not replay.matches(said("two"))  # the run went another way
    assert replay.emitted == []
    assert not replay.matches(said("2"))
