"""The PostgreSQL store's outbox and ledger, and its leases.

Leases are rows of `leases`, taken or renewed by ONE upsert that succeeds only for the holder
or once the lease expired — in the database's time, so replicas' clocks are never compared.
Every question /health and ListHandoffs ask is answered from an index: no read scans the
ledger. The connections are `stores._postgres_connections`'s, opened by `stores._postgres_pool`.
"""

from __future__ import annotations

from typing import Any

from a2a_handoff.stores._postgres_connections import guarded
from a2a_handoff.stores._postgres_pool import PostgresPool
from a2a_handoff.stores._postgres_schema import OUTBOX_COLUMNS, RECEIVED_COLUMNS
from a2a_handoff.stores.base import HandoffStats, OutboxEntry, ReceivedEntry

__all__ = ["PostgresBase", "guarded"]


class PostgresBase(PostgresPool):
    """The outbox, the ledger and the leases, on the pool (module docstring)."""

    # -- outbox and ledger ----------------------------------------------------------------

    @guarded
    async def outbox(
        self, *, status: str | None = None, context_id: str | None = None
    ) -> list[OutboxEntry]:
        where, params = ["true"], []
        if status is not None:
            params.append(status)
            where.append(f"status = ${len(params)}")
        if context_id is not None:
            params.append(context_id)
            where.append(f"context_id = ${len(params)}")
        async with self._conn() as conn:
            rows = await conn.fetch(
                f"SELECT {', '.join(OUTBOX_COLUMNS)} FROM {self.s}.outbox"
                f" WHERE {' AND '.join(where)} ORDER BY created_at, handoff_id",
                *params,
            )
        return [OutboxEntry(*row) for row in rows]

    @guarded
    async def record_received(self, entry: ReceivedEntry) -> None:
        values = ", ".join(f"${i}" for i in range(1, len(RECEIVED_COLUMNS) + 1))
        async with self._conn() as conn:
            await conn.execute(
                f"INSERT INTO {self.s}.received ({', '.join(RECEIVED_COLUMNS)}) VALUES ({values})",
                *(getattr(entry, name) for name in RECEIVED_COLUMNS),
            )

    @guarded
    async def received(self, context_id: str | None = None) -> list[ReceivedEntry]:
        where, params = (
            ("context_id = $1", [context_id]) if context_id is not None else ("true", [])
        )
        async with self._conn() as conn:
            rows = await conn.fetch(
                f"SELECT {', '.join(RECEIVED_COLUMNS)} FROM {self.s}.received"
                f" WHERE {where} ORDER BY seq",
                *params,
            )
        return [ReceivedEntry(*row) for row in rows]

    @guarded
    async def sent_page(
        self, *, owner: str | None, context_id: str | None, after: str, limit: int
    ) -> tuple[list[OutboxEntry], str]:
        rows, token = await self._page(
            "outbox", OUTBOX_COLUMNS, {"owner": owner, "context_id": context_id}, after, limit
        )
        return [OutboxEntry(*row) for row in rows], token

    @guarded
    async def received_page(
        self, *, context_id: str | None, after: str, limit: int
    ) -> tuple[list[ReceivedEntry], str]:
        filters = {"context_id": context_id}
        rows, token = await self._page("received", RECEIVED_COLUMNS, filters, after, limit)
        return [ReceivedEntry(*row) for row in rows], token

    async def _page(
        self,
        table: str,
        columns: tuple[str, ...],
        filters: dict[str, str | None],
        after: str,
        limit: int,
    ) -> tuple[list[Any], str]:
        """One page of a ledger table in insertion (`seq`) order after the token `after`."""
        params: list[Any] = [int(after) if after.isdigit() else 0]
        where = ["seq > $1"]
        for column, value in filters.items():
            if value is not None:
                params.append(value)
                where.append(f"{column} = ${len(params)}")
        params.append(limit + 1)
        async with self._conn() as conn:
            rows = await conn.fetch(
                f"SELECT seq, {', '.join(columns)} FROM {self.s}.{table}"
                f" WHERE {' AND '.join(where)} ORDER BY seq LIMIT ${len(params)}",
                *params,
            )
        token = str(rows[limit - 1][0]) if len(rows) > limit else ""
        return [tuple(row)[1:] for row in rows[:limit]], token

    @guarded
    async def handoff_stats(self, stale_before: str) -> HandoffStats:
        # Two partial indexes answer it: pending entries by creation, done ones by update.
        s = self.s
        async with self._conn() as conn:
            row = await conn.fetchrow(
                f"SELECT (SELECT count(*) FROM {s}.outbox WHERE status = 'pending'),"
                f" (SELECT count(*) FROM {s}.outbox WHERE status = 'pending'"
                "   AND created_at < $1),"
                f" (SELECT min(created_at) FROM {s}.outbox WHERE status = 'pending'),"
                f" (SELECT max(updated_at) FROM {s}.outbox WHERE status = 'done')",
                stale_before,
            )
        pending, stale, oldest, last_done = row
        return HandoffStats(int(pending), int(stale), oldest, last_done)

    # -- leases -----------------------------------------------------------------------------

    @guarded
    async def acquire(self, name: str, holder: str, ttl: float) -> bool:
        async with self._conn() as conn:
            status = await conn.execute(
                f"INSERT INTO {self.s}.leases AS l (name, holder, expires)"
                " VALUES ($1, $2, clock_timestamp() + make_interval(secs => $3))"
                " ON CONFLICT (name) DO UPDATE SET holder = excluded.holder,"
                " expires = excluded.expires"
                " WHERE l.holder = excluded.holder OR l.expires <= clock_timestamp()",
                name,
                holder,
                float(ttl),
            )
        return bool(status == "INSERT 0 1")

    @guarded
    async def release(self, name: str, holder: str) -> None:
        async with self._conn() as conn:
            await conn.execute(
                f"DELETE FROM {self.s}.leases WHERE name = $1 AND holder = $2", name, holder
            )

    @guarded
    async def holder(self, name: str) -> str | None:
        async with self._conn() as conn:
            found = await conn.fetchval(
                f"SELECT holder FROM {self.s}.leases"
                " WHERE name = $1 AND expires > clock_timestamp()",
                name,
            )
        return str(found) if found is not None else None
