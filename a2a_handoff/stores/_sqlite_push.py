"""The SQLite store's push-notification configs and their delivery progress.

A config row keeps a cursor into its task's event log (the push outbox: events commit with
the state they report); the partial index `push_configs_active` lists the configs with
deliveries left, so a start-up sweep reads only those.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from a2a_handoff.stores._sqlite_file import SqliteFile
from a2a_handoff.stores.base import PushConfigRecord

_COLUMNS = (
    "task_id, config_id, config, cursor, failing_since, history, done, created_at, updated_at"
)


def _push_record(row: Any) -> PushConfigRecord:
    task_id, config_id, config, cursor, failing, history, done, created, updated = row
    return PushConfigRecord(
        task_id, config_id, config, int(cursor), failing, history, bool(done), created, updated
    )


class SqlitePush(SqliteFile):
    """Push configs (`stores.base.PushStore`) in the file."""

    async def put_push_config(self, record: PushConfigRecord) -> PushConfigRecord:
        r = record
        row = (
            r.task_id,
            r.config_id,
            r.config,
            r.cursor,
            r.failing_since,
            r.history,
            int(r.done),
            r.created_at,
            r.updated_at,
        )

        def put(conn: sqlite3.Connection) -> None:
            conn.execute(
                f"INSERT INTO push_configs ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (task_id, config_id) DO UPDATE SET config = excluded.config,"
                " updated_at = excluded.updated_at",
                row,
            )

        await self._submit(put)
        (stored,) = await self.push_configs(record.task_id, record.config_id)
        return stored

    async def push_configs(
        self, task_id: str, config_id: str | None = None
    ) -> list[PushConfigRecord]:
        sql = f"SELECT {_COLUMNS} FROM push_configs WHERE task_id = ?"
        params: list[Any] = [task_id]
        if config_id is not None:
            sql += " AND config_id = ?"
            params.append(config_id)
        rows = await self._read(sql + " ORDER BY created_at, config_id", params)
        return [_push_record(row) for row in rows]

    async def delete_push_config(self, task_id: str, config_id: str) -> None:
        def delete(conn: sqlite3.Connection) -> None:
            conn.execute(
                "DELETE FROM push_configs WHERE task_id = ? AND config_id = ?",
                (task_id, config_id),
            )

        await self._submit(delete)

    async def save_push_progress(self, record: PushConfigRecord) -> bool:
        r = record
        params = (
            r.cursor,
            r.failing_since,
            r.history,
            int(r.done),
            r.updated_at,
            r.task_id,
            r.config_id,
        )

        def save(conn: sqlite3.Connection) -> bool:
            return (
                conn.execute(
                    "UPDATE push_configs SET cursor = ?, failing_since = ?, history = ?, done = ?,"
                    " updated_at = ? WHERE task_id = ? AND config_id = ?",
                    params,
                ).rowcount
                == 1
            )

        return bool(await self._submit(save))

    async def active_push_configs(self) -> list[PushConfigRecord]:
        rows = await self._read(
            f"SELECT {_COLUMNS} FROM push_configs INDEXED BY push_configs_active WHERE done = 0",
            (),
        )
        return [_push_record(row) for row in rows]

    async def active_push_count(self, principal: str) -> int:
        # An owner is the principal itself, or "\x1f<tenant>\x1f<principal>".
        rows = await self._read(
            "SELECT count(*) FROM push_configs AS p INDEXED BY push_configs_active"
            " JOIN tasks AS t ON t.id = p.task_id WHERE p.done = 0 AND CASE"
            " WHEN substr(t.owner, 1, 1) = char(31)"
            " THEN substr(t.owner, instr(substr(t.owner, 2), char(31)) + 2) = ?"
            " ELSE t.owner = ? END",
            (principal, principal),
        )
        return int(rows[0][0])
