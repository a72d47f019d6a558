"""RFC 8785 canonical JSON: the specification's own vectors, and our fast path against the
reference implementation on generated values."""

from __future__ import annotations

import json
import struct
from typing import Any

import pytest
import rfc8785
from hypothesis import given
from hypothesis import strategies as st

from a2a_handoff.canonical import canonical
from a2a_handoff.errors import SignatureError

# RFC 8785 Appendix B: IEEE-754 bit patterns and their ECMAScript serializations.
NUMBERS = [
    ("0000000000000000", "0"),
    ("8000000000000000", "0"),
    ("0000000000000001", "5e-324"),
    ("8000000000000001", "-5e-324"),
    ("7fefffffffffffff", "1.7976931348623157e+308"),
    ("ffefffffffffffff", "-1.7976931348623157e+308"),
    ("4340000000000000", "9007199254740992"),
    ("c340000000000000", "-9007199254740992"),
    ("4430000000000000", "295147905179352830000"),
    ("44b52d02c7e14af5", "9.999999999999997e+22"),
    ("44b52d02c7e14af6", "1e+23"),
    ("44b52d02c7e14af7", "1.0000000000000001e+23"),
    ("444b1ae4d6e2ef4e", "999999999999999700000"),
    ("444b1ae4d6e2ef4f", "999999999999999900000"),
    ("444b1ae4d6e2ef50", "1e+21"),
    ("3eb0c6f7a0b5ed8c", "9.999999999999997e-7"),
    ("3eb0c6f7a0b5ed8d", "0.000001"),
    ("41b3de4355555553", "333333333.3333332"),
    ("41b3de4355555554", "333333333.33333325"),
    ("41b3de4355555555", "333333333.3333333"),
    ("41b3de4355555556", "333333333.3333334"),
    ("41b3de4355555557", "333333333.33333343"),
    ("becbf647612f3696", "-0.0000033333333333333333"),
    ("43143ff3c1cb0959", "1424953923781206.2"),
]


@pytest.mark.parametrize(("bits", "expected"), NUMBERS)
def test_numbers_are_written_as_ecmascript_writes_them(bits: str, expected: str) -> None:
    value = struct.unpack(">d", bytes.fromhex(bits))[0]
    assert canonical([value]) == f"[{expected}]".encode()


def test_the_rfc_example_sorts_members_by_utf16_code_units() -> None:
    # RFC 8785 §3.2.3: the order is by UTF-16 code units, not by code points.
    value = {
        "\u20ac": "Euro Sign",
        "\r": "Carriage Return",
        "\ufb33": "Hebrew Letter Dalet With Dagesh",
        "1": "One",
        "\U0001f600": "Emoji: Grinning Face",
        "\u0080": "Control",
        "\u00f6": "Latin Small Letter O With Diaeresis",
    }
    keys = list(json.loads(canonical(value)))
    assert keys == ["\r", "1", "\u0080", "\u00f6", "\u20ac", "\U0001f600", "\ufb33"]


def test_the_rfc_example_document() -> None:
    # RFC 8785 §3.2.2 sample input and its canonical output.
    sample = {
        "numbers": [333333333.33333329, 1e30, 4.50, 2e-3, 0.000000000000000000000000001],
        "string": "\u20ac$\u000f\u000aA'\u0042\u0022\u005c\\\"/",
        "literals": [None, True, False],
    }
    expected = (
        '{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],'
        '"string":"€$\\u000f\\nA\'B\\"\\\\\\\\\\"/"}'
    )
    assert canonical(sample) == expected.encode()


def test_the_fast_path_writes_what_rfc8785_writes_for_envelopes() -> None:
    envelope = {
        "handoffId": "h",
        "hop": 1,
        "visited": ["triage"],
        "transferContext": {
            "summary": "ünïcödé — \u2028 \x7f \t tab",
            "entities": {"orderId": "12345"},
            "ok": True,
            "none": None,
            "big": 2**53 - 1,
        },
    }
    assert canonical(envelope) == rfc8785.dumps(envelope)


SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-(2**53) + 1, 2**53 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
)
JSON = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=20,
)


@given(JSON)
def test_canonical_equals_the_reference_on_any_json(value: Any) -> None:
    try:
        expected = rfc8785.dumps(value)
    except rfc8785.CanonicalizationError:  # lone surrogates: refused by both
        with pytest.raises(SignatureError):
            canonical(value)
        return
    assert canonical(value) == expected


@pytest.mark.parametrize(
    "value",
    [float("nan"), float("inf"), 2**53, -(2**53), {1: "a"}, b"bytes", {"s": "\udc00"}],
)
def test_values_without_a_canonical_form_are_refused(value: Any) -> None:
    with pytest.raises(SignatureError):
        canonical(value)


def test_a_nesting_too_deep_is_refused_not_a_crash() -> None:
    deep: Any = "x"
    for _ in range(100_000):
        deep = [deep]
    with pytest.raises(SignatureError):
        canonical(deep)


def test_a_nesting_past_orjsons_limit_is_still_written() -> None:
    # orjson refuses past 254 levels; the standard library writes it, as before.
    deep: Any = {"b": 1, "a": "x"}
    for _ in range(300):
        deep = [deep]
    assert canonical(deep) == b"[" * 300 + b'{"a":"x","b":1}' + b"]" * 300
