"""Retention: finished tasks deleted once they are older than the agent keeps them.

A background sweep, every `interval` seconds, asks the store (`RetentionStore`) to delete
the tasks that ended (a terminal state, TRANSFERRED included) before now minus `retain`,
with their events, push configs, outbox entries and ledger rows — `batch` tasks a
transaction, yielding to requests between batches, so a large backlog never holds the
store. The store keeps a task whose idempotency key is still live (a retry must find the
task it made), one with a handoff still pending and one with push deliveries still to
make. Several replicas may sweep at once: each deletion checks its task again, and a task
is deleted once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable

from a2a_handoff.errors import StoreError
from a2a_handoff.protocol.models import utc_stamp
from a2a_handoff.stores.base import RetentionStore

log = logging.getLogger("a2a_handoff.runtime")


def sweep_interval(retain: float) -> float:
    """How often to sweep by default: a tenth of the retention, 1 s at least, 60 s at most."""
    return min(60.0, max(1.0, retain / 10))


class RetentionSweep:
    """Deletes the finished tasks older than `retain` seconds, `batch` at a time, every
    `interval` seconds while it runs (`start` … `aclose`). `clock`: the unix time."""

    def __init__(
        self,
        store: RetentionStore,
        retain: float,
        *,
        batch: int = 100,
        interval: float | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.retain = retain
        self.batch = batch
        self.interval = sweep_interval(retain) if interval is None else interval
        self.clock = clock
        self.purged = 0  # tasks deleted since it started
        self._task: asyncio.Task[None] | None = None

    async def sweep(self) -> int:
        """One sweep: every finished task older than the retention deleted; how many."""
        before = utc_stamp(self.clock() - self.retain)
        total = 0
        while True:
            purged = await self.store.purge_finished(before, self.batch)
            total += purged
            if purged < self.batch:
                break
            await asyncio.sleep(0)  # requests go first between batches
        self.purged += total
        if total:
            log.info("retention: deleted %d finished task(s) older than %s", total, before)
        return total

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._loop(), name="retention-sweep")

    async def _loop(self) -> None:
        while True:
            try:
                await self.sweep()
            except StoreError as exc:  # the store is failing: the next sweep tries again
                log.warning("retention sweep failed: %s", exc)
            await asyncio.sleep(self.interval)

    async def aclose(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
