"""The PostgreSQL store's push-notification configs and their delivery progress.

One row per config (`push_configs`, made by the schema's migration 1 → 2), keyed by task and config;
the partial index `push_configs_active` lists the configs with deliveries left, what a
start-up sweep reads.
"""

from __future__ import annotations

from typing import Any

from a2a_handoff.stores._postgres_ledger import PostgresBase, guarded
from a2a_handoff.stores.base import PushConfigRecord

_COLUMNS = (
    "task_id, config_id, config, cursor, failing_since, history, done, created_at, updated_at"
)


def _record(row: Any) -> PushConfigRecord:
    return PushConfigRecord(*row)


class PostgresPush(PostgresBase):
    """Push configs (`stores.base.PushStore`) in PostgreSQL."""

    @guarded
    async def put_push_config(self, record: PushConfigRecord) -> PushConfigRecord:
        r = record
        async with self._conn() as conn:
            row = await conn.fetchrow(
                f"INSERT INTO {self.s}.push_configs AS p ({_COLUMNS})"
                " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)"
                " ON CONFLICT (task_id, config_id) DO UPDATE SET config = excluded.config,"
                f" updated_at = excluded.updated_at RETURNING {_COLUMNS}",
                r.task_id,
                r.config_id,
                r.config,
                r.cursor,
                r.failing_since,
                r.history,
                r.done,
                r.created_at,
                r.updated_at,
            )
        return _record(row)

    @guarded
    async def push_configs(
        self, task_id: str, config_id: str | None = None
    ) -> list[PushConfigRecord]:
        sql = f"SELECT {_COLUMNS} FROM {self.s}.push_configs WHERE task_id = $1"
        params: list[Any] = [task_id]
        if config_id is not None:
            sql += " AND config_id = $2"
            params.append(config_id)
        async with self._conn() as conn:
            rows = await conn.fetch(sql + " ORDER BY created_at, config_id", *params)
        return [_record(row) for row in rows]

    @guarded
    async def delete_push_config(self, task_id: str, config_id: str) -> None:
        async with self._conn() as conn:
            await conn.execute(
                f"DELETE FROM {self.s}.push_configs WHERE task_id = $1 AND config_id = $2",
                task_id,
                config_id,
            )

    @guarded
    async def save_push_progress(self, record: PushConfigRecord) -> bool:
        r = record
        async with self._conn() as conn:
            status = await conn.execute(
                f"UPDATE {self.s}.push_configs SET cursor = $1, failing_since = $2,"
                " history = $3, done = $4, updated_at = $5 WHERE task_id = $6 AND config_id = $7",
                r.cursor,
                r.failing_since,
                r.history,
                r.done,
                r.updated_at,
                r.task_id,
                r.config_id,
            )
        return bool(status == "UPDATE 1")

    @guarded
    async def active_push_configs(self) -> list[PushConfigRecord]:
        async with self._conn() as conn:
            rows = await conn.fetch(f"SELECT {_COLUMNS} FROM {self.s}.push_configs WHERE NOT done")
        return [_record(row) for row in rows]

    @guarded
    async def active_push_count(self, principal: str) -> int:
        # An owner is the principal itself, or "\x1f<tenant>\x1f<principal>".
        async with self._conn() as conn:
            count = await conn.fetchval(
                f"SELECT count(*) FROM {self.s}.push_configs AS p JOIN {self.s}.tasks AS t"
                " ON t.id = p.task_id WHERE NOT p.done AND CASE"
                " WHEN left(t.owner, 1) = chr(31)"
                " THEN substr(t.owner, strpos(substr(t.owner, 2), chr(31)) + 2) = $1"
                " ELSE t.owner = $1 END",
                principal,
            )
        return int(count)
