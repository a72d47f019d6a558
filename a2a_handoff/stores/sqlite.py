"""SQLite backend: the embedded default, one file per agent.

Durability must not cost throughput. One writer connection takes every write from a queue
and applies a whole batch in one transaction (`BEGIN IMMEDIATE`, WAL, `synchronous=FULL`):
group commit. A caller is resumed only after its batch committed, and each write runs in a
savepoint, so one failing write fails alone. Committed events are published to in-process
followers in commit order.

Where the work runs, measured (bench/): a batch's statements run on the event loop's own
thread (microseconds each: handing them to a writer thread, as aiosqlite does, cost more in
hand-offs and GIL contention than the statements themselves on a server given one core);
only the COMMIT of a batch of several writes — the fsync, which holds no GIL — is handed to a
dedicated thread, so the loop serves the next requests while the disk works, and they form
the next batch; a batch of one (no concurrency to overlap with) commits inline, which is
~0.3 ms faster per request at one connection. Point reads (a task, a dedupe key) run
synchronously: on the writer connection while it is idle — outside a batch, which only
spans an await while its COMMIT runs in the fsync thread — since it holds every page it
wrote (a separate reader drops its page cache whenever the file changes: ~16 µs instead of
~4 per read right after a write); on a WAL reader connection otherwise. Either way they
see exactly what is committed. Multi-row reads (ListTasks, event backlogs) go to aiosqlite
WAL reader connections and never block the loop.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import AsyncGenerator, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, fields
from itertools import count
from pathlib import Path
from typing import Any, cast

import aiosqlite

from a2a_handoff.errors import ConflictError, StoreError
from a2a_handoff.protocol.models import StreamResponse, Task
from a2a_handoff.stores._hub import EventHub, follow
from a2a_handoff.stores.base import (
    LocalLeases,
    OutboxEntry,
    ReceivedEntry,
    TaskEvent,
    TaskPage,
    TaskQuery,
    TaskRecord,
    check_create,
    check_update,
    decode_page_token,
    encode_page_token,
)
from a2a_handoff.trust.keys import KeyFile

SCHEMA = """
CREATE TABLE IF NOT EXISTS tasks (
    id          TEXT PRIMARY KEY,
    context_id  TEXT NOT NULL,
    owner       TEXT NOT NULL,
    delegate    TEXT NOT NULL DEFAULT '',
    state       TEXT NOT NULL,
    version     INTEGER NOT NULL,
    created_at  TEXT NOT NULL,
    updated_at  TEXT NOT NULL,
    body        TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS tasks_by_owner ON tasks (owner, updated_at, id);
CREATE INDEX IF NOT EXISTS tasks_by_context ON tasks (owner, context_id, updated_at, id);
CREATE INDEX IF NOT EXISTS tasks_by_delegate ON tasks (delegate, updated_at, id)
    WHERE delegate != '';
CREATE TABLE IF NOT EXISTS task_events (
    task_id  TEXT NOT NULL,
    seq      INTEGER NOT NULL,
    body     TEXT NOT NULL,
    PRIMARY KEY (task_id, seq)
);
CREATE TABLE IF NOT EXISTS outbox (
    handoff_id   TEXT PRIMARY KEY,
    task_id      TEXT NOT NULL,
    context_id   TEXT NOT NULL,
    owner        TEXT NOT NULL,
    target_name  TEXT NOT NULL,
    target_url   TEXT NOT NULL,
    envelope     TEXT NOT NULL,
    status       TEXT NOT NULL,
    detail       TEXT NOT NULL,
    created_at   TEXT NOT NULL,
    updated_at   TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS outbox_by_status ON outbox (status, created_at);
CREATE INDEX IF NOT EXISTS outbox_by_context ON outbox (context_id, created_at);
CREATE TABLE IF NOT EXISTS received (
    seq             INTEGER PRIMARY KEY,
    handoff_id      TEXT NOT NULL,
    idempotency_key TEXT NOT NULL,
    context_id      TEXT NOT NULL,
    source_agent    TEXT NOT NULL,
    source_task_id  TEXT NOT NULL,
    task_id         TEXT NOT NULL,
    outcome         TEXT NOT NULL,
    reason          TEXT NOT NULL,
    at              TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS received_by_context ON received (context_id, seq);
CREATE TABLE IF NOT EXISTS dedupe (
    key      TEXT PRIMARY KEY,
    task_id  TEXT NOT NULL,
    expires  REAL                -- unix time the key stops deduplicating; NULL: never
) WITHOUT ROWID;
"""

# Pages written per commit decide its cost (a write call each, and the fsync's length), so
# the schema keeps inserts at the right edge of every b-tree, where SQLite appends without
# rebalancing: indexes ascend in time (scanned backwards for newest-first pages; descending
# ones took every insert at their left edge: 3 extra pages a write), and events live in a
# rowid table (a WITHOUT ROWID row over ~1 KiB spills into overflow pages: a task snapshot
# event did). Files made before are migrated in place when opened (`_migrate`).
_OLD_LAYOUT = (
    "SELECT name FROM sqlite_master WHERE (type = 'index' AND name LIKE 'tasks_by_%'"
    " AND sql LIKE '%DESC%') OR (name = 'task_events' AND sql LIKE '%WITHOUT ROWID%')"
)

_TASK_COLUMNS = "body, owner, version, created_at, updated_at, delegate"
_OUTBOX_COLUMNS = ", ".join(f.name for f in fields(OutboxEntry))
_RECEIVED_COLUMNS = ", ".join(f.name for f in fields(ReceivedEntry))
_INSERT_RECEIVED = (
    f"INSERT INTO received ({_RECEIVED_COLUMNS})"
    f" VALUES ({', '.join('?' * len(fields(ReceivedEntry)))})"
)


def _marks(row: Sequence[Any]) -> str:
    return ", ".join("?" * len(row))


Apply = Callable[[sqlite3.Connection], Any]


@dataclass(slots=True)
class _Write:
    apply: Apply
    publish: tuple[str, list[TaskEvent]] | None
    future: asyncio.Future[Any]


def _run_batch(conn: sqlite3.Connection, batch: list[_Write]) -> list[tuple[bool, Any]]:
    """Apply a batch in one open transaction, each write in its own savepoint.

    A batch of one needs no savepoint: its failure rolls the whole transaction back. The
    caller commits (see `_commit`).
    """
    outcomes: list[tuple[bool, Any]] = []
    conn.execute("BEGIN IMMEDIATE")
    try:
        if len(batch) == 1:
            try:
                outcomes.append((True, batch[0].apply(conn)))
            except Exception as exc:
                conn.execute("ROLLBACK")
                return [(False, exc)]
        else:
            for write in batch:
                conn.execute("SAVEPOINT w")
                try:
                    outcomes.append((True, write.apply(conn)))
                except Exception as exc:
                    conn.execute("ROLLBACK TO w")
                    outcomes.append((False, exc))
                conn.execute("RELEASE w")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return outcomes


def parse_sqlite_url(url: str) -> Path:
    """`sqlite:///relative/path` or `sqlite:////absolute/path` → the file's path."""
    if not url.startswith("sqlite:///"):
        raise StoreError(f"not a sqlite URL: {url!r} (expected sqlite:///PATH)")
    path = url[len("sqlite:///") :]
    if not path or path == ":memory:":
        raise StoreError("a SQLite store needs a file path; use memory:// for a throwaway store")
    return Path(path)


class SqliteTaskStore(LocalLeases):
    """Tasks and event logs in one SQLite file (WAL, group commit, durable)."""

    def __init__(self, path: str | Path, *, readers: int = 2) -> None:
        super().__init__()
        self.path = Path(path)
        self._reader_count = readers
        self._writer: sqlite3.Connection | None = None
        self._point_reader: sqlite3.Connection | None = None
        self._fsync: ThreadPoolExecutor | None = None
        self._readers: list[aiosqlite.Connection] = []
        self._next_reader = count()
        self._queue: list[_Write] = []
        self._committing = False  # a batch's transaction is open while its COMMIT runs
        self._wakeup = asyncio.Event()
        self._loop_task: asyncio.Task[None] | None = None
        self._closing = False
        self._hub = EventHub()
        self.batches = 0

    @classmethod
    def from_url(cls, url: str) -> SqliteTaskStore:
        return cls(parse_sqlite_url(url))

    # -- the agent's identity: a key file next to the database (mode 0600) -------------------

    @property
    def key_file(self) -> KeyFile:
        """`billing.db` keeps its agent's keys in `billing.keys.json`, beside it."""
        return KeyFile(self.path.with_name(self.path.stem + ".keys.json"))

    async def load_identity(self, agent: str) -> str | None:
        return self.key_file.read()

    async def save_identity(self, agent: str, document: str, expected: str | None) -> bool:
        return self.key_file.write_if(document, expected)

    # -- lifecycle ------------------------------------------------------------------------

    async def open(self) -> SqliteTaskStore:
        """Create the schema and start the writer; idempotent."""
        if self._writer is not None:
            return self
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            # Used by the loop's thread and, for COMMIT only, by the fsync thread — never both
            # at once: the write loop awaits each commit before the next batch.
            writer = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open {self.path}: {exc}") from exc
        self._writer = writer
        try:
            for pragma in (
                "PRAGMA journal_mode=WAL",
                "PRAGMA synchronous=FULL",
                "PRAGMA busy_timeout=5000",
                "PRAGMA cache_size=-65536",  # 64 MiB of pages: inserts stay in memory
                "PRAGMA mmap_size=268435456",  # reads through the page cache, not read()
            ):
                writer.execute(pragma)
            columns = writer.execute("PRAGMA table_info(tasks)").fetchall()
            if columns and "delegate" not in {column[1] for column in columns}:
                # A file from before task delegation: add the column in place.
                writer.execute("ALTER TABLE tasks ADD COLUMN delegate TEXT NOT NULL DEFAULT ''")
            writer.executescript(SCHEMA)
            dedupe = {c[1] for c in writer.execute("PRAGMA table_info(dedupe)").fetchall()}
            if "expires" not in dedupe:  # a file from before replay windows
                writer.execute("ALTER TABLE dedupe ADD COLUMN expires REAL")
            if _migrate(writer):
                writer.executescript(SCHEMA)  # the indexes it dropped, in their new layout
            self._point_reader = sqlite3.connect(self.path, isolation_level=None)
            self._point_reader.execute("PRAGMA query_only=1")
            self._point_reader.execute("PRAGMA cache_size=-16384")
            self._fsync = ThreadPoolExecutor(1, thread_name_prefix="sqlite-commit")
            for _ in range(self._reader_count):
                reader = await aiosqlite.connect(self.path, isolation_level=None)
                self._readers.append(reader)
                await reader.execute("PRAGMA busy_timeout=5000")
                await reader.execute("PRAGMA query_only=1")
        except BaseException:
            await self.aclose()
            raise
        self._loop_task = asyncio.create_task(self._write_loop(), name="sqlite-group-commit")
        return self

    async def aclose(self) -> None:
        self._closing = True
        self._wakeup.set()
        if self._loop_task is not None:
            await self._loop_task
            self._loop_task = None
        for reader in self._readers:
            await reader.close()
        self._readers.clear()
        if self._point_reader is not None:
            self._point_reader.close()
            self._point_reader = None
        if self._fsync is not None:
            self._fsync.shutdown(wait=True)
            self._fsync = None
        if self._writer is not None:
            self._writer.close()
        self._writer = None

    async def __aenter__(self) -> SqliteTaskStore:
        return await self.open()

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # -- the writer -----------------------------------------------------------------------

    async def _submit(
        self, apply: Apply, publish: tuple[str, list[TaskEvent]] | None = None
    ) -> Any:
        if self._writer is None or self._closing:
            raise StoreError("the store is not open")
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._queue.append(_Write(apply, publish, future))
        self._wakeup.set()
        return await future

    async def _write_loop(self) -> None:
        assert self._writer is not None
        writer = self._writer
        while True:
            await self._wakeup.wait()
            self._wakeup.clear()
            self.batches += 1
            batch, self._queue = self._queue, []
            if batch:
                await self._commit(writer, batch)
            if self._closing and not self._queue:
                return

    async def _commit(self, writer: sqlite3.Connection, batch: list[_Write]) -> None:
        try:
            outcomes = _run_batch(writer, batch)
            if writer.in_transaction:
                try:
                    if len(batch) == 1:  # nothing else is waiting: skip the hand-off
                        writer.execute("COMMIT")
                    else:
                        loop = asyncio.get_running_loop()
                        self._committing = True
                        try:
                            await loop.run_in_executor(self._fsync, writer.execute, "COMMIT")
                        finally:
                            self._committing = False
                except BaseException:
                    if writer.in_transaction:
                        writer.execute("ROLLBACK")
                    raise
        except Exception as exc:
            error = StoreError(f"commit failed: {exc}")
            for write in batch:
                if not write.future.done():
                    write.future.set_exception(error)
            return
        for write, (ok, value) in zip(batch, outcomes, strict=True):
            if ok and write.publish is not None:
                self._hub.publish(*write.publish)
            if write.future.done():  # the caller was cancelled; the write stands
                continue
            if ok:
                write.future.set_result(value)
            else:
                write.future.set_exception(value)

    async def _read(self, sql: str, params: Sequence[Any]) -> list[Any]:
        if not self._readers:
            raise StoreError("the store is not open")
        reader = self._readers[next(self._next_reader) % len(self._readers)]
        rows = await reader.execute_fetchall(sql, params)
        return list(rows)

    # -- TaskStore ------------------------------------------------------------------------

    async def create(
        self,
        record: TaskRecord,
        events: Sequence[StreamResponse],
        *,
        dedupe_key: str | None = None,
        outbox: OutboxEntry | None = None,
        dedupe_ttl: float | None = None,
        received: ReceivedEntry | None = None,
    ) -> TaskRecord:
        check_create(record, events)
        logged = [TaskEvent(seq, item) for seq, item in enumerate(events, start=1)]
        task_row = _task_row(record)
        event_rows = [(record.id, e.seq, e.item.dump_json()) for e in logged]
        entry_row = _row(outbox) if outbox is not None else None
        received_row = _row(received) if received is not None else None

        def apply(conn: sqlite3.Connection) -> str | None:
            if dedupe_key is not None:
                now = time.time()
                expires = now + dedupe_ttl if dedupe_ttl is not None else None
                # Take the key, or take it over once its replay window is over.
                claimed = conn.execute(
                    "INSERT INTO dedupe (key, task_id, expires) VALUES (?, ?, ?)"
                    " ON CONFLICT (key) DO UPDATE SET task_id = excluded.task_id,"
                    " expires = excluded.expires"
                    " WHERE dedupe.expires IS NOT NULL AND dedupe.expires <= ?",
                    (dedupe_key, record.id, expires, now),
                ).rowcount
                if not claimed:
                    found = conn.execute(
                        "SELECT task_id FROM dedupe WHERE key = ?", (dedupe_key,)
                    ).fetchone()
                    return cast(str, found[0])
            try:
                conn.execute(
                    "INSERT INTO tasks (id, context_id, owner, state, version, created_at,"
                    " updated_at, body, delegate) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    task_row,
                )
            except sqlite3.IntegrityError as exc:
                raise ConflictError(f"task {record.id} already exists") from exc
            conn.executemany("INSERT INTO task_events VALUES (?, ?, ?)", event_rows)
            if entry_row is not None:
                try:
                    conn.execute(
                        f"INSERT INTO outbox ({_OUTBOX_COLUMNS}) VALUES ({_marks(entry_row)})",
                        entry_row,
                    )
                except sqlite3.IntegrityError as exc:
                    raise ConflictError(f"handoff {entry_row[0]} already checkpointed") from exc
            if received_row is not None:
                conn.execute(_INSERT_RECEIVED, received_row)
            return None

        existing_id: str | None = await self._submit(apply, (record.id, logged))
        if existing_id is None:
            return record
        existing = await self.get(existing_id)
        if existing is None:  # pragma: no cover - the dedupe row and the task commit together
            raise StoreError(f"dedupe key names a missing task {existing_id}")
        return existing

    async def update(
        self, record: TaskRecord, events: Sequence[StreamResponse], *, expected_version: int
    ) -> None:
        await self._update(record, events, expected_version)

    async def _update(
        self,
        record: TaskRecord,
        events: Sequence[StreamResponse],
        expected_version: int,
        also: Callable[[sqlite3.Connection], None] | None = None,
    ) -> None:
        """Check-and-set the task and append its events; `also` runs in the same transaction."""
        check_update(record, events, expected_version)
        logged = [
            TaskEvent(seq, item) for seq, item in enumerate(events, start=expected_version + 1)
        ]
        task = record.task
        params = (
            task.status.state.value,
            record.version,
            record.updated_at,
            record.task_json(),
            record.id,
            expected_version,
        )
        event_rows = [(record.id, e.seq, e.item.dump_json()) for e in logged]

        def apply(conn: sqlite3.Connection) -> None:
            cursor = conn.execute(
                "UPDATE tasks SET state = ?, version = ?, updated_at = ?, body = ?"
                " WHERE id = ? AND version = ?",
                params,
            )
            if cursor.rowcount != 1:
                raise ConflictError(f"task {record.id} changed since version {expected_version}")
            conn.executemany("INSERT INTO task_events VALUES (?, ?, ?)", event_rows)
            if also is not None:
                also(conn)

        await self._submit(apply, (record.id, logged))

    async def checkpoint(
        self,
        record: TaskRecord,
        events: Sequence[StreamResponse],
        *,
        expected_version: int,
        entry: OutboxEntry,
        close: tuple[str, str, str] | None = None,
    ) -> None:
        row = _row(entry)

        def add_entry(conn: sqlite3.Connection) -> None:
            if close is not None:
                cursor = conn.execute(
                    "UPDATE outbox SET status = ?, detail = ?, updated_at = ?"
                    " WHERE handoff_id = ? AND status = 'pending'",
                    (close[1], close[2], record.updated_at, close[0]),
                )
                if cursor.rowcount != 1:
                    raise ConflictError(f"handoff {close[0]} is not pending")
            try:
                conn.execute(f"INSERT INTO outbox ({_OUTBOX_COLUMNS}) VALUES ({_marks(row)})", row)
            except sqlite3.IntegrityError as exc:
                raise ConflictError(f"handoff {entry.handoff_id} already checkpointed") from exc

        await self._update(record, events, expected_version, add_entry)

    async def terminate(
        self,
        record: TaskRecord,
        events: Sequence[StreamResponse],
        *,
        expected_version: int,
        handoff_id: str,
        status: str,
        detail: str,
    ) -> None:
        def close_entry(conn: sqlite3.Connection) -> None:
            cursor = conn.execute(
                "UPDATE outbox SET status = ?, detail = ?, updated_at = ?"
                " WHERE handoff_id = ? AND status = 'pending'",
                (status, detail, record.updated_at, handoff_id),
            )
            if cursor.rowcount != 1:
                raise ConflictError(f"handoff {handoff_id} is not pending")

        await self._update(record, events, expected_version, close_entry)

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
            f"SELECT {_OUTBOX_COLUMNS} FROM outbox WHERE {' AND '.join(where)}"
            " ORDER BY created_at, handoff_id",
            params,
        )
        return [OutboxEntry(*row) for row in rows]

    async def record_received(self, entry: ReceivedEntry) -> None:
        row = _row(entry)

        def insert(conn: sqlite3.Connection) -> None:
            conn.execute(_INSERT_RECEIVED, row)

        await self._submit(insert)

    async def received(self, context_id: str | None = None) -> list[ReceivedEntry]:
        where, params = ("context_id = ?", [context_id]) if context_id is not None else ("1", [])
        rows = await self._read(
            f"SELECT {_RECEIVED_COLUMNS} FROM received WHERE {where} ORDER BY seq", params
        )
        return [ReceivedEntry(*row) for row in rows]

    def _point(self, sql: str, params: Sequence[Any]) -> Any:
        """One row by primary key, read synchronously (see above)."""
        if self._point_reader is None or self._writer is None:
            raise StoreError("the store is not open")
        conn = self._point_reader if self._committing else self._writer
        return conn.execute(sql, params).fetchone()

    async def get(self, task_id: str) -> TaskRecord | None:
        row = self._point(f"SELECT {_TASK_COLUMNS} FROM tasks WHERE id = ?", (task_id,))
        return _record(row) if row else None

    async def find(self, dedupe_key: str) -> str | None:
        row = self._point(
            "SELECT task_id FROM dedupe WHERE key = ? AND (expires IS NULL OR expires > ?)",
            (dedupe_key, time.time()),
        )
        return cast(str, row[0]) if row else None

    async def list_tasks(self, query: TaskQuery) -> TaskPage:
        where = ["1"]
        params: list[Any] = []
        if query.owner is not None:
            where.append("(owner = ? OR delegate = ?)")
            params += [query.owner, query.owner]
        if query.context_id is not None:
            where.append("context_id = ?")
            params.append(query.context_id)
        if query.state is not None:
            where.append("state = ?")
            params.append(query.state.value)
        filters = " AND ".join(where)
        total_rows = await self._read(f"SELECT COUNT(*) FROM tasks WHERE {filters}", params)
        page_where, page_params = filters, list(params)
        if query.page_token:
            updated_at, task_id = decode_page_token(query.page_token)
            page_where += " AND (updated_at, id) < (?, ?)"
            page_params += [updated_at, task_id]
        rows = await self._read(
            f"SELECT {_TASK_COLUMNS} FROM tasks WHERE {page_where}"
            " ORDER BY updated_at DESC, id DESC LIMIT ?",
            [*page_params, query.page_size + 1],
        )
        records = [_record(row) for row in rows[: query.page_size]]
        token = ""
        if len(rows) > query.page_size:
            token = encode_page_token(records[-1].updated_at, records[-1].id)
        return TaskPage(records=records, next_page_token=token, total_size=int(total_rows[0][0]))

    async def events(self, task_id: str, after: int = 0) -> list[TaskEvent]:
        rows = await self._read(
            "SELECT seq, body FROM task_events WHERE task_id = ? AND seq > ? ORDER BY seq",
            (task_id, after),
        )
        return [TaskEvent(seq, StreamResponse.model_validate_json(body)) for seq, body in rows]

    def follow(self, task_id: str, after: int = 0) -> AsyncGenerator[TaskEvent, None]:
        return follow(self._hub, task_id, after, self.events, self.get)

    async def ping(self) -> bool:
        try:
            rows = await self._read("SELECT 1", ())
        except (sqlite3.Error, StoreError, ValueError):
            return False
        return rows == [(1,)]


def _migrate(conn: sqlite3.Connection) -> bool:
    """Move a file of the earlier layout (see `_OLD_LAYOUT`) to this one; whether it did.

    One transaction rebuilds the event table and drops the old indexes; the caller then
    creates the new ones (`CREATE INDEX IF NOT EXISTS`: a crash in between only delays it).
    """
    if not conn.execute(_OLD_LAYOUT).fetchall():
        return False
    conn.execute("BEGIN IMMEDIATE")
    try:
        # Again, under the write lock: another process opening the file may have done it.
        for (name,) in conn.execute(_OLD_LAYOUT).fetchall():
            if name == "task_events":
                conn.execute("ALTER TABLE task_events RENAME TO task_events_old")
                conn.execute(
                    "CREATE TABLE task_events (task_id TEXT NOT NULL, seq INTEGER NOT NULL,"
                    " body TEXT NOT NULL, PRIMARY KEY (task_id, seq))"
                )
                conn.execute(
                    "INSERT INTO task_events (task_id, seq, body)"
                    " SELECT task_id, seq, body FROM task_events_old ORDER BY task_id, seq"
                )
                conn.execute("DROP TABLE task_events_old")
            else:
                conn.execute(f"DROP INDEX {name}")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
    return True


def _row(entry: OutboxEntry | ReceivedEntry) -> tuple[Any, ...]:
    """A ledger entry's values in column order (`astuple` would deep-copy each)."""
    return tuple(getattr(entry, name) for name in entry.__slots__)


def _task_row(record: TaskRecord) -> tuple[Any, ...]:
    task = record.task
    return (
        task.id,
        task.context_id,
        record.owner,
        task.status.state.value,
        record.version,
        record.created_at,
        record.updated_at,
        record.task_json(),
        record.delegate,
    )


def _record(row: Sequence[Any]) -> TaskRecord:
    body, owner, version, created_at, updated_at, delegate = row
    return TaskRecord(
        task=Task.model_validate_json(body),
        owner=owner,
        version=version,
        created_at=created_at,
        updated_at=updated_at,
        delegate=delegate,
    )
