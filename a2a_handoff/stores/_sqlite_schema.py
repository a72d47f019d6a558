"""The SQLite store's file layout: tables, indexes, pragmas, and the migrations of older files.

Pages written per commit decide its cost (a write call each, and the fsync's length), so the
layout keeps inserts at the right edge of every b-tree, where SQLite appends without
rebalancing: indexes ascend in time (scanned backwards for newest-first pages; descending
ones took every insert at their left edge: 3 extra pages a write), and events live in a
rowid table (a WITHOUT ROWID row over ~1 KiB spills into overflow pages: a task snapshot
event did). The file is versioned (`MIGRATIONS`, `stores.versions`): a new file is made at
this code's version when opened; one behind is refused until `db upgrade` ran `apply`.

Every question /health and the ledger ask has an index that answers it without a scan:
`outbox_by_status_time` gives the pending count, the oldest pending entry and the last
completed one; the ledger pages by rowid.
"""

from __future__ import annotations

import sqlite3
from dataclasses import fields

from a2a_handoff.stores.base import OutboxEntry, ReceivedEntry
from a2a_handoff.stores.versions import Migration, compatible_from

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
    -- the status's timestamp: ListTasks filters on it; before the body, so that reading it
    -- does not walk the body's overflow pages (a file migrated has it last)
    status_at   TEXT NOT NULL DEFAULT '',
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
CREATE INDEX IF NOT EXISTS outbox_by_status_time ON outbox (status, updated_at);
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
CREATE TABLE IF NOT EXISTS push_configs (
    task_id        TEXT NOT NULL,
    config_id      TEXT NOT NULL,
    config         TEXT NOT NULL,
    cursor         INTEGER NOT NULL,
    failing_since  TEXT NOT NULL,
    history        TEXT NOT NULL,
    done           INTEGER NOT NULL,
    created_at     TEXT NOT NULL,
    updated_at     TEXT NOT NULL,
    PRIMARY KEY (task_id, config_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS push_configs_active ON push_configs (task_id) WHERE done = 0;
CREATE TABLE IF NOT EXISTS leases (  -- used only when several processes share the file
    name     TEXT PRIMARY KEY,
    holder   TEXT NOT NULL,
    expires  REAL NOT NULL       -- unix time
) WITHOUT ROWID;
"""

PRAGMAS = (
    "PRAGMA journal_mode=WAL",
    "PRAGMA synchronous=FULL",
    "PRAGMA busy_timeout=5000",
    "PRAGMA cache_size=-65536",  # 64 MiB of pages: inserts stay in memory
    "PRAGMA mmap_size=268435456",  # reads through the page cache, not read()
)

# What an earlier layout left: descending task indexes, WITHOUT ROWID events, and the outbox
# status index on creation time (pending entries keep created_at == updated_at, so the new
# one on updated_at answers both the oldest pending and the last closed entry).
_OLD_LAYOUT = (
    "SELECT name FROM sqlite_master WHERE (type = 'index' AND name LIKE 'tasks_by_%'"
    " AND sql LIKE '%DESC%') OR (name = 'task_events' AND sql LIKE '%WITHOUT ROWID%')"
    " OR (type = 'index' AND name = 'outbox_by_status')"
)

TASK_COLUMNS = "body, owner, version, created_at, updated_at, delegate"
OUTBOX_COLUMNS = ", ".join(f.name for f in fields(OutboxEntry))
RECEIVED_COLUMNS = ", ".join(f.name for f in fields(ReceivedEntry))
INSERT_RECEIVED = (
    f"INSERT INTO received ({RECEIVED_COLUMNS})"
    f" VALUES ({', '.join('?' * len(fields(ReceivedEntry)))})"
)
INSERT_OUTBOX = (
    f"INSERT INTO outbox ({OUTBOX_COLUMNS}) VALUES ({', '.join('?' * len(fields(OutboxEntry)))})"
)


MIGRATIONS = (
    Migration(
        1, "tables and indexes (a file from before versions, brought up to date)", "breaking"
    ),
    Migration(2, "indexes retention deletes by: finished tasks and ledger rows by time", "expand"),
)
"""The file's versions (`stores.versions`); `_STEPS[n]` brings a file from n to n + 1.
Append only."""

VERSION = len(MIGRATIONS)

_RETENTION_INDEXES = """
CREATE INDEX IF NOT EXISTS tasks_by_state_time ON tasks (state, updated_at);
CREATE INDEX IF NOT EXISTS outbox_by_task ON outbox (task_id);
CREATE INDEX IF NOT EXISTS received_by_task ON received (task_id);
CREATE INDEX IF NOT EXISTS received_by_time ON received (at);
CREATE INDEX IF NOT EXISTS dedupe_by_task ON dedupe (task_id);
"""


def pragmas(conn: sqlite3.Connection) -> None:
    for pragma in PRAGMAS:
        conn.execute(pragma)


def read_version(conn: sqlite3.Connection) -> tuple[int, int | None, bool]:
    """The file's version, the `compatible_from` it keeps (None: none kept) and whether it
    holds a store at all (an empty file does not: it is made at this code's version)."""
    tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    if "schema_version" in tables:
        row = conn.execute("SELECT version, compatible_from FROM schema_version").fetchone()
        if row is not None:
            return int(row[0]), int(row[1]), True
    return 0, None, "tasks" in tables


def apply(conn: sqlite3.Connection, upto: int = VERSION) -> int:
    """Run the steps from the file's version to `upto`, each recorded as it ends (each is
    idempotent: a crash mid-step runs it again); the version reached."""
    version, _, _ = read_version(conn)
    for step in range(version, upto):
        _STEPS[step](conn)
        _set_version(conn, step + 1)
    return max(version, upto)


def _set_version(conn: sqlite3.Connection, version: int) -> None:
    compatible = compatible_from(MIGRATIONS, version)
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_version"
            " (version INTEGER NOT NULL, compatible_from INTEGER NOT NULL)"
        )
        conn.execute("DELETE FROM schema_version")
        conn.execute("INSERT INTO schema_version VALUES (?, ?)", (version, compatible))
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def _to_1(conn: sqlite3.Connection) -> None:
    """The schema, and the migration of a file of an earlier, unversioned layout."""
    columns = conn.execute("PRAGMA table_info(tasks)").fetchall()
    if columns and "delegate" not in {column[1] for column in columns}:
        # A file from before task delegation: add the column in place.
        conn.execute("ALTER TABLE tasks ADD COLUMN delegate TEXT NOT NULL DEFAULT ''")
    if columns and "status_at" not in {column[1] for column in columns}:
        add_status_time(conn)
    conn.executescript(SCHEMA)
    dedupe = {c[1] for c in conn.execute("PRAGMA table_info(dedupe)").fetchall()}
    if "expires" not in dedupe:  # a file from before replay windows
        conn.execute("ALTER TABLE dedupe ADD COLUMN expires REAL")
    if migrate(conn):
        conn.executescript(SCHEMA)  # the indexes it dropped, in their new layout


def _to_2(conn: sqlite3.Connection) -> None:
    """What retention deletes by, indexed: finished tasks by time, a task's other rows."""
    conn.executescript(_RETENTION_INDEXES)


_STEPS = (_to_1, _to_2)


def add_status_time(conn: sqlite3.Connection) -> None:
    """A file from before the status's time was a column: add it, filled from each task's
    body once (ListTasks then filters on the column, never on a parsed body). One
    transaction; another process that did it first leaves nothing to do."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        found = {column[1] for column in conn.execute("PRAGMA table_info(tasks)").fetchall()}
        if "status_at" not in found:
            conn.execute("ALTER TABLE tasks ADD COLUMN status_at TEXT NOT NULL DEFAULT ''")
            conn.execute(
                "UPDATE tasks SET status_at = coalesce(json_extract(body,"
                " '$.status.timestamp'), '')"
            )
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def migrate(conn: sqlite3.Connection) -> bool:
    """Move a file of an earlier layout (see `_OLD_LAYOUT`) to this one; whether it did.

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


def row_of(entry: OutboxEntry | ReceivedEntry) -> tuple[object, ...]:
    """A ledger entry's values in column order (`astuple` would deep-copy each)."""
    return tuple(getattr(entry, name) for name in entry.__slots__)
