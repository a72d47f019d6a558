"""The outbox: every checkpointed handoff is delivered, once per process, until it ends.

A fresh handoff is delivered at once in the background (`spawn`). Entries left `pending` — by
a crash, a target that was down, a delivery that failed — are replayed with the same key at
start-up (before serving) and every `recovery_interval` seconds, so the target creates the
successor at most once and the source ends TRANSFERRED (or FAILED) exactly once. When
replicas share the store, an entry is delivered under its lease `outbox:<handoff id>`: one
replica delivers it while its lease runs; when that replica dies, another takes it over.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager

from a2a_handoff.errors import StoreError
from a2a_handoff.handoff.delivery import Delivery
from a2a_handoff.handoff.envelope import HandoffEnvelope
from a2a_handoff.handoff.sender import PENDING
from a2a_handoff.handoff.settings import HandoffSettings
from a2a_handoff.stores.base import OutboxEntry, Store, TaskRecord

log = logging.getLogger("a2a_handoff.handoff")

LeaseHolder = Callable[[str], AbstractAsyncContextManager[bool]]
"""`hold(name)`: hold the named lease for a block (renewed meanwhile); yields False if taken."""


class Outbox:
    """Delivers and replays this agent's pending handoffs."""

    def __init__(
        self, settings: HandoffSettings, store: Store, delivery: Delivery, hold: LeaseHolder
    ) -> None:
        self.settings = settings
        self.store = store
        self.delivery = delivery
        self.hold = hold
        self._waiters: dict[str, Callable[[TaskRecord], None]] = {}
        self._periodic: asyncio.Task[None] | None = None

    def spawn(
        self,
        entry: OutboxEntry,
        on_done: Callable[[TaskRecord], None] | None = None,
        fresh: bool = False,
        *,
        envelope: HandoffEnvelope | None = None,
        source: TaskRecord | None = None,
        reopen: bool = False,
    ) -> asyncio.Task[TaskRecord | None]:
        """Deliver an entry in the background, once per process.

        `on_done` is called with the source's final record by whichever delivery of this
        entry ends it — this one, or a later replay by the recovery loop if this one failed.
        `fresh`: this process just checkpointed the entry, whose `envelope` and `source`
        record it still holds (see `deliver`).
        """
        if on_done is not None:
            self._waiters[entry.handoff_id] = on_done
        running = self.delivery.in_flight.get(entry.handoff_id)
        if running is not None:
            return running
        job = asyncio.create_task(
            self._deliver_held(entry, fresh, envelope, source, reopen),
            name=f"handoff-{entry.handoff_id}",
        )
        self.delivery.in_flight[entry.handoff_id] = job

        def done(finished: asyncio.Task[TaskRecord | None]) -> None:
            self.delivery.in_flight.pop(entry.handoff_id, None)
            if finished.cancelled():
                return
            error = finished.exception()
            if error is not None:  # left pending: the recovery loop replays it
                log.error("handoff %s: delivery failed: %r", entry.handoff_id, error)
                return
            record = finished.result()
            if record is not None and record.state.terminal:
                waiter = self._waiters.pop(entry.handoff_id, None)
                if waiter is not None:
                    waiter(record)
            elif record is not None:  # reopened: its handler goes on, the entry is closed
                self._waiters.pop(entry.handoff_id, None)

        job.add_done_callback(done)
        return job

    async def _deliver_held(
        self,
        entry: OutboxEntry,
        fresh: bool,
        envelope: HandoffEnvelope | None,
        source: TaskRecord | None,
        reopen: bool = False,
    ) -> TaskRecord | None:
        """Deliver under the entry's lease when replicas share the store: one delivers it
        while its lease runs; when that replica dies, another takes it over (same key)."""
        deliver = self.delivery.deliver
        if not self.store.shared:
            return await deliver(entry, fresh, envelope=envelope, source=source, reopen=reopen)
        async with self.hold(f"outbox:{entry.handoff_id}") as held:
            if not held:
                return None
            return await deliver(entry, fresh, envelope=envelope, source=source, reopen=reopen)

    async def recover(self, wait_seconds: float | None = None) -> int:
        """Replay pending entries not being delivered; wait up to `wait_seconds` for them."""
        entries = await self.store.outbox(status=PENDING)
        jobs = [self.spawn(e) for e in entries if e.handoff_id not in self.delivery.in_flight]
        if jobs and wait_seconds:
            await asyncio.wait(jobs, timeout=wait_seconds)
        return len(jobs)

    def start(self) -> None:
        self._periodic = asyncio.create_task(self._recover_forever(), name="handoff-recovery")

    async def _recover_forever(self) -> None:
        failing = False
        while True:
            await asyncio.sleep(self.settings.recovery_interval)
            try:
                await self.recover()
            except StoreError as exc:  # the store is down: said once, tried again next time
                if not failing:
                    log.warning("handoff recovery: the store failed (%s); retrying", exc)
                failing = True
            except Exception:
                log.exception("handoff recovery failed")
            else:
                failing = False

    async def aclose(self) -> None:
        jobs = [j for j in (self._periodic, *self.delivery.in_flight.values()) if j is not None]
        for job in jobs:
            job.cancel()
        for job in jobs:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await job
