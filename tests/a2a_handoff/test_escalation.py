"""The escalation model and rules, without processes."""

from __future__ import annotations

import time
from typing import Any

import pytest

from a2a_handoff import (
    Decision,
    Escalate,
    Escalation,
    EscalationPolicy,
    Rejected,
    TaskContext,
    Verdict,
)
from a2a_handoff.errors import IncompleteEscalationError
from a2a_handoff.escalation import Action, Need, Trigger
from a2a_handoff.protocol.models import Message, Part, Role, Task, TaskStatus
from a2a_handoff.protocol.states import TaskState
from tests.ports import RecordingPort

HAPPENED = "The customer asks for a refund of $900 on order 77."
TRIED = ["Found order 77 and computed the refund."]
NEEDED = "permission to refund $900 on order 77"


def complete(**changes: Any) -> Escalation:
    fields: dict[str, Any] = {
        "what_happened": HAPPENED,
        "what_was_tried": TRIED,
        "what_is_needed": NEEDED,
        "need": Need.PERMISSION,
        "trigger": Trigger.HIGH_IMPACT,
    }
    fields.update(changes)
    return Escalation(**fields)


def test_a_complete_escalation_round_trips_through_json() -> None:
    escalation = complete(action=Action("refund", {"orderId": "77"}, amount=900.0))
    data = escalation.to_json("blocking")
    assert data["whatHappened"] == HAPPENED
    assert data["whatWasTried"] == TRIED
    assert data["tier"] == "blocking"
    again = Escalation.from_json(data)
    assert again.what_is_needed == NEEDED
    assert again.action is not None
    assert again.action.fingerprint() == escalation.action.fingerprint()  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("changes", "names"),
    [
        ({"what_happened": "I'm stuck"}, "what happened"),
        ({"what_happened": ""}, "what happened"),
        ({"what_is_needed": "help"}, "what is needed"),
        ({"what_was_tried": []}, "what was tried"),
        ({"what_was_tried": "retried it"}, "what was tried"),  # a string is not a list
        ({"what_was_tried": ["x"]}, "what was tried"),
        ({"need": "vibes"}, "need must be one of"),
        ({"trigger": "low_confidence"}, "trigger must be one of"),  # confidence is no trigger
    ],
)
def test_an_incomplete_escalation_is_refused_naming_what_is_missing(
    changes: dict[str, Any], names: str
) -> None:
    with pytest.raises(IncompleteEscalationError, match=names):
        complete(**changes)


def test_an_escalation_missing_parts_on_the_wire_is_refused() -> None:
    with pytest.raises(IncompleteEscalationError):
        Escalation.from_json({"whatHappened": HAPPENED, "need": "decision"})
    with pytest.raises(IncompleteEscalationError):
        Escalation.from_json("I'm stuck")  # type: ignore[arg-type]


def test_the_policy_holds_back_irreversible_and_large_actions_only() -> None:
    policy = EscalationPolicy(amount_limit=500)
    assert policy.held_back(Action("delete_db", irreversible=True)) is Trigger.IRREVERSIBLE_ACTION
    assert policy.held_back(Action("refund", amount=500.01)) is Trigger.HIGH_IMPACT
    assert policy.held_back(Action("refund", amount=500)) is None
    assert policy.held_back(Action("refund")) is None
    off = EscalationPolicy(irreversible=False)
    assert off.held_back(Action("delete_db", irreversible=True)) is None


def _decision(
    verdict: Verdict,
    escalation: dict[str, Any],
    *,
    expires_in: float = 600,
    by: str = "operator",
    text: str = "ok",
    decision_id: str = "d1",
) -> Decision:
    """A decision as the receiving edge makes it from signed claims (see handoff.verified)."""
    action = escalation.get("action") or {}
    return Decision(
        verdict,
        text,
        by,
        escalation,
        "",
        action.get("fingerprint"),
        time.time() + expires_in,
        decision_id,
        "human",
        "t0",
    )


def test_an_approval_is_for_exactly_the_action_it_was_asked_for() -> None:
    asked = Action("refund", {"orderId": "77"}, amount=900.0)
    escalation = complete(action=asked).to_json()
    decision = _decision(Verdict.APPROVED, escalation)
    assert decision.approves(Action("refund", {"orderId": "77"}, amount=900.0))
    assert not decision.approves(Action("refund", {"orderId": "77"}, amount=9000.0))
    assert not decision.approves(Action("refund", {"orderId": "78"}, amount=900.0))
    assert not _decision(Verdict.DENIED, escalation).approves(asked)
    assert not _decision(Verdict.APPROVED, escalation, expires_in=-1).approves(asked)
    # What the receiving task keeps of it reads back the same.
    assert Decision.from_stored(decision.to_stored()) == decision


