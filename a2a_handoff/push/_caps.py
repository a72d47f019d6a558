"""The caps on push configs: so many per task, so many with deliveries left per caller.

A config costs its agent a delivery worker and, while the receiver is slow, a connection: the
caps keep one caller from making so many that the others' deliveries wait. `per_task` counts
a task's configs; `per_caller` counts the configs not yet `done` (deliveries left to make)
on the tasks one principal owns, in every tenant (naming more tenants buys it no more) — a
finished task's configs, once delivered, cost nothing and do not count. Replacing a config
(the same id) adds none. A config beyond a cap is refused with -32602 (InvalidParams) and
nothing is stored.

The count and the write are one step in this process (`lock`): two requests of one caller
cannot both take the last place. Replicas sharing a store each check before writing, so
requests racing on two replicas may go a config or two past a cap, never further.
"""

from __future__ import annotations

import asyncio

from a2a_handoff.errors import InvalidParamsError
from a2a_handoff.push.push_config import PushSettings
from a2a_handoff.stores.base import PushStore
from a2a_handoff.stores.records import owner_principal


class PushCaps:
    """Checks a new config against `settings`' caps, in `store`."""

    def __init__(self, store: PushStore, settings: PushSettings) -> None:
        self.store = store
        self.settings = settings
        self.lock = asyncio.Lock()  # held by `Pusher.add` across the check and the write

    async def check(self, task_id: str, config_id: str | None, owner: str) -> None:
        """InvalidParams when a config `config_id` (None: a new one) on `owner`'s task
        `task_id` would go past a cap; nothing when it replaces one of the task's."""
        configs = await self.store.push_configs(task_id)
        if config_id is not None and any(c.config_id == config_id for c in configs):
            return
        most = self.settings.per_task
        if len(configs) >= most:
            raise InvalidParamsError(
                f"taskId: the task has {len(configs)} push notification configs, the most"
                f" allowed per task is {most}: delete one first",
                metadata={"taskId": task_id},
            )
        await self.check_caller(owner)

    async def check_caller(self, owner: str) -> None:
        """InvalidParams when the tasks of `owner`'s principal, in every tenant, have as many
        configs with deliveries left as the per-caller cap allows."""
        most = self.settings.per_caller
        active = await self.store.active_push_count(owner_principal(owner))
        if active >= most:
            raise InvalidParamsError(
                f"the tasks of this caller have {active} push notification configs with"
                f" deliveries left, the most allowed per caller is {most}: delete one first"
            )
