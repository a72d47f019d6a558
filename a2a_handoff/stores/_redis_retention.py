"""The Redis store's retention: finished tasks deleted once old enough (`RetentionStore`).

Redis keeps no index of tasks by time: the candidates are the members of the terminal
states' sets (`i:s:<state>`), scanned (SSCAN) and read in pipelined batches, so a sweep
costs a read of every finished task's three fields. Each one old enough is deleted by one
script (`PURGE`: atomic), which checks again that it has not changed, that its idempotency
key (`dk`, kept in the task's hash) no longer names it and that none of its handoffs is
pending, then deletes it, its events, push configs, outbox entries and ledger rows. The ledger rows
of handoffs that made no task (refused) go once old, from the head of the ledger's list
(`PURGE_RECEIVED`).
A task written before its key was kept in its hash is kept until the store's
`idempotency_ttl` after its creation: its key may live that long.
"""

from __future__ import annotations

import time
from typing import Any

from a2a_handoff.protocol.models import utc_stamp
from a2a_handoff.protocol.states import TERMINAL_STATES
from a2a_handoff.stores._redis_ledger import guarded
from a2a_handoff.stores._redis_push import RedisPush

_FINISHED = sorted(state.value for state in TERMINAL_STATES)
_SCAN = 200  # members asked for per SSCAN
_LOOKED_AT = 1000  # ledger rows looked at per call, from the oldest


class RedisRetention(RedisPush):
    """`purge_finished` on Redis (module docstring)."""

    idempotency_ttl: float

    @guarded
    async def purge_finished(self, before: str, limit: int) -> int:
        # An older task's key may live `idempotency_ttl` after its creation.
        unkeyed_before = utc_stamp(time.time() - self.idempotency_ttl)
        purged = 0
        for state in _FINISHED:
            members = self._key(f"i:s:{state}")
            cursor = 0
            while purged < limit:
                cursor, ids = await self._redis.sscan(members, cursor, count=_SCAN)
                purged += await self._purge_some(ids, state, before, unkeyed_before, limit - purged)
                if cursor == 0:
                    break
        if purged < limit:  # ledger rows of handoffs that made no task, as old
            rows = await self._scripts["purge_received"](
                keys=[self._key("rcv")], args=[before, self.prefix, limit - purged, _LOOKED_AT]
            )
            purged += int(rows)
        return purged

    async def _purge_some(
        self, ids: list[str], state: str, before: str, unkeyed_before: str, limit: int
    ) -> int:
        if not ids:
            return 0
        async with self._redis.pipeline(transaction=False) as pipe:
            for task_id in ids:
                pipe.hmget(self._key(f"t:{task_id}"), "updated", "created", "dk", "context")
                pipe.hmget(self._key(f"t:{task_id}"), "owner", "delegate")
            rows = await pipe.execute()
        purged = 0
        for index, task_id in enumerate(ids):
            if purged >= limit:
                break
            updated, created, dedupe, context = rows[2 * index]
            owner, delegate = rows[2 * index + 1]
            if updated is None or updated >= before:
                continue
            if dedupe is None and created >= unkeyed_before:
                continue
            purged += await self._purge_one(
                task_id, state, before, dedupe or "", context, owner, delegate or ""
            )
        return purged

    async def _purge_one(
        self,
        task_id: str,
        state: str,
        before: str,
        dedupe: str,
        context: str,
        owner: str,
        delegate: str,
    ) -> int:
        keys: list[Any] = [
            self._key(f"t:{task_id}"),
            self._key(f"ev:{task_id}"),
            self._key(f"p:{task_id}"),
            self._key("p:active"),
            self._key("i:all"),
            self._key(f"i:o:{owner}"),
            self._key(f"i:d:{delegate}") if delegate else "",
            self._key(f"i:c:{context}"),
            self._key(f"i:s:{state}"),
            self._key(f"ob:c:{context}"),
            self._key("ob:ids"),
            self._key("rcv"),
            self._key(f"rcv:c:{context}"),
            dedupe,
        ]
        done = await self._scripts["purge"](keys=keys, args=[task_id, before, self.prefix])
        return int(done)
