"""Waiting on a task that waits for someone else: an escalation, INPUT_REQUIRED at a human
agent until an operator answers. One implementation for the CLI and the gateway.

Invariants:
- where the agent's card offers streaming, the task is followed by SubscribeToTask (its stream
  stays open while the task waits for input): no request per interval, the answer seen at once;
- otherwise, or once a subscription fails, it is polled with backoff (`Backoff`: from 0.25 s,
  doubling up to 5 s, jittered), back to the first delay whenever the task changed;
- at the gateway, a client holds at most `Waits.cap` waits at once; one more is refused with
  `TooManyWaits`, before it sends anything.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field

from a2a_handoff import AgentClient, Task, TaskState
from a2a_handoff.errors import CircuitOpenError, RemoteError, UnavailableError
from a2a_handoff.protocol import TaskStatus


@dataclass
class Backoff:
    """Delays between polls: `first`, times `factor` each time up to `ceiling`, each scaled by
    a random factor within ±`jitter` (waits started together do not poll together)."""

    first: float = 0.25
    ceiling: float = 5.0
    factor: float = 2.0
    jitter: float = 0.2
    _next: float = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._next = self.first

    def delay(self) -> float:
        """The next delay (and the one after it grows)."""
        base = self._next
        self._next = min(self.ceiling, base * self.factor)
        return base * random.uniform(1 - self.jitter, 1 + self.jitter)

    def reset(self) -> None:
        """Something changed: poll soon again."""
        self._next = self.first


class TooManyWaits(Exception):
    """A client already holds as many waits as it may (`Waits.cap`)."""


class Waits:
    """The waits each client (principal) holds at once, at most `cap` each."""

    def __init__(self, cap: int) -> None:
        if cap < 1:
            raise ValueError(f"a cap of waits must be at least 1, not {cap}")
        self.cap = cap
        self._held: Counter[str] = Counter()

    def held(self, principal: str) -> int:
        return self._held[principal]

    @contextlib.contextmanager
    def hold(self, principal: str) -> Iterator[None]:
        """One wait of `principal` for the block; `TooManyWaits` when it holds `cap` already."""
        if self._held[principal] >= self.cap:
            raise TooManyWaits(f"already waits on {self.cap} escalations for you (its limit)")
        self._held[principal] += 1
        try:
            yield
        finally:
            self._held[principal] -= 1
            if self._held[principal] <= 0:
                del self._held[principal]


def _waiting(state: TaskState) -> bool:
    return state is TaskState.INPUT_REQUIRED


def _seen(status: TaskStatus) -> tuple[TaskState, str | None, str]:
    text = status.message.text if status.message is not None else ""
    return status.state, status.timestamp, text


async def streams(client: AgentClient, url: str) -> bool:
    """Whether the agent at `url` offers streaming (its card's capabilities.streaming)."""
    try:
        card = await client.card(url)
    except (UnavailableError, CircuitOpenError, RemoteError, ValueError):
        return False
    return bool(card.capabilities.streaming)


async def until_answered(
    client: AgentClient, url: str, task_id: str, backoff: Backoff | None = None
) -> Task:
    """The task at `url` once it no longer waits for input: followed by subscription where
    the agent streams, else (or once the subscription fails) polled with `backoff`."""
    if await streams(client, url):
        with contextlib.suppress(UnavailableError, CircuitOpenError, RemoteError):
            if await _by_subscription(client, url, task_id):
                return await client.get_task(url, task_id, history_length=0)
    return await _by_polling(client, url, task_id, backoff or Backoff())


async def _by_subscription(client: AgentClient, url: str, task_id: str) -> bool:
    """Follow the task's stream until it moves on (True), or the stream ends first (False)."""
    stream = client.subscribe(url, task_id)
    try:
        async for _, item in stream:
            status = item.task.status if item.task is not None else None
            if item.status_update is not None:
                status = item.status_update.status
            if status is not None and not _waiting(status.state):
                return True
        return False
    finally:
        aclose = getattr(stream, "aclose", None)  # a generator: close its HTTP stream now
        if aclose is not None:
            await aclose()


async def _by_polling(client: AgentClient, url: str, task_id: str, backoff: Backoff) -> Task:
    last: tuple[TaskState, str | None, str] | None = None
    while True:
        await asyncio.sleep(backoff.delay())
        task = await client.get_task(url, task_id, history_length=0)
        if not _waiting(task.status.state):
            return task
        seen = _seen(task.status)
        if last is not None and seen != last:
            backoff.reset()  # an operator's note, say: the answer may be near
        last = seen
