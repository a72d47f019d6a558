"""Following a task's events on PostgreSQL, from any replica: LISTEN/NOTIFY.

Every write's function calls `pg_notify(<channel>, <task id>)`, which PostgreSQL delivers at
commit to every session listening on the channel. Each process keeps ONE connection of its
own (outside the pool) listening, and wakes the followers of the task named; a follower then
reads the committed events (`task_events`, by seq). A notification is only a hint — the
table is the truth, and a follower also re-reads after a quiet second — so a notification
lost while the listening connection is being replaced (PostgreSQL restarting) delays a
stream, never loses an event. The follow loop itself is the Redis store's
(`RedisFollowers.follow`); only the wake-up differs.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from a2a_handoff.stores._redis_follow import RedisFollowers

log = logging.getLogger("a2a_handoff.stores")
RECONNECT_SECONDS = 0.5


class PostgresFollowers(RedisFollowers):
    """This process's followers and the one LISTENing connection that wakes them."""

    def __init__(self, channel: str, connect: Any) -> None:
        super().__init__(channel)
        self.channel = channel
        self._connect = connect  # () -> awaitable asyncpg connection
        self._conn: Any = None
        self._keeper: asyncio.Task[None] | None = None

    async def start(self, client: Any = None) -> None:
        await self._listen_on_new_connection()
        self._keeper = asyncio.create_task(self._keep_listening(), name="postgres-listen")

    async def _listen_on_new_connection(self) -> None:
        conn = await self._connect()
        try:
            await conn.add_listener(self.channel, self._notified)
        except BaseException:
            await conn.close()
            raise
        self._conn = conn

    def _notified(self, _conn: Any, _pid: int, _channel: str, task_id: str) -> None:
        for waiter in self._waiters.get(task_id, ()):
            waiter.set()

    def _wake_all(self) -> None:
        for waiters in self._waiters.values():
            for waiter in waiters:
                waiter.set()

    async def _keep_listening(self) -> None:
        """Replace the listening connection when it drops; wake every follower once it is
        back (what was committed meanwhile was not announced)."""
        while True:
            await asyncio.sleep(RECONNECT_SECONDS)
            if self._conn is not None and not self._conn.is_closed():
                continue
            self._conn = None
            try:
                await self._listen_on_new_connection()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.debug("postgres LISTEN connection: %s; retrying", exc)
                continue
            self._wake_all()

    async def aclose(self) -> None:
        if self._keeper is not None:
            self._keeper.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._keeper
            self._keeper = None
        if self._conn is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._conn.close(), 2)
            self._conn = None
