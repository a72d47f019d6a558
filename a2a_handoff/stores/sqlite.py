"""SQLite backend: the embedded default, one file per agent.

Durability must not cost throughput: every write goes through one writer that commits
batches of them together (`stores._sqlite_writer`: group commit, WAL, `synchronous=FULL`); a
caller is resumed only after its batch committed, and committed events are then published to
in-process followers in commit order. The file's layout and migrations are
`stores._sqlite_schema`'s.

The rooms: `stores._sqlite_file` (connections, where reads run, the check-and-set step,
leases when shared), `stores._sqlite_ledger` (outbox and ledger), this module (tasks: commit,
read, list, events, follow).

One file, one owner (`stores._sqlite_owner`): a second process is refused at `open()`, unless
the store is opened for sharing (`?shared=1`), when leases live in the file and followers also
poll for events other processes wrote.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import AsyncGenerator, Callable, Sequence
from functools import cached_property, partial
from pathlib import Path
from typing import Any, cast
from urllib.parse import parse_qs

from a2a_handoff.errors import ConflictError, StoreError
from a2a_handoff.protocol.models import Task
from a2a_handoff.protocol.states import TERMINAL_STATES
from a2a_handoff.stores._event_log import from_log, log_json, needs_snapshot
from a2a_handoff.stores._hub import follow
from a2a_handoff.stores._pages import decode_page_token, encode_page_token, fitting
from a2a_handoff.stores._sqlite_ledger import SqliteLedger, ledger_writes
from a2a_handoff.stores._sqlite_push import SqlitePush
from a2a_handoff.stores._sqlite_schema import TASK_COLUMNS
from a2a_handoff.stores.base import (
    Capabilities,
    Commit,
    TaskEvent,
    TaskPage,
    TaskQuery,
    TaskRecord,
    check_ledger,
)
from a2a_handoff.stores.records import tenant_filter
from a2a_handoff.trust.keys import KeyFile

_FINISHED = sorted(state.value for state in TERMINAL_STATES)
SHARED_POLL_SECONDS = 1.0  # shared file: followers re-read this often (other processes' events)


def parse_sqlite_url(url: str) -> tuple[Path, bool]:
    """`sqlite:///relative/path` or `sqlite:////absolute/path` (`?shared=1`: several processes
    share the file) → the file's path and whether it is shared."""
    if not url.startswith("sqlite:///"):
        raise StoreError(f"not a sqlite URL: {url!r} (expected sqlite:///PATH)")
    path, _, query = url[len("sqlite:///") :].partition("?")
    if not path or path == ":memory:":
        raise StoreError("a SQLite store needs a file path; use memory:// for a throwaway store")
    options = {k: v[-1] for k, v in parse_qs(query).items()}
    unknown = set(options) - {"shared"}
    if unknown:
        raise StoreError(f"unknown SQLite store option(s) {sorted(unknown)} in {url!r}")
    shared = options.get("shared", "0").lower() in ("1", "true", "yes")
    return Path(path), shared


