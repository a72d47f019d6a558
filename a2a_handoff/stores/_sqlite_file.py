"""The SQLite store's file: its connections, its writer, its owner, and its leases when shared.

`SqliteFile` holds what every part of the store uses: the owner lock (`stores._sqlite_owner`),
the writer (`stores._sqlite_writer`), the connections point reads and multi-row reads run on,
and the one check-and-set step every task write is (`_update`). Point reads (a task, a dedupe
key) run synchronously — on the writer connection while it is idle, outside a batch, since it
holds every page it wrote (a separate reader drops its page cache whenever the file changes:
~16 µs instead of ~4 per read right after a write); on a WAL reader connection while a
batch's COMMIT runs in the fsync thread. Either way they see exactly what is committed.
Multi-row reads go to aiosqlite WAL reader connections and never block the loop.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Sequence
from functools import partial
from itertools import count
from pathlib import Path
from typing import Any, cast

import aiosqlite

from a2a_handoff.errors import ConflictError, StoreError
from a2a_handoff.protocol.models import StreamResponse
from a2a_handoff.secrets import create_private, private_dir
from a2a_handoff.stores._event_log import log_json
from a2a_handoff.stores._hub import EventHub
from a2a_handoff.stores._sqlite_owner import OwnerLock
from a2a_handoff.stores._sqlite_schema import MIGRATIONS, apply, pragmas, read_version
from a2a_handoff.stores._sqlite_writer import GroupCommit, Publish
from a2a_handoff.stores.base import TaskEvent, TaskRecord
from a2a_handoff.stores.leasing import LocalLeases
from a2a_handoff.stores.versions import SchemaStatus, check_usable, status_of


class SqliteFile(LocalLeases):
    """One SQLite file opened for a store (see the module docstring)."""

    def __init__(self, path: str | Path, *, readers: int = 2, shared: bool = False) -> None:
        super().__init__()
        self.path = Path(path)
        self.shared = shared  # several processes on the file: leases live in it
        self._reader_count = readers
        self._writer: GroupCommit | None = None
        self._conn: sqlite3.Connection | None = None
        self._point_reader: sqlite3.Connection | None = None
        self._readers: list[aiosqlite.Connection] = []
        self._next_reader = count()
        self._owner = OwnerLock(self.path)
        self._hub = EventHub()

    @property
    def batches(self) -> int:
        return self._writer.batches if self._writer is not None else 0

    # -- lifecycle ------------------------------------------------------------------------

    def check_free(self) -> None:
        """Raise StoreError naming the process that serves the file, if one does (unless
        shared); what `open()` would refuse, said before a server starts."""
        if not self.shared and self._writer is None:
            self._owner.acquire()
            self._owner.release()

    async def open(self) -> SqliteFile:
        """Take the file (unless shared), create the schema and start the writer; idempotent."""
        if self._writer is not None:
            return self
        private_dir(self.path.parent)
        create_private(self.path)  # 0600: every conversation is in it (WAL, SHM follow it)
        if not self.shared:
            self._owner.acquire()
        try:
            conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        except sqlite3.Error as exc:
            self._owner.release()
            raise StoreError(f"cannot open {self.path}: {exc}") from exc
        self._conn = conn
        try:
            self._prepare(conn)
            self._point_reader = sqlite3.connect(self.path, isolation_level=None)
            self._point_reader.execute("PRAGMA query_only=1")
            self._point_reader.execute("PRAGMA cache_size=-16384")
            for _ in range(self._reader_count):
                reader = await aiosqlite.connect(self.path, isolation_level=None)
                self._readers.append(reader)
                await reader.execute("PRAGMA busy_timeout=5000")
                await reader.execute("PRAGMA query_only=1")
        except BaseException:
            await self.aclose()
            raise
        self._writer = GroupCommit(conn)
        return self

    @property
    def store_url(self) -> str:
        """The store's URL, as `open_store` takes it."""
        return f"sqlite:///{self.path}" + ("?shared=1" if self.shared else "")

    @property
    def where(self) -> str:
        return f"SQLite file {self.path}"

    def _prepare(self, conn: sqlite3.Connection) -> None:
        """Pragmas; a new file made at this code's version; one behind (or ahead, and not
        compatible) refused: StoreVersionError naming the command that upgrades it."""
        pragmas(conn)
        version, kept, exists = read_version(conn)
        if not exists:
            apply(conn)
            return
        check_usable(status_of(self.where, MIGRATIONS, version, kept), self.store_url)

    # -- SchemaStore --------------------------------------------------------------------

    async def schema_status(self) -> SchemaStatus:
        if not self.path.exists():
            return status_of(self.where, MIGRATIONS, 0, None, exists=False)
        try:
            conn = sqlite3.connect(f"{self.path.resolve().as_uri()}?mode=ro", uri=True)
            try:
                version, kept, exists = read_version(conn)
            finally:
                conn.close()
        except sqlite3.Error as exc:
            raise StoreError(f"cannot read {self.path}: {exc}") from exc
        return status_of(self.where, MIGRATIONS, version, kept, exists=exists)

    async def upgrade(self) -> SchemaStatus:
        """The pending migrations run on the file, by this process alone: refused (StoreError)
        while another serves it, unless it is shared. A file that does not exist is left so
        (its agent makes it, with its keys)."""
        status = await self.schema_status()
        if status.ahead:
            check_usable(status, self.store_url)
            return status
        if not status.pending:
            return status
        own = self._writer is None and not self.shared
        if own:
            self._owner.acquire()
        try:
            conn = sqlite3.connect(self.path, isolation_level=None)
            try:
                pragmas(conn)
                apply(conn)
            finally:
                conn.close()
        except sqlite3.Error as exc:
            raise StoreError(f"cannot upgrade {self.path}: {exc}") from exc
        finally:
            if own:
                self._owner.release()
        return await self.schema_status()

    async def aclose(self) -> None:
        if self._writer is not None:
            await self._writer.aclose()
            self._writer = None
        for reader in self._readers:
            await reader.close()
        self._readers.clear()
        if self._point_reader is not None:
            self._point_reader.close()
            self._point_reader = None
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        self._owner.release()

    async def __aenter__(self) -> SqliteFile:
        return await self.open()

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # -- plumbing ---------------------------------------------------------------------------

    async def _submit(
        self, apply: Callable[[sqlite3.Connection], Any], publish: Publish | None = None
    ) -> Any:
        if self._writer is None:
            raise StoreError("the store is not open")
        return await self._writer.submit(apply, publish)

    async def _read(self, sql: str, params: Sequence[Any]) -> list[Any]:
        if not self._readers:
            raise StoreError("the store is not open")
        reader = self._readers[next(self._next_reader) % len(self._readers)]
        try:
            rows = await reader.execute_fetchall(sql, params)
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"the SQLite store could not be read: {exc}") from exc
        return list(rows)

    def _point(self, sql: str, params: Sequence[Any]) -> Any:
        """One row by key, read synchronously (see the module docstring)."""
        writer = self._writer
        if writer is None or self._point_reader is None:
            raise StoreError("the store is not open")
        conn = self._point_reader if writer.committing else writer.conn
        try:
            return conn.execute(sql, params).fetchone()
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"the SQLite store could not be read: {exc}") from exc

    async def _update(
        self,
        record: TaskRecord,
        events: Sequence[StreamResponse],
        expected_version: int,
        also: Callable[[sqlite3.Connection], None] | None = None,
    ) -> None:
        """Check-and-set the task and append its events; `also` runs in the same transaction.
        (`records.Commit` checked the version arithmetic.)"""
        logged = [
            TaskEvent(seq, item) for seq, item in enumerate(events, start=expected_version + 1)
        ]
        task = record.task
        params = (
            task.status.state.value,
            record.version,
            record.updated_at,
            record.task_json(),
            task.status.timestamp or "",
            record.id,
            expected_version,
        )
        event_rows = [(record.id, e.seq, log_json(e.item, record.task)) for e in logged]

        def apply(conn: sqlite3.Connection) -> None:
            cursor = conn.execute(
                "UPDATE tasks SET state = ?, version = ?, updated_at = ?, body = ?,"
                " status_at = ? WHERE id = ? AND version = ?",
                params,
            )
            if cursor.rowcount != 1:
                raise ConflictError(f"task {record.id} changed since version {expected_version}")
            conn.executemany("INSERT INTO task_events VALUES (?, ?, ?)", event_rows)
            if also is not None:
                also(conn)

        await self._submit(apply, partial(self._hub.publish, record.id, logged))

    async def ping(self) -> bool:
        try:
            rows = await self._read("SELECT 1", ())
        except (sqlite3.Error, StoreError, ValueError):
            return False
        return rows == [(1,)]

    async def problem(self) -> str | None:
        if not await self.ping():
            return "unreachable: the SQLite file cannot be read"
        failure = self._writer.failure if self._writer is not None else "the store is closed"
        return f"failing writes: {failure}" if failure else None

    # -- LeaseStore (in the file only when it is shared) ----------------------------------

    async def acquire(self, name: str, holder: str, ttl: float) -> bool:
        if not self.shared:
            return await super().acquire(name, holder, ttl)

        def take(conn: sqlite3.Connection) -> bool:
            now = time.time()
            return bool(
                conn.execute(
                    "INSERT INTO leases (name, holder, expires) VALUES (?, ?, ?)"
                    " ON CONFLICT (name) DO UPDATE SET holder = excluded.holder,"
                    " expires = excluded.expires"
                    " WHERE leases.holder = excluded.holder OR leases.expires <= ?",
                    (name, holder, now + ttl, now),
                ).rowcount
            )

        return cast(bool, await self._submit(take))

    async def release(self, name: str, holder: str) -> None:
        if not self.shared:
            return await super().release(name, holder)

        def drop(conn: sqlite3.Connection) -> None:
            conn.execute("DELETE FROM leases WHERE name = ? AND holder = ?", (name, holder))

        await self._submit(drop)
        return None

    async def holder(self, name: str) -> str | None:
        if not self.shared:
            return await super().holder(name)
        row = self._point(
            "SELECT holder FROM leases WHERE name = ? AND expires > ?", (name, time.time())
        )
        return cast(str, row[0]) if row else None
