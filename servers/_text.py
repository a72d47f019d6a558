"""Small text helpers shared by the example agents (keyword rules, not a model)."""

from __future__ import annotations

import re

ORDER_ID = re.compile(r"(?:order(?:\s+(?:id|number|no\.?))?\s*[:#]?\s*#?|#)(\d{3,})", re.I)
AMOUNT = re.compile(r"\$\s?(\d+(?:\.\d{1,2})?)")


def find_order_id(text: str) -> str | None:
    """An order id written as `order 12345`, `order #12345`, `#12345`, or a bare number."""
    match = ORDER_ID.search(text)
    if match:
        return match.group(1)
    bare = re.fullmatch(r"\s*(\d{3,})\s*", text)
    return bare.group(1) if bare else None


def find_amount(text: str) -> float | None:
    match = AMOUNT.search(text)
    return float(match.group(1)) if match else None


def words(text: str) -> set[str]:
    return set(re.findall(r"[a-z]+", text.lower()))