class SqliteTaskStore(SqliteLedger, SqlitePush):
    """Tasks and event logs in one SQLite file (WAL, group commit, durable)."""

    def __init__(self, path: str | Path, **options: Any) -> None:
        super().__init__(path, **options)
        self.fresh = not self.path.exists()  # no database yet: its agent's keys are made too
        # Beyond the core (`stores.base`): everything but a pool; the agent's keys are the
        # key file beside the database.
        self.capabilities = Capabilities(
            ledger=self,
            push=self,
            leases=self,
            identity=self.key_file,
            file=self,
            schema=self,
            retention=self,
        )

    @classmethod
    def from_url(cls, url: str) -> SqliteTaskStore:
        path, shared = parse_sqlite_url(url)
        return cls(path, shared=shared)

    # -- the agent's identity: a key file next to the database (mode 0600) -------------------

    @cached_property
    def key_file(self) -> KeyFile:
        """`billing.db` keeps its agent's keys in `billing.keys.json`, beside it (made with
        the database, never for a database used before: see `KeyFile`)."""
        path = self.path.with_name(self.path.stem + ".keys.json")
        return KeyFile(path, create=self.fresh, missing_hint=f"beside {self.path}, used before")

    async def load_identity(self, agent: str) -> str | None:
        return self.key_file.read()

    async def save_identity(self, agent: str, document: str, expected: str | None) -> bool:
        return self.key_file.write_if(document, expected)

    # -- lifecycle ------------------------------------------------------------------------

    def claim(self, agent: str) -> None:
        """Nothing to record: this store is one process's own (SQLite's file lock refuses a
        second process, `stores._sqlite_owner`)."""

    async def open(self) -> SqliteTaskStore:
        await super().open()
        return self

    async def __aenter__(self) -> SqliteTaskStore:
        return await self.open()

    # -- TaskStore ------------------------------------------------------------------------

    async def commit(self, unit: Commit) -> TaskRecord:
        check_ledger(unit, self.capabilities.ledger)
        also = ledger_writes(unit)
        if unit.expected_version is None:  # a new task
            return await self._create(unit, also)
        await self._update(unit.record, unit.events, unit.expected_version, also)
        return unit.record

    async def _create(
        self, unit: Commit, also: Callable[[sqlite3.Connection], None] | None
    ) -> TaskRecord:
        """A new task, its events and key; `also` (its outbox and ledger rows) in the same
        transaction. A taken key: nothing written, the task the key names returned."""
        record, dedupe_key, dedupe_ttl = unit.record, unit.dedupe_key, unit.dedupe_ttl
        logged = [TaskEvent(seq, item) for seq, item in enumerate(unit.events, start=1)]
        task_row = _task_row(record)
        event_rows = [(record.id, e.seq, log_json(e.item, record.task)) for e in logged]

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
                    " updated_at, body, delegate, status_at)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    task_row,
                )
            except sqlite3.IntegrityError as exc:
                raise ConflictError(f"task {record.id} already exists") from exc
            conn.executemany("INSERT INTO task_events VALUES (?, ?, ?)", event_rows)
            if also is not None:
                also(conn)
            return None

        existing_id = await self._submit(apply, partial(self._hub.publish, record.id, logged))
        if existing_id is None:
            return record
        existing = await self.get(existing_id)
        if existing is None:  # pragma: no cover - the dedupe row and the task commit together
            raise StoreError(f"dedupe key names a missing task {existing_id}")
        return existing

    async def get(self, task_id: str) -> TaskRecord | None:
        row = self._point(f"SELECT {TASK_COLUMNS} FROM tasks WHERE id = ?", (task_id,))
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
        if query.owner:
            where.append("(owner = ? OR delegate = ?)")
            params += [query.owner, query.owner]
        elif query.owner is not None:  # "" (no authentication): no task without a delegate
            where.append("owner = ?")
            params.append(query.owner)
        if query.tenant is not None:
            condition, values = tenant_filter(query.tenant)
            where.append(condition)
            params += values
        if query.context_id is not None:
            where.append("context_id = ?")
            params.append(query.context_id)
        states = query.states
        if states is not None:
            where.append(f"state IN ({','.join('?' * len(states))})" if states else "0")
            params += sorted(s.value for s in states)
        if query.status_after is not None:
            # A column: no body is read, let alone parsed, to filter (a status changes no
            # later than its task's updated_at: the owner's index narrows by that).
            where.append("updated_at > ? AND status_at > ?")
            params += [query.status_after, query.status_after]
        filters = " AND ".join(where)
        total_rows = await self._read(f"SELECT COUNT(*) FROM tasks WHERE {filters}", params)
        page_where, page_params = filters, list(params)
        if query.page_token:
            updated_at, task_id = decode_page_token(query.page_token)
            page_where += " AND (updated_at, id) < (?, ?)"
            page_params += [updated_at, task_id]
        rows = await self._read(
            f"SELECT {TASK_COLUMNS} FROM tasks WHERE {page_where}"
            " ORDER BY updated_at DESC, id DESC LIMIT ?",
            [*page_params, query.page_size + 1],
        )
        kept = fitting((len(row[0]) for row in rows[: query.page_size]), query.page_bytes)
        records = [_record(row) for row in rows[:kept]]  # only what the page holds is parsed
        token = ""
        if len(rows) > kept:
            token = encode_page_token(records[-1].updated_at, records[-1].id)
        return TaskPage(records=records, next_page_token=token, total_size=int(total_rows[0][0]))

    async def events(self, task_id: str, after: int = 0) -> list[TaskEvent]:
        rows = await self._read(
            "SELECT seq, body FROM task_events WHERE task_id = ? AND seq > ? ORDER BY seq",
            (task_id, after),
        )
        snapshot = None
        if needs_snapshot([body for _, body in rows]):
            record = await self.get(task_id)
            snapshot = record.task if record is not None else None
        return [TaskEvent(seq, from_log(body, snapshot)) for seq, body in rows]

    def follow(self, task_id: str, after: int = 0) -> AsyncGenerator[TaskEvent, None]:
        poll = SHARED_POLL_SECONDS if self.shared else None
        return follow(self._hub, task_id, after, self.events, self.get, poll=poll)

    # -- RetentionStore -----------------------------------------------------------------------

    async def purge_finished(self, before: str, limit: int) -> int:
        finished = ",".join("?" * len(_FINISHED))

        def purge(conn: sqlite3.Connection) -> int:
            ids = [
                row[0]
                for row in conn.execute(
                    f"SELECT id FROM tasks t WHERE state IN ({finished}) AND updated_at < ?"
                    " AND NOT EXISTS (SELECT 1 FROM dedupe d WHERE d.task_id = t.id"
                    " AND d.expires > ?)"
                    " AND NOT EXISTS (SELECT 1 FROM outbox o WHERE o.task_id = t.id"
                    " AND o.status = 'pending')"
                    " AND NOT EXISTS (SELECT 1 FROM push_configs p WHERE p.task_id = t.id"
                    " AND p.done = 0) LIMIT ?",
                    (*_FINISHED, before, time.time(), limit),
                )
            ]
            marks = ",".join("?" * len(ids))
            for table in ("task_events", "push_configs", "outbox", "received", "dedupe"):
                conn.execute(f"DELETE FROM {table} WHERE task_id IN ({marks})", ids)
            conn.execute(f"DELETE FROM tasks WHERE id IN ({marks})", ids)
            # Ledger rows of handoffs that made no task (refused), as old.
            rows = conn.execute(
                "DELETE FROM received WHERE seq IN (SELECT seq FROM received r"
                " WHERE at < ? AND NOT EXISTS (SELECT 1 FROM tasks t WHERE t.id = r.task_id)"
                " ORDER BY at LIMIT ?)",
                (before, limit - len(ids)),
            ).rowcount
            return len(ids) + rows

        return cast(int, await self._submit(purge))


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
        task.status.timestamp or "",
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
