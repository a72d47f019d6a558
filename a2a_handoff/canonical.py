"""Canonical JSON (RFC 8785, JCS): the bytes an envelope, a decision or a card is signed over.

Signer and verifier must make the same bytes of the same JSON value, whatever order and
spacing it travelled in: JCS sorts members by UTF-16 code units, writes numbers as ECMAScript
does and strings with the fewest escapes. `rfc8785` (Trail of Bits) is the reference. For the
common case — no floats, integers within ±(2^53-1), member names inside the Basic
Multilingual Plane — `json.dumps(sort_keys=True, ensure_ascii=False)` writes the very same
bytes, and so does orjson with sorted keys in a seventh of the instructions: orjson writes
them, the standard library what orjson refuses (nesting past its 254 levels), both tested
against `rfc8785` on generated values. Anything else goes to `rfc8785`; what it cannot
canonicalize (NaN, an integer JSON cannot carry exactly, a lone surrogate, a non-JSON type, a
nesting too deep) is refused with SignatureError — never signed, never verified.
"""

from __future__ import annotations

import json
from typing import Any

import orjson
import rfc8785

from a2a_handoff.errors import SignatureError

MAX_SAFE_INTEGER = 2**53 - 1  # I-JSON: larger integers lose precision in other parsers
# `json.dumps(value, sort_keys=True, …)` builds this encoder on every call: made once.
_ENCODE = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode


def _plain(value: Any) -> bool:
    """Whether `json.dumps(sort_keys=True)` writes `value` exactly as JCS does."""
    stack = [value]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is str or kind is bool or item is None:
            continue
        if kind is int:
            if -MAX_SAFE_INTEGER <= item <= MAX_SAFE_INTEGER:
                continue
            return False
        if kind is dict:
            for key in item:
                # Code-point order is UTF-16 order unless a name holds a character past U+FFFF.
                if type(key) is not str or not (key.isascii() or max(key) <= "\uffff"):
                    return False
            stack.extend(item.values())
        elif kind is list:
            stack.extend(item)
        else:
            return False  # a float (JCS writes numbers as ECMAScript does), or not JSON
    return True


def canonical(value: Any) -> bytes:
    """The RFC 8785 canonical form of a JSON value (dicts, lists, str, int, float, bool, None).

    Raises SignatureError when the value has no canonical form.
    """
    try:
        if _plain(value):
            try:
                return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
            except orjson.JSONEncodeError:  # too deep for it, or a lone surrogate
                return _ENCODE(value).encode()
        return rfc8785.dumps(value)
    except RecursionError:
        raise SignatureError("the JSON is nested too deeply to canonicalize") from None
    except (rfc8785.CanonicalizationError, UnicodeEncodeError, ValueError, TypeError) as exc:
        raise SignatureError(f"the JSON has no canonical form: {exc}") from None
