"""A journal's write through a store outage: retried for `STORE_RETRY_SECONDS` once the
task is acknowledged, a write that may have landed before its answer was lost recognised
rather than applied twice."""

from __future__ import annotations

import asyncio
import time
from typing import Protocol

from a2a_handoff.errors import ConflictError, StoreDownError
from a2a_handoff.protocol.models import StreamResponse, Task
from a2a_handoff.stores.base import Store, TaskRecord

STORE_RETRY_SECONDS = 15.0
"""How long an acknowledged task's run retries a write while the store is unreachable."""


class StoreHolder(Protocol):
    @property
    def store(self) -> Store: ...


class Writer(Protocol):
    """What a retried write needs from the journal (`runtime.journal.Journal`)."""

    committed: TaskRecord | None
    created: asyncio.Future[TaskRecord]  # done once the task is acknowledged

    @property
    def host(self) -> StoreHolder: ...

    async def write_once(self, task: Task, items: list[StreamResponse]) -> bool: ...

    def wrote(self, record: TaskRecord) -> None: ...


async def retried(journal: Writer, task: Task, items: list[StreamResponse]) -> bool:
    """`journal.write_once(task, items)`, tried again while the store is unreachable — once the
    task is acknowledged (before, the caller is better told at once)."""
    deadline = time.monotonic() + STORE_RETRY_SECONDS
    delay = 0.1
    uncertain = False  # a failed attempt may have been applied all the same
    while True:
        try:
            return await journal.write_once(task, items)
        except StoreDownError:
            if not journal.created.done() or time.monotonic() + delay > deadline:
                raise
            uncertain = True
        except ConflictError:
            if uncertain and journal.committed is not None:
                landed = await _landed(journal, task, len(items))
                if landed is not None:
                    journal.wrote(landed)
                    return True
            raise
        await asyncio.sleep(delay)
        delay = min(delay * 2, 1.0)


async def _landed(journal: Writer, task: Task, events: int) -> TaskRecord | None:
    """The stored record, if it is exactly what the uncertain write would have made."""
    assert journal.committed is not None
    stored = await journal.host.store.get(task.id)
    expected = journal.committed.version + events
    if stored is not None and stored.version == expected and stored.task == task:
        return stored
    return None
