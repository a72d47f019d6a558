"""The predicate language: what it evaluates, and what it refuses (with a position)."""

from __future__ import annotations

from typing import Any

import pytest

from a2a_handoff.contracts import PredicateError, parse

STATE: dict[str, Any] = {
    "state": {"intent": "refund", "amount": 750, "visited": ["triage"], "escalated": False},
    "card": {"capabilities": ["refunds", "invoices"], "skills": ["refund"], "name": "billing"},
    "payload": {"entities": {"orderId": "12345"}},
}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("state.intent == 'refund'", True),
        ('state.intent == "refund"', True),
        ("state.intent != 'refund'", False),
        ("state.amount > 500 and not state.escalated", True),
        ("state.amount >= 750 AND state.amount < 751", True),
        ("state.amount <= 10 or state.intent in ['refund', 'cancel']", True),
        ("'refunds' in card.capabilities", True),
        ("card.skills contains 'refund'", True),
        ("card.capabilities contains 'shipping'", False),
        ("state.intent not in ['shipping']", True),
        ("'bill' in card.name", True),
        ("payload.entities.orderId == '12345'", True),
        ("state.missing == null", True),  # a missing path is null
        ("state.missing.deeper > 3", False),  # null does not compare: false, no error
        ("state.intent > 3", False),
        ("not (state.intent == 'refund' and state.amount > 1000)", True),
        ("true", True),
        ("state.visited", True),
        ("-1.5 < 0", True),
    ],
)
def test_predicates_evaluate_over_the_namespace(text: str, expected: bool) -> None:
    assert parse(text).evaluate(STATE) is expected


@pytest.mark.parametrize(
    ("text", "position"),
    [
        ("state.intent ==", 15),
        ("state.intent = 'x'", 13),
        ("(state.a == 1", 13),
        ("state.a == 1)", 12),
        ("state. == 1", 7),
        ("'unterminated", 0),
        ("state.a == 1 ; rm -rf /", 13),
        ("", 0),
    ],
)
def test_syntax_errors_name_their_position(text: str, position: int) -> None:
    with pytest.raises(PredicateError) as caught:
        parse(text)
    assert caught.value.position == position
    assert f"at position {position}" in str(caught.value)


@pytest.mark.parametrize(
    "text",
    [
        "__import__('os').system('true')",
        "state.__class__",
        "state.__dict__ == null",
        "().__class__.__bases__",
        "open('/etc/passwd')",
        "state.intent.upper()",
        "state['intent'] == 'refund'",
        "lambda: 1",
        "[x for x in state]",
        "state._private == 1",
        "exec('1')",
    ],
)
def test_attempts_to_escape_the_language_are_refused(text: str) -> None:
    with pytest.raises(PredicateError):
        parse(text).evaluate(STATE)


def test_huge_and_deeply_nested_input_is_refused_with_a_position() -> None:
    with pytest.raises(PredicateError, match="longer than"):
        parse("state.a == 1 or " * 400 + "true")
    with pytest.raises(PredicateError, match="nested more than") as caught:
        parse("(" * 40 + "true" + ")" * 40)
    assert caught.value.position > 0
    with pytest.raises(PredicateError, match="nested more than"):
        parse("not " * 40 + "true")


def test_paths_lists_what_a_predicate_reads() -> None:
    predicate = parse("state.intent == 'refund' and 'x' in card.capabilities")
    assert predicate.paths() == [("state", "intent"), ("card", "capabilities")]


def test_evaluation_only_looks_keys_up_in_mappings() -> None:
    class Sneaky:
        secret = "leaked"

    namespace = {"state": Sneaky()}
    assert parse("state.secret == 'leaked'").evaluate(namespace) is False


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1 == true", False),
        ("0 == false", False),
        ("true > 0", False),
        ("1 != true", True),
        ("1 in [true]", False),
        ("true in [1, true]", True),
        ("[1] contains true", False),
        ("true == true", True),
    ],
)
def test_booleans_are_not_numbers(text: str, expected: bool) -> None:
    assert parse(text).evaluate(STATE) is expected


def test_only_ascii_digits_are_numbers() -> None:
    with pytest.raises(PredicateError) as caught:
        parse("\u0663 == 3")  # ARABIC-INDIC DIGIT THREE
    assert caught.value.position == 0