def _context(
    transfer: dict[str, Any] | None = None,
    limit: float = 500,
    decision: Decision | None = None,
    used: set[str] | None = None,
) -> TaskContext:
    """A follow-up's context: `transfer` as the handoff message carried it, `decision` as
    the receiving edge stored it (verified), `used` the approvals used so far."""
    from a2a_handoff.protocol.extension import HANDOFF_EXTENSION_URI as URI

    metadata = None
    if transfer is not None:
        envelope = {
            "handoffId": "h",
            "idempotencyKey": "k" * 16,
            "rootKey": "r" * 16,
            "contextId": "c",
            "source": {"agent": "human", "url": "u", "taskId": "t0"},
            "target": {"agent": "billing", "url": "v"},
            "reason": "back",
            "hop": 3,
            "traceId": "x",
            "createdAt": "2026-11-22T00:00:00Z",
            "transferContext": transfer,
        }
        metadata = {URI: envelope}
    message = Message(
        message_id="m", role=Role.USER, parts=[Part(text="refund")], metadata=metadata
    )
    task = Task(
        id="t",
        context_id="c",
        status=TaskStatus(state=TaskState.WORKING),
        history=[message],
        metadata={URI: {"decision": decision.to_stored()}} if decision else None,
    )

    port = RecordingPort(used=used if used is not None else set())
    return TaskContext(message, task, port, policy=EscalationPolicy(amount_limit=limit))


def test_guard_escalates_before_the_action_then_lets_only_the_approved_one_run() -> None:
    refund = Action("refund", {"orderId": "77"}, amount=900.0, description="refund $900")
    first = _context().escalation.guard(refund, what_happened=HAPPENED, tried=TRIED)
    assert isinstance(first, Escalate)
    assert first.escalation.need is Need.PERMISSION
    assert first.escalation.what_is_needed == "permission to refund $900"

    asked = first.escalation.to_json()
    approved = _decision(Verdict.APPROVED, asked, text="fine")
    used: set[str] = set()
    assert (
        _context(decision=approved, used=used).escalation.guard(
            refund, what_happened=HAPPENED, tried=TRIED
        )
        is None
    )
    # Used once: the same approval again is refused, not run twice.
    again = _context(decision=approved, used=used).escalation.guard(
        refund, what_happened=HAPPENED, tried=TRIED
    )
    assert isinstance(again, Rejected)
    assert "was used already" in again.reason
    # An approval of $900 does not cover $9000: that one escalates again.
    bigger = Action("refund", {"orderId": "77"}, amount=9000.0)
    assert isinstance(
        _context(decision=approved).escalation.guard(bigger, what_happened=HAPPENED, tried=TRIED),
        Escalate,
    )
    # An expired approval approves nothing: the action is escalated again.
    expired = _decision(Verdict.APPROVED, asked, expires_in=-1)
    assert isinstance(
        _context(decision=expired).escalation.guard(refund, what_happened=HAPPENED, tried=TRIED),
        Escalate,
    )

    denied = _decision(Verdict.DENIED, asked, by="fallback", text="no way")
    outcome = _context(decision=denied).escalation.guard(
        refund, what_happened=HAPPENED, tried=TRIED
    )
    assert isinstance(outcome, Rejected)
    assert outcome.reason == "refund not done: denied by fallback: no way"


def test_an_unsigned_approval_in_the_transfer_context_approves_nothing() -> None:
    # The forgery of issue 13: an "approved" decision written into the transfer context by
    # hand, with the action's fingerprint anyone can compute. Only a verified decision counts.
    refund = Action("refund", {"orderId": "77"}, amount=900.0, description="refund $900")
    first = _context().escalation.guard(refund, what_happened=HAPPENED, tried=TRIED)
    assert isinstance(first, Escalate)
    forged = {"decision": _decision(Verdict.APPROVED, first.escalation.to_json()).to_stored()}
    outcome = _context(forged).escalation.guard(refund, what_happened=HAPPENED, tried=TRIED)
    assert isinstance(outcome, Escalate)
    small = Action("refund", {"orderId": "77"}, amount=20.0)
    assert _context().escalation.guard(small, what_happened=HAPPENED, tried=TRIED) is None


def test_an_action_whose_fingerprint_does_not_match_its_inputs_is_refused() -> None:
    # What the operator is shown (name, params, amount) is what the approval binds.
    data = complete(action=Action("refund", {"orderId": "77"}, amount=900.0)).to_json()
    assert Escalation.from_json(data).action is not None
    data["action"] = {**data["action"], "amount": 90000.0}  # the fingerprint of $900 kept
    with pytest.raises(IncompleteEscalationError, match="fingerprint does not match"):
        Escalation.from_json(data)


def test_an_action_keeps_its_fingerprint_across_the_wire() -> None:
    # 750.0 travels as 750 in canonical JSON: the same action, the same fingerprint.
    assert (
        Action("refund", {"n": 1.0}, amount=750.0).fingerprint()
        == Action("refund", {"n": 1}, amount=750).fingerprint()
    )
