"""In-process fan-out of committed task events, and the `follow()` built on it.

Backends that live in one process (memory, SQLite) publish each batch of events after it
commits; followers subscribe *before* reading the backlog, so an event is either in the
backlog or delivered live — and duplicates (in both) are dropped by seq. A follower that
falls behind by more than `limit` events is marked lagged and re-reads from the store,
so a slow reader costs bounded memory and loses nothing. When other processes write to the
same store (a shared SQLite file), a follower also re-reads after a quiet `poll`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterable

from a2a_handoff.stores.base import TaskEvent, TaskRecord


class _Subscriber:
    """One follower's live events. Small: every open stream holds one while it waits (a list
    and a future made only while waiting, where a deque and an `asyncio.Event` — with its
    own deque of waiters — took some 1.4 KiB before a single event arrived)."""

    __slots__ = ("_set", "_waiter", "lagged", "limit", "pending")

    def __init__(self, limit: int) -> None:
        self.pending: list[TaskEvent] = []
        self.lagged = False
        self.limit = limit
        self._set = False  # woken since the last wait (an Event's flag)
        self._waiter: asyncio.Future[None] | None = None

    def push(self, events: Iterable[TaskEvent]) -> None:
        if not self.lagged:
            self.pending.extend(events)
            if len(self.pending) > self.limit:
                self.pending.clear()
                self.lagged = True
        self._set = True
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def wait(self) -> None:
        """Until pushed to since the last wait returned (`Event.wait()` then `clear()`)."""
        if not self._set:
            self._waiter = waiter = asyncio.get_running_loop().create_future()
            try:
                await waiter
            finally:
                self._waiter = None
        self._set = False

    def take(self) -> list[TaskEvent]:
        """The events pushed since the last take."""
        taken, self.pending = self.pending, []
        return taken


class EventHub:
    """Per-task sets of live followers."""

    def __init__(self, limit: int = 256) -> None:
        self._subscribers: dict[str, set[_Subscriber]] = {}
        self._limit = limit

    def subscribe(self, task_id: str) -> _Subscriber:
        subscriber = _Subscriber(self._limit)
        self._subscribers.setdefault(task_id, set()).add(subscriber)
        return subscriber

    def unsubscribe(self, task_id: str, subscriber: _Subscriber) -> None:
        subscribers = self._subscribers.get(task_id)
        if subscribers is not None:
            subscribers.discard(subscriber)
            if not subscribers:
                del self._subscribers[task_id]

    def publish(self, task_id: str, events: list[TaskEvent]) -> None:
        for subscriber in self._subscribers.get(task_id, ()):
            subscriber.push(events)

    def __len__(self) -> int:
        return sum(len(s) for s in self._subscribers.values())


async def follow(
    hub: EventHub,
    task_id: str,
    after: int,
    read_events: Callable[[str, int], Awaitable[list[TaskEvent]]],
    read_record: Callable[[str], Awaitable[TaskRecord | None]],
    poll: float | None = None,
) -> AsyncGenerator[TaskEvent, None]:
    """Backlog then live events of one task, ending after its terminal event.

    `poll`: also re-read the store after this many quiet seconds (other processes write to it).
    """
    subscriber = hub.subscribe(task_id)
    event: TaskEvent | None = None  # dropped before each wait: a waiting follower keeps none
    try:
        last = after
        backlog = await read_events(task_id, last)
        had_backlog = bool(backlog)
        while backlog:  # consumed as it goes: a waiting follower keeps none of it alive
            event = backlog.pop(0)
            yield event
            last = event.seq
            if event.final:
                return
        if not had_backlog and await _ended(read_record, task_id, last):
            return
        event = None
        while True:
            if poll is None:
                await subscriber.wait()
            else:
                try:
                    await asyncio.wait_for(subscriber.wait(), poll)
                except TimeoutError:
                    subscriber.lagged = True
            if subscriber.lagged:
                subscriber.lagged = False
                batch: Iterable[TaskEvent] = await read_events(task_id, last)
            else:
                batch = subscriber.take()
            for event in batch:
                if event.seq <= last:
                    continue
                if event.seq != last + 1:
                    # A gap means a publish raced our backlog read: fill it from the store.
                    for missed in await read_events(task_id, last):
                        if missed.seq >= event.seq:
                            break
                        yield missed
                        last = missed.seq
                yield event
                last = event.seq
                if event.final:
                    return
            batch, event = (), None
    finally:
        hub.unsubscribe(task_id, subscriber)


async def _ended(
    read_record: Callable[[str], Awaitable[TaskRecord | None]], task_id: str, last: int
) -> bool:
    """Whether the task is gone or ended by event `last` (its record, a whole task, is not
    kept in the waiting follower's frame)."""
    record = await read_record(task_id)
    return record is None or (record.state.terminal and record.version <= last)
