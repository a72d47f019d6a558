"""An app's lifespan: what runs before the first request is served, and after the last.

Before: the store is claimed for this agent (a shared store another agent owns refuses to
open) and opened, the agent's keys loaded (made on first start), the tasks a
previous process left running recovered, then the background work starts: the outbox (which
replays the handoffs that process left pending once this one serves: their targets fetch
its keys from it), the heartbeat. After: everything is closed, in the
reverse order. A store that fails reads during recovery (a damaged file) is served degraded
rather than not at all: `/health` says what is wrong, and the heartbeat tries again.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any

from a2a_handoff.agent import Agent
from a2a_handoff.client.client import AgentClient
from a2a_handoff.errors import StoreError
from a2a_handoff.observe import events
from a2a_handoff.push import Pusher
from a2a_handoff.runtime.tasks import TaskManager
from a2a_handoff.stores.base import Store
from a2a_handoff.trust.agent_trust import AgentTrust

log = logging.getLogger("a2a_handoff.server")

Face = Callable[[], AbstractAsyncContextManager[None]]
"""Another way in that runs while the app serves (the MCP face's `running`)."""


@dataclass(frozen=True, slots=True)
class Lifespan:
    """The lifespan of one app (Starlette's `lifespan=`)."""

    agent: Agent
    name: str  # the agent's name, as its card gives it
    store: Store
    manager: TaskManager
    trust: AgentTrust
    client: AgentClient
    own_client: bool  # built by the app: closed with it
    faces: Sequence[Face] = ()
    pusher: Pusher | None = None  # push notifications: delivered in the background

    @contextlib.asynccontextmanager
    async def __call__(self, app: Any) -> AsyncIterator[None]:
        self.store.claim(self.name)  # one store, one agent: another's is refused here
        await self.store.open()
        try:
            await self._start()
            async with contextlib.AsyncExitStack() as faces:
                for face in self.faces:
                    await faces.enter_async_context(face())
                yield
        finally:
            await self._stop()

    async def _start(self) -> None:
        legacy = self.store.capabilities.legacy_keys
        if legacy is not None:  # private keys left in a shared store: moved out first
            await legacy.refuse_legacy_identity(self.name)
        await self.trust.open()  # before any delivery: deliveries are signed
        self.trust.start()
        # Before serving: fail the tasks a previous process left running (with replicas:
        # those whose runner is gone). Its pending handoffs are the outbox's, once serving.
        await self.manager.leases.start()
        try:
            await self._recover()
        except StoreError as exc:
            log.error("start-up recovery failed, serving degraded: %s", exc)
        self.manager.handoffs.outbox.start()
        if self.pusher is not None:
            self.pusher.start()  # its first sweep resumes what a previous process left
        self.manager.start_background()

    async def _recover(self) -> None:
        recovered = await self.manager.recover()
        if recovered:
            done = "resumed" if getattr(self.agent, "resumes", False) else "failed"
            events.recovery(
                "orphaned", f"{done} %d task(s) left running by a previous process",
                recovered, count=recovered,
            )  # fmt: skip

    async def _stop(self) -> None:
        if self.pusher is not None:
            await self.pusher.aclose()
        await self.manager.aclose()
        await self.trust.aclose()
        if self.own_client:
            await self.client.aclose()
        await self.store.aclose()
