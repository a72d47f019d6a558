"""Leases, when replicas share the store (no-ops otherwise): who is alive, who runs what.

- `replica:<id>`: this replica is alive; renewed every `interval`, lapses `ttl` after a crash;
- `task:<task id>`: the replica running the task's handler, until the step settles;
- `outbox:<handoff id>`: the replica delivering a pending handoff (see `handoff.recovery`).
A task whose runner is no longer alive is an orphan: any replica fails it (check-and-set, so
one does). A handoff whose deliverer died is taken over, with the same key.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime

from a2a_handoff.handoff.settings import HandoffSettings
from a2a_handoff.ids import new_id
from a2a_handoff.protocol.models import parse_time
from a2a_handoff.stores.base import Store, TaskRecord

log = logging.getLogger("a2a_handoff.runtime")


class Leases:
    """This replica's leases (see the module docstring)."""

    def __init__(
        self, store: Store, settings: HandoffSettings, sweep: Callable[[], Awaitable[object]]
    ) -> None:
        self.store = store
        self.sweep = sweep  # run on every heartbeat: fail the tasks whose runner died
        self.me = f"{settings.agent_name}:{new_id()}"
        self.interval = max(0.1, settings.recovery_interval / 2)
        self.ttl = max(1.0, self.interval * 3)
        self.grace = self.ttl * 2  # a task younger than this may not have its runner yet
        self._beat: asyncio.Task[None] | None = None
        self._freeing: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        if not self.store.shared:
            return
        await self.store.acquire(f"replica:{self.me}", self.me, self.ttl)
        self._beat = asyncio.create_task(self._heartbeat(), name="replica-heartbeat")

    async def _heartbeat(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            try:
                await self.store.acquire(f"replica:{self.me}", self.me, self.ttl)
                await self.sweep()
            except Exception:
                log.exception("replica heartbeat failed")

    async def claim_task(self, task_id: str) -> None:
        await self.store.acquire(f"task:{task_id}", self.me, 86400.0)

    def free_task(self, task_id: str) -> None:
        if not self.store.shared:
            return
        job = asyncio.create_task(self.store.release(f"task:{task_id}", self.me))
        self._freeing.add(job)
        job.add_done_callback(self._freeing.discard)

    async def runner_alive(self, record: TaskRecord) -> bool:
        """Whether the task's handler may still be running on some replica."""
        runner = await self.store.holder(f"task:{record.id}")
        if runner is None:
            age = datetime.now(UTC) - parse_time(record.updated_at)
            return age.total_seconds() < self.grace
        return await self.store.holder(f"replica:{runner}") is not None

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
            with contextlib.suppress(Exception):
                await self.store.release(name, self.me)

    async def aclose(self) -> None:
        if self._beat is not None:
            self._beat.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._beat
        if self._freeing:
            await asyncio.wait(self._freeing, timeout=2)
        if self.store.shared:
            with contextlib.suppress(Exception):
                await self.store.release(f"replica:{self.me}", self.me)
