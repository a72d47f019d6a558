"""Receiver pieces that need no agents: what a received task records about its handoff."""

from __future__ import annotations

import dataclasses
import hashlib

import pytest

from a2a_handoff.canonical import canonical
from a2a_handoff.errors import GateRefused
from a2a_handoff.handoff.ledger import received_entry
from a2a_handoff.handoff.receiver import Accept, receive_metadata
from a2a_handoff.handoff.sender import check_return
from a2a_handoff.handoff.verified import verify
from a2a_handoff.protocol.extension import HANDOFF_EXTENSION_URI as URI
from a2a_handoff.protocol.models import Message, Part, Role, Task, TaskStatus
from a2a_handoff.protocol.states import TaskState
from a2a_handoff.trust.trustlist import TrustList
from tests.a2a_handoff.handoff.test_delivery import envelope
from tests.trust_support import Signer

pytestmark = pytest.mark.anyio


async def test_a_received_task_records_its_envelope_digest_and_signer() -> None:
    signer = Signer("triage")
    trust = TrustList([signer.trusted()])
    env = envelope()
    signed = signer.metadata(env)
    verified = await verify(*signed.values(), "", trust, "billing")
    recorded = receive_metadata(verified)
    assert recorded["envelopeDigest"] == hashlib.sha256(canonical(env.dump())).hexdigest()
    assert recorded["handoff"]["signer"] == "triage"
    assert recorded["handoff"]["kid"] == signer.key.kid
    other = signer.metadata(envelope(reason="something else"))
    assert (await verify(*other.values(), "", trust, "billing")).digest != verified.digest


ESCALATION = {
    "whatHappened": "The customer asks for a large refund on order 9.",
    "whatWasTried": ["Found the order and computed the refund."],
    "whatIsNeeded": "permission to refund the order in full",
    "need": "permission",
    "trigger": "high_impact",
}


@pytest.mark.parametrize(("desk", "returns_to"), [(False, "triage"), (True, "billing")])
async def test_a_decision_returns_to_the_escalating_agent_unless_a_desk_forwards_it(
    desk: bool, returns_to: str
) -> None:
    # `returnTo` in an escalation is a claim: only a human desk (trusted to approve) may name
    # another agent than itself for the decision to go back to.
    signer = Signer("triage")
    trust = TrustList([signer.trusted(approvals=desk)])
    forward = {"agent": "billing", "url": "http://127.0.0.1:3/", "taskId": "t-b"}
    env = envelope(
        kind="escalation", transfer_context={"escalation": ESCALATION, "returnTo": forward}
    )
    verified = await verify(*signer.metadata(env).values(), "", trust, "billing")
    assert receive_metadata(verified)["escalation"]["returnsTo"]["agent"] == returns_to


def test_a_return_goes_only_where_the_escalation_returns_to() -> None:
    task = Task(
        id="t-h",
        context_id="c1",
        status=TaskStatus(state=TaskState.INPUT_REQUIRED),
        metadata={URI: {"escalation": {**ESCALATION, "returnsTo": {"agent": "triage"}}}},
    )
    check_return(task, "triage", "triage")
    with pytest.raises(GateRefused, match="only to triage"):
        check_return(task, "billing", "billing")
    bare = task.model_copy(update={"metadata": None})
    with pytest.raises(GateRefused, match="holds no escalation"):
        check_return(bare, "triage", "triage")


async def test_an_accepted_handoffs_ledger_row_names_its_task() -> None:
    signer = Signer("triage")
    verified = await verify(
        *signer.metadata(envelope()).values(), "", TrustList([signer.trusted()]), "billing"
    )
    row = received_entry(verified.envelope, "", "accepted", "")
    message = Message(message_id="m-1", role=Role.USER, parts=[Part(text="refund")])
    accept = Accept("key", None, message, verified, {}, row)
    assert accept.for_task("t-1") == dataclasses.replace(row, task_id="t-1")
    assert accept.for_task("t-1").task_id == "t-1"
