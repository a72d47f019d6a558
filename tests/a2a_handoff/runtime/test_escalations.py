"""The runtime's escalation helpers: a blocking escalation becomes a handoff to the human
agent, unless the policy turned its kind of declaration off; a FAILED task's failure class."""

from __future__ import annotations

from a2a_handoff import (
    Escalate,
    Escalation,
    EscalationPolicy,
    Failed,
    Handoff,
    Message,
    Part,
    Role,
    Task,
    TaskState,
)
from a2a_handoff.escalation import Need, Trigger
from a2a_handoff.protocol import HANDOFF_EXTENSION_URI, TaskStatus
from a2a_handoff.runtime.escalations import escalation_handoff, failure_kind
from a2a_handoff.runtime.tasks import dedupe_key


def escalation(trigger: Trigger) -> Escalate:
    return Escalate(
        Escalation(
            "A refund is over the limit.",
            ("checked the order",),
            "an operator to say whether to refund",
            Need.DECISION,
            trigger,
        )
    )


def test_a_blocking_escalation_is_a_handoff_to_the_human_agent() -> None:
    outcome = escalation_handoff(escalation(Trigger.REPEATED_FAILURE), EscalationPolicy())
    assert isinstance(outcome, Handoff)
    assert outcome.target == "human"


def test_a_declared_escalation_fails_when_declarations_are_off() -> None:
    policy = EscalationPolicy(declarations=False)
    for trigger in (Trigger.VALUE_UNCERTAINTY, Trigger.KNOWLEDGE_GAP):
        outcome = escalation_handoff(escalation(trigger), policy)
        assert isinstance(outcome, Failed)
        assert "turned off" in outcome.reason
    assert isinstance(escalation_handoff(escalation(Trigger.REPEATED_FAILURE), policy), Handoff)


def task_failed_with(metadata: dict[str, object] | None) -> Task:
    message = Message(message_id="m", role=Role.AGENT, parts=[Part(text="no")], metadata=metadata)
    status = TaskStatus(state=TaskState.FAILED, message=message)
    return Task(id="t", context_id="c", status=status)


def test_the_failure_kind_is_read_from_the_status_message_only_when_well_formed() -> None:
    assert (
        failure_kind(task_failed_with({HANDOFF_EXTENSION_URI: {"failure": {"kind": "x"}}})) == "x"
    )
    assert failure_kind(task_failed_with({HANDOFF_EXTENSION_URI: {"failure": {"kind": 3}}})) is None
    assert failure_kind(task_failed_with({HANDOFF_EXTENSION_URI: {"failure": "x"}})) is None
    assert failure_kind(task_failed_with(None)) is None


def test_a_message_id_is_unique_per_owner_and_context() -> None:
    first = Message(message_id="m1", role=Role.USER, parts=[Part(text="hi")], context_id="c1")
    other_context = first.model_copy(update={"context_id": "c2"})
    assert dedupe_key("alice", first) != dedupe_key("bob", first)
    assert dedupe_key("alice", first) != dedupe_key("alice", other_context)
    assert dedupe_key("alice", first) == dedupe_key("alice", first.model_copy())
