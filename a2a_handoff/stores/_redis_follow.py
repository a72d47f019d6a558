"""Following a task's events on Redis, from any replica.

A follower reads the task's stream (XRANGE) and waits for a notification on `n:<id>`,
published by the writing script itself (one pattern subscription per process). A
notification is only a hint — the stream is the truth, and a follower also re-reads after a
quiet second — so a lost notification (Redis restarting, say) delays, never loses.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Any

from a2a_handoff.stores.base import TaskEvent, TaskRecord

QUIET_SECONDS = 1.0  # a follower re-reads the stream after this long without a notification
CLOSE_SECONDS = 5.0  # closing waits this long at most for the listener to end


class RedisFollowers:
    """This process's followers and the one subscription that wakes them."""

    def __init__(self, channel_prefix: str) -> None:
        self.channel_prefix = channel_prefix  # `<prefix>n:`
        self._pubsub: Any = None
        self._listener: asyncio.Task[None] | None = None
        self._waiters: dict[str, set[asyncio.Event]] = {}

    async def start(self, client: Any) -> None:
        self._pubsub = client.pubsub(ignore_subscribe_messages=True)
        await self._pubsub.psubscribe(self.channel_prefix + "*")
        self._listener = asyncio.create_task(self._listen(), name="redis-notifications")

    async def aclose(self) -> None:
        if self._listener is not None:
            self._listener.cancel()
            # Bounded: closing a store never waits on Redis for long.
            await asyncio.wait([self._listener], timeout=CLOSE_SECONDS)
            self._listener = None
        if self._pubsub is not None:
            # Bounded too: a listener cut mid-read can leave its connection's lock taken.
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._pubsub.aclose(), CLOSE_SECONDS)
            self._pubsub = None

    async def _listen(self) -> None:
        channel_start = len(self.channel_prefix)
        while True:
            try:
                message = await self._pubsub.get_message(timeout=1.0)
            except asyncio.CancelledError:
                raise
            except Exception:
                task = asyncio.current_task()
                if task is not None and task.cancelling():
                    # A cancel that redis-py turned into its own error ends the listener
                    # still: a listener that goes on would keep the store's close waiting.
                    raise asyncio.CancelledError from None
                await asyncio.sleep(0.2)  # reconnecting; followers re-read meanwhile
                continue
            if message is None or message.get("type") != "pmessage":
                continue
            task_id = str(message["channel"])[channel_start:]
            for waiter in self._waiters.get(task_id, ()):
                waiter.set()

    async def follow(
        self,
        task_id: str,
        after: int,
        read_events: Callable[[str, int], Awaitable[list[TaskEvent]]],
        read_record: Callable[[str], Awaitable[TaskRecord | None]],
    ) -> AsyncGenerator[TaskEvent, None]:
        """The task's events after `after`, until the one that ends it."""
        wakeup = asyncio.Event()
        self._waiters.setdefault(task_id, set()).add(wakeup)
        try:
            last = after
            first = True
            while True:
                batch = await read_events(task_id, last)
                if first and not batch:
                    record = await read_record(task_id)
                    if record is None or (record.state.terminal and record.version <= last):
                        return
                first = False
                for event in batch:
                    yield event
                    last = event.seq
                    if event.final:
                        return
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(wakeup.wait(), QUIET_SECONDS)
                wakeup.clear()
        finally:
            waiters = self._waiters.get(task_id)
            if waiters is not None:
                waiters.discard(wakeup)
                if not waiters:
                    del self._waiters[task_id]
