"""The SQLite store's outbox and ledger: handoffs sent and received, and what /health reads.

A commit's outbox and ledger rows are written in its task's transaction (`ledger_writes`,
run by `SqliteTaskStore.commit`). Ledger pages go by rowid, and /health's figures come from
one index (`outbox_by_status_time`): every read here is O(log n + rows returned), whatever
the ledger's size.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Any

from a2a_handoff.errors import ConflictError
from a2a_handoff.stores._sqlite_file import SqliteFile
from a2a_handoff.stores._sqlite_schema import (
    INSERT_OUTBOX,
    INSERT_RECEIVED,
    OUTBOX_COLUMNS,
    RECEIVED_COLUMNS,
    row_of,
)
from a2a_handoff.stores.base import Commit, HandoffStats, OutboxEntry, ReceivedEntry

_CLOSE_ENTRY = (
    "UPDATE outbox SET status = ?, detail = ?, updated_at = ?"
    " WHERE handoff_id = ? AND status = 'pending'"
)


def ledger_writes(unit: Commit) -> Callable[[sqlite3.Connection], None] | None:
    """The outbox and ledger part of a commit — the entry it closes, the one it adds, the
    handoff received — as statements run in the commit's transaction (None: it has none).
    ConflictError, so that nothing of the commit is written, when the entry to close is no
    longer pending or the one to add exists."""
    close, entry, received = unit.close, unit.outbox, unit.received
    if close is None and entry is None and received is None:
        return None
    closing = (
        (close.status, close.detail, unit.record.updated_at, close.handoff_id) if close else ()
    )
    entry_row = row_of(entry) if entry is not None else None
    received_row = row_of(received) if received is not None else None

    def write(conn: sqlite3.Connection) -> None:
        if close is not None and conn.execute(_CLOSE_ENTRY, closing).rowcount != 1:
            raise ConflictError(f"handoff {close.handoff_id} is not pending")
        if entry_row is not None:
            try:
                conn.execute(INSERT_OUTBOX, entry_row)
            except sqlite3.IntegrityError as exc:
                raise ConflictError(f"handoff {entry_row[0]} already checkpointed") from exc
        if received_row is not None:
            conn.execute(INSERT_RECEIVED, received_row)

    return write


class SqliteLedger(SqliteFile):
    """The outbox (handoffs sent) and the ledger of handoffs received, in the file."""

    async def outbox(
        self, *, status: str | None = None, context_id: str | None = None
    ) -> list[OutboxEntry]:
        where, params = ["1"], []
        if status is not None:
            where.append("status = ?")
            params.append(status)
        if context_id is not None:
            where.append("context_id = ?")
            params.append(context_id)
        rows = await self._read(
            f"SELECT {OUTBOX_COLUMNS} FROM outbox WHERE {' AND '.join(where)}"
            " ORDER BY created_at, handoff_id",
            params,
        )
        return [OutboxEntry(*row) for row in rows]

    async def record_received(self, entry: ReceivedEntry) -> None:
        row = row_of(entry)

        def insert(conn: sqlite3.Connection) -> None:
            conn.execute(INSERT_RECEIVED, row)

        await self._submit(insert)

    async def received(self, context_id: str | None = None) -> list[ReceivedEntry]:
        where, params = ("context_id = ?", [context_id]) if context_id is not None else ("1", [])
        rows = await self._read(
            f"SELECT {RECEIVED_COLUMNS} FROM received WHERE {where} ORDER BY seq", params
        )
        return [ReceivedEntry(*row) for row in rows]

    async def sent_page(
        self, *, owner: str | None, context_id: str | None, after: str, limit: int
    ) -> tuple[list[OutboxEntry], str]:
        filters = {"owner": owner, "context_id": context_id}
        rows, token = await self._page("outbox", "rowid", OUTBOX_COLUMNS, filters, after, limit)
        return [OutboxEntry(*row) for row in rows], token

    async def received_page(
        self, *, context_id: str | None, after: str, limit: int
    ) -> tuple[list[ReceivedEntry], str]:
        filters = {"context_id": context_id}
        rows, token = await self._page("received", "seq", RECEIVED_COLUMNS, filters, after, limit)
        return [ReceivedEntry(*row) for row in rows], token

    async def _page(
        self,
        table: str,
        key: str,
        columns: str,
        filters: dict[str, str | None],
        after: str,
        limit: int,
    ) -> tuple[list[Any], str]:
        """One page of a ledger table in `key` order, after the token `after` (a key value);
        the token of the next page is "" on the last one. Filters set to None are left out."""
        where = [f"{key} > ?"]
        params: list[Any] = [int(after) if after.isdigit() else 0]
        for column, value in filters.items():
            if value is not None:
                where.append(f"{column} = ?")
                params.append(value)
        rows = await self._read(
            f"SELECT {key}, {columns} FROM {table} WHERE {' AND '.join(where)}"
            f" ORDER BY {key} LIMIT ?",
            [*params, limit + 1],
        )
        token = str(rows[limit - 1][0]) if len(rows) > limit else ""
        return [row[1:] for row in rows[:limit]], token

    async def handoff_stats(self, stale_before: str) -> HandoffStats:
        # Pending entries keep updated_at == created_at: one index answers every question.
        rows = await self._read(
            "SELECT (SELECT COUNT(*) FROM outbox WHERE status = 'pending'),"
            " (SELECT COUNT(*) FROM outbox WHERE status = 'pending' AND updated_at < ?),"
            " (SELECT MIN(updated_at) FROM outbox WHERE status = 'pending'),"
            " (SELECT MAX(updated_at) FROM outbox WHERE status = 'done')",
            (stale_before,),
        )
        pending, stale, oldest, last_done = rows[0]
        return HandoffStats(int(pending), int(stale), oldest, last_done)
