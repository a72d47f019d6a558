"""The outbox: every checkpointed handoff is delivered, once per process, until it ends.

A fresh handoff is delivered at once in the background (`spawn`). Entries left `pending` — by
a crash, a target that was down, a delivery that failed — are replayed with the same key
just after start-up and every `recovery_interval` seconds, so the target creates the
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
from a2a_handoff.handoff.job import DeliveryJob
from a2a_handoff.handoff.sender import PENDING
from a2a_handoff.handoff.settings import HandoffSettings
from a2a_handoff.observe import events
from a2a_handoff.stores.base import Store, TaskRecord

log = logging.getLogger("a2a_handoff.handoff")

START_DELAY = 0.2
"""Seconds from start-up to the first replay of pending handoffs. Not before serving: the
target verifies an envelope with the source's keys, which the source serves (and a start-up
waiting on it would wait on itself); a replay that still finds the server not listening is
retried as any failed delivery is."""

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
        # handoff id → the task delivering it in this process
        self.in_flight: dict[str, asyncio.Task[TaskRecord | None]] = {}
        self._periodic: asyncio.Task[None] | None = None

    def spawn(
        self, job: DeliveryJob, on_done: Callable[[TaskRecord], None] | None = None
    ) -> asyncio.Task[TaskRecord | None]:
        """Deliver a job in the background, once per entry per process.

        `on_done` is called with the source's final record by whichever delivery ends the
        task — this one, or a later replay by the recovery loop if this one failed.
        """
        if on_done is not None:
            self._waiters[job.handoff_id] = on_done
        running = self.in_flight.get(job.handoff_id)
        if running is not None:
            return running
        chain = [job.handoff_id]  # the entries this task delivers, in turn
        task = asyncio.create_task(self._run(job, chain), name=f"handoff-{job.handoff_id}")
        self.in_flight[job.handoff_id] = task

        def done(finished: asyncio.Task[TaskRecord | None]) -> None:
            for handoff_id in chain:
                if self.in_flight.get(handoff_id) is finished:
                    del self.in_flight[handoff_id]
            if finished.cancelled():
                return
            last = chain[-1]
            error = finished.exception()
            if error is not None:  # left pending: the recovery loop replays it
                log.error("handoff %s: delivery failed: %r", last, error)
                return
            record = finished.result()
            if record is not None and record.state.terminal:
                waiter = self._waiters.pop(last, None)
                if waiter is not None:
                    waiter(record)
            elif record is not None:  # reopened: its handler goes on, the entry is closed
                self._waiters.pop(last, None)

        task.add_done_callback(done)
        return task

    async def _run(self, job: DeliveryJob, chain: list[str]) -> TaskRecord | None:
        """Deliver `job`, then each job a contract's recovery path queues after it: the
        source's final record."""
        while True:
            result = await self._deliver_held(job, chain)
            if not isinstance(result, DeliveryJob):
                return result
            job = result

    async def _deliver_held(
        self, job: DeliveryJob, chain: list[str]
    ) -> TaskRecord | DeliveryJob | None:
        """Deliver under the entry's lease when replicas share the store: one delivers it
        while its lease runs; when that replica dies, another takes it over (same key)."""
        if not self.store.shared:
            return self._queued(await self.delivery.deliver(job), chain)
        async with self.hold(f"outbox:{job.handoff_id}") as held:
            if not held:
                return None
            return self._queued(await self.delivery.deliver(job), chain)

    def _queued(
        self, result: TaskRecord | DeliveryJob | None, chain: list[str]
    ) -> TaskRecord | DeliveryJob | None:
        """A job that follows (a recovery path's handoff) is this task's to deliver next: the
        recovery loop must not start a second delivery of it, and whoever waited on the
        failed handoff now waits on it."""
        if isinstance(result, DeliveryJob):
            current = asyncio.current_task()
            if current is not None:
                self.in_flight[result.handoff_id] = current
            waiter = self._waiters.pop(chain[-1], None)
            if waiter is not None:
                self._waiters[result.handoff_id] = waiter
            chain.append(result.handoff_id)
        return result

    async def recover(self) -> int:
        """Replay pending entries not being delivered (in the background); how many."""
        entries = await self.store.outbox(status=PENDING)
        jobs = [self.spawn(DeliveryJob(e)) for e in entries if e.handoff_id not in self.in_flight]
        return len(jobs)

    def start(self, first_after: float = START_DELAY) -> None:
        """Replay pending entries `first_after` seconds from now, then every
        `recovery_interval`."""
        self._periodic = asyncio.create_task(
            self._recover_forever(first_after), name="handoff-recovery"
        )

    async def _recover_forever(self, first_after: float) -> None:
        failing, wait, first = False, first_after, True
        while True:
            await asyncio.sleep(wait)
            wait = self.settings.recovery_interval
            try:
                replayed = await self.recover()
                if first and replayed:
                    events.recovery(
                        "replayed", "replaying %d pending handoff(s)", replayed, count=replayed
                    )
                first = False
            except StoreError as exc:  # the store is down: said once, tried again next time
                if not failing:
                    log.warning("handoff recovery: the store failed (%s); retrying", exc)
                failing = True
            except Exception:
                log.exception("handoff recovery failed")
            else:
                failing = False

    async def aclose(self) -> None:
        jobs = [j for j in (self._periodic, *self.in_flight.values()) if j is not None]
        for job in jobs:
            job.cancel()
        for job in jobs:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await job
