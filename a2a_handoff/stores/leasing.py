"""Leases: named, expiring claims that replicas sharing a store race for.

A replica holds a lease to deliver a handoff, run a task or say it is alive; a store only one
process uses keeps its leases in that process (`LocalLeases`), since nobody races for them.
"""

from __future__ import annotations

import time
from typing import Protocol


class LeaseStore(Protocol):
    """Named leases that expire: which replica delivers a handoff, runs a task, is alive.

    `shared` tells whether other processes use the same store (replicas): only then are
    leases needed at all — a store one process owns keeps them in that process.
    """

    shared: bool

    async def acquire(self, name: str, holder: str, ttl: float) -> bool:
        """Take lease `name` for `ttl` seconds, or renew it if `holder` has it already.

        False while another holder's lease on it runs. Atomic across replicas.
        """
        ...

    async def release(self, name: str, holder: str) -> None:
        """Give lease `name` up, if `holder` has it."""
        ...

    async def holder(self, name: str) -> str | None:
        """Who holds lease `name` now (None: nobody, or it expired)."""
        ...


class LocalLeases:
    """Leases kept in this process: for stores no other process shares."""

    shared = False

    def __init__(self) -> None:
        self._leases: dict[str, tuple[str, float]] = {}

    async def acquire(self, name: str, holder: str, ttl: float) -> bool:
        now = time.monotonic()
        current = self._leases.get(name)
        if current is not None and current[0] != holder and current[1] > now:
            return False
        self._leases[name] = (holder, now + ttl)
        return True

    async def release(self, name: str, holder: str) -> None:
        current = self._leases.get(name)
        if current is not None and current[0] == holder:
            del self._leases[name]

    async def holder(self, name: str) -> str | None:
        current = self._leases.get(name)
        if current is None or current[1] <= time.monotonic():
            return None
        return current[0]
