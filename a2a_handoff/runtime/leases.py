"""Leases, when replicas share the store (no-ops otherwise), and the heartbeat that sweeps.

- `task:<task id>`: the replica running the task's handler. Taken before the run writes
  anything (a follow-up's run that cannot take it answers "task is busy"), renewed every
  `interval` while the run lives, released when it settles or aborts; it lapses `ttl`
  seconds (a few) after its replica died or lost the store;
- `outbox:<handoff id>`: the replica delivering a pending handoff (see `handoff.recovery`);
- `handover:<task id>`: a draining replica let go of the task's run on purpose (see
  `hand_over`): another replica resumes it at its next sweep, without waiting out the grace.

A task whose runner lease lapsed is an orphan: any replica fails it (check-and-set, so one
does). A replica that could not reach the store sweeps again only once it has reached it for
`ttl` seconds: every live runner has renewed its leases by then, so a store that comes back
never has its live runs failed under them.

The heartbeat runs with every store: with one the process owns, it only fails the tasks this
process stranded (their writes failed; see `TaskManager.sweep`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime

from a2a_handoff.handoff.settings import HandoffSettings
from a2a_handoff.ids import new_id
from a2a_handoff.protocol.models import parse_time
from a2a_handoff.stores.base import Store, TaskRecord

log = logging.getLogger("a2a_handoff.runtime")

HANDOVER_SECONDS = 60.0
"""How long a task handed over stays marked so: longer than the grace of the replicas that
may sweep it (theirs may differ from this one's), with the usual recovery intervals."""


class Leases:
    """This replica's leases and heartbeat (see the module docstring)."""

    def __init__(
        self, store: Store, settings: HandoffSettings, sweep: Callable[[bool], Awaitable[object]]
    ) -> None:
        self.store = store
        self.sweep = sweep  # sweep(others): fail stranded tasks, and orphans when `others`
        self.me = f"{settings.agent_name}:{new_id()}"
        self.interval = max(0.1, settings.recovery_interval / 2)
        self.ttl = max(1.0, self.interval * 3)
        self.grace = self.ttl * 2  # a task younger than this may not have its runner yet
        self._held: set[str] = set()  # tasks whose runner lease this replica holds
        self._releasing: dict[str, asyncio.Task[None]] = {}
        self._reached_since: float | None = None  # the store answers since then
        self._beat: asyncio.Task[None] | None = None

    async def start(self) -> None:
        if self.store.shared:
            self._reached_since = time.monotonic() - self.ttl  # open() just reached it
        self._beat = asyncio.create_task(self._heartbeat(), name="heartbeat")

    async def _heartbeat(self) -> None:
        failing = False
        while True:
            await asyncio.sleep(self.interval)
            try:
                if self.store.shared:
                    await self._renew()
                    if self._reached_since is None:
                        self._reached_since = time.monotonic()
                    steady = time.monotonic() - self._reached_since >= self.ttl
                    await self.sweep(steady)
                else:
                    await self.sweep(False)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self._reached_since = None
                if not failing:
                    log.warning("heartbeat: the store failed (%s); retrying", exc)
                failing = True
            else:
                if failing:
                    log.warning("heartbeat: the store answers again")
                failing = False

    async def _renew(self) -> None:
        held = list(self._held)
        if held:
            await asyncio.gather(
                *(self.store.acquire(f"task:{task_id}", self.me, self.ttl) for task_id in held)
            )

    async def claim_task(self, task_id: str) -> bool:
        """Take the task's runner lease; False while another replica's run holds it."""
        if not self.store.shared:
            return True
        releasing = self._releasing.get(task_id)
        if releasing is not None:  # this replica's last run of it is letting go: wait
            with contextlib.suppress(Exception):
                await asyncio.shield(releasing)
        if not await self.store.acquire(f"task:{task_id}", self.me, self.ttl):
            return False
        self._held.add(task_id)
        return True

    def free_task(self, task_id: str) -> None:
        """Release the task's runner lease (in the background; it lapses anyway)."""
        if not self.store.shared or task_id not in self._held:
            return
        self._held.discard(task_id)
        job = asyncio.create_task(self._release(f"task:{task_id}"))
        self._releasing[task_id] = job

        def done(_: asyncio.Task[None]) -> None:
            if self._releasing.get(task_id) is job:
                del self._releasing[task_id]

        job.add_done_callback(done)

    async def _release(self, name: str) -> None:
        with contextlib.suppress(Exception):  # unreachable: the lease lapses in `ttl`
            await self.store.release(name, self.me)

    async def hand_over(self, task_id: str) -> None:
        """Let go of the task's runner lease on purpose, its run stopped (a drain): marked
        handed over first, so that another replica resumes it at its next sweep rather
        than once the grace of a young task ran out."""
        if not self.store.shared or task_id not in self._held:
            return
        self._held.discard(task_id)
        with contextlib.suppress(Exception):  # unreachable: the lease lapses in `ttl`
            marked = max(HANDOVER_SECONDS, self.grace * 2)  # past any replica's grace
            await self.store.acquire(f"handover:{task_id}", self.me, marked)
            await self.store.release(f"task:{task_id}", self.me)

    async def runner_alive(self, record: TaskRecord) -> bool:
        """Whether the task's handler may still be running on some replica."""
        if await self.store.holder(f"task:{record.id}") is not None:
            return True
        age = datetime.now(UTC) - parse_time(record.updated_at)
        if age.total_seconds() >= self.grace:
            return False
        return await self.store.holder(f"handover:{record.id}") is None

    @contextlib.asynccontextmanager
    async def hold(self, name: str) -> AsyncIterator[bool]:
        """Hold lease `name` (renewed meanwhile) for the block; yields False if taken."""
        if not await self.store.acquire(name, self.me, self.ttl):
            yield False
            return

        async def renew() -> None:
            while True:
                await asyncio.sleep(self.interval)
                with contextlib.suppress(Exception):
                    await self.store.acquire(name, self.me, self.ttl)

        renewer = asyncio.create_task(renew())
        try:
            yield True
        finally:
            renewer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await renewer
            await self._release(name)

    async def aclose(self) -> None:
        if self._beat is not None:
            self._beat.cancel()
            # Bounded: a sweep cut mid-way must not keep the process from stopping.
            await asyncio.wait([self._beat], timeout=2)
            if self._beat.done() and not self._beat.cancelled():
                self._beat.exception()  # retrieved: nothing left unread at exit
        for task_id in list(self._held):
            self.free_task(task_id)
        if self._releasing:
            await asyncio.wait(list(self._releasing.values()), timeout=2)
