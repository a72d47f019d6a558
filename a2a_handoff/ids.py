"""Identifiers: time-ordered UUIDs (version 7, RFC 9562).

Task, context, message and artifact ids made here sort by creation time. Besides reading well
in logs, that keeps a store's B-tree inserts on its right-most pages: with random (version 4)
ids every insert dirtied a page of its own, and the bytes each fsync'd commit wrote tripled
(measured on SQLite, bench/).
"""

from __future__ import annotations

import os
import time


def new_id() -> str:
    """A UUIDv7: 48 bits of Unix milliseconds, version and variant bits, 74 random bits."""
    millis = time.time_ns() // 1_000_000
    rand = os.urandom(10).hex()  # 20 hex digits: 3 + 16 used, the variant folded in below
    variant = "89ab"[int(rand[3], 16) & 3]
    stamp = f"{millis & 0xFFFF_FFFF_FFFF:012x}"
    return f"{stamp[:8]}-{stamp[8:]}-7{rand[:3]}-{variant}{rand[4:7]}-{rand[7:19]}"
