"""The example agents' own rules: intents, entities, what goes into the transfer context."""

from __future__ import annotations

import pytest

from a2a_handoff import Handoff
from servers._text import find_amount, find_order_id
from servers.billing import billing_card
from servers.triage import TriageAgent, classify, triage_card


@pytest.mark.parametrize(
    ("text", "order"),
    [
        ("order 12345", "12345"),
        ("my order #777 never came", "777"),
        ("see #4242", "4242"),
        ("Order number: 9001", "9001"),
        ("12345", "12345"),
        ("I was charged twice", None),
        ("order 12", None),
    ],
)
def test_order_ids(text: str, order: str | None) -> None:
    assert find_order_id(text) == order


def test_amounts() -> None:
    assert find_amount("refund $120.50 please") == 120.5
    assert find_amount("no money here") is None


@pytest.mark.parametrize(
    ("text", "route", "capability"),
    [
        ("I was charged twice for my order, I want a refund", "billing", "refunds"),
        ("please send the invoice", "billing", "invoices"),
        ("where is my package", "logistics", "shipping"),
        ("tracking number?", "logistics", "shipping"),
    ],
)
def test_triage_routes_by_intent(text: str, route: str, capability: str) -> None:
    rule = classify(text)
    assert rule is not None
    assert (rule[0], rule[2]) == (route, capability)


def test_small_talk_is_not_routed() -> None:
    assert classify("hello, how are you?") is None


@pytest.mark.anyio
async def test_triage_hands_off_a_summary_not_the_transcript() -> None:
    from a2a_handoff.agent import TaskContext
    from a2a_handoff.protocol.models import Message, Part, Role, Task, TaskState, TaskStatus
    from tests.ports import RecordingPort

    text = "I was charged twice for order 12345, I want a refund of $80"
    message = Message(message_id="m", role=Role.USER, parts=[Part(text=text)])
    task = Task(id="t", context_id="c", status=TaskStatus(state=TaskState.WORKING))
    port = RecordingPort()
    ctx = TaskContext(message, task, port)
    outcome = await TriageAgent().handle(ctx)
    assert isinstance(outcome, Handoff)
    assert outcome.target == "billing"
    assert outcome.required == ("refunds",)
    assert outcome.context["entities"] == {"orderId": "12345", "amount": 80.0}
    assert text not in str(outcome.context)
    assert port.statuses == ["Routing to billing: refund request"]
    assert port.artifacts == []  # triage answers nothing itself when it hands off


def test_cards_declare_capabilities() -> None:
    from a2a_handoff import HANDOFF_EXTENSION_URI

    card = billing_card("http://b/")
    (ext,) = [e for e in card.capabilities.extensions or [] if e.uri == HANDOFF_EXTENSION_URI]
    assert ext.params is not None
    assert ext.params["capabilities"] == ["invoices", "refunds"]
    assert triage_card("http://t/").capabilities.extensions is not None
