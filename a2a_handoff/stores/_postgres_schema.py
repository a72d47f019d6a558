"""The PostgreSQL store's schema: tables, indexes, the two write functions, and migrations.

Everything lives in one schema per agent (`?schema=` in the URL, `a2a_<agent name>` by
default), so agents may share a database; the schema's `agent` table names the agent that
owns it (`stores._owner`). `schema_version` holds the version the schema is at (and the
oldest code version that may use it); `MIGRATIONS[n]` brings a schema from version n to
n + 1, `VERSIONS[n]` names it and says its kind (`stores.versions`). A new schema is made at
this code's version when a store opens; one behind is refused until `db upgrade` ran what is
missing, in ONE transaction under an advisory lock on the schema's name (a crash mid-way
leaves the old version intact). A future change is a new entry at the end of both (never an
edit of an old one).

Writes that check something are two PL/pgSQL functions, the counterpart of the Redis store's
Lua scripts: `create_task` and `update_task` each run as one statement — one round trip and
one transaction — that checks (the dedupe key, the task's version, the pending outbox entry),
writes the snapshot, its events, the outbox or ledger row, and notifies followers
(`pg_notify`, delivered at commit), or writes nothing.

Unique constraints carry idempotency: a dedupe key (a message id, a handoff key) is the
primary key of `dedupe`, a handoff id that of `outbox`; a task id that of `tasks`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields

from a2a_handoff.stores.base import OutboxEntry, ReceivedEntry
from a2a_handoff.stores.versions import Migration

OUTBOX_COLUMNS = tuple(f.name for f in fields(OutboxEntry))
RECEIVED_COLUMNS = tuple(f.name for f in fields(ReceivedEntry))


def _tables(s: str) -> str:
    outbox = ",\n    ".join(f"{name} text NOT NULL" for name in OUTBOX_COLUMNS)
    received = ",\n    ".join(f"{name} text NOT NULL" for name in RECEIVED_COLUMNS)
    return f"""
CREATE TABLE {s}.tasks (
    id          text PRIMARY KEY,
    context_id  text NOT NULL,
    owner       text NOT NULL,
    delegate    text NOT NULL DEFAULT '',
    state       text NOT NULL,
    version     integer NOT NULL,
    created_at  text NOT NULL,
    updated_at  text NOT NULL,
    body        text NOT NULL
);
CREATE INDEX tasks_by_owner ON {s}.tasks (owner, updated_at, id);
CREATE INDEX tasks_by_delegate ON {s}.tasks (delegate, updated_at, id) WHERE delegate <> '';
CREATE INDEX tasks_by_context ON {s}.tasks (context_id, updated_at, id);
CREATE INDEX tasks_by_state ON {s}.tasks (state, updated_at, id);
CREATE TABLE {s}.task_events (
    task_id  text NOT NULL,
    seq      integer NOT NULL,
    body     text NOT NULL,
    PRIMARY KEY (task_id, seq)
);
CREATE TABLE {s}.dedupe (
    key      text PRIMARY KEY,
    task_id  text NOT NULL,
    expires  timestamptz          -- when the key stops deduplicating; NULL: never
);
CREATE TABLE {s}.outbox (
    seq bigserial UNIQUE,
    {outbox},
    PRIMARY KEY (handoff_id)
);
CREATE INDEX outbox_pending ON {s}.outbox (created_at) WHERE status = 'pending';
CREATE INDEX outbox_done ON {s}.outbox (updated_at) WHERE status = 'done';
CREATE INDEX outbox_by_context ON {s}.outbox (context_id, seq);
CREATE TABLE {s}.received (
    seq bigserial PRIMARY KEY,
    {received}
);
CREATE INDEX received_by_context ON {s}.received (context_id, seq);
CREATE TABLE {s}.leases (
    name     text PRIMARY KEY,
    holder   text NOT NULL,
    expires  timestamptz NOT NULL  -- database time: replicas' clocks never compared
);
"""


def _functions(s: str) -> str:
    """The write functions: a task created, a task updated (each in one transaction)."""
    return _create_task(s) + _update_task(s)


def _values(param: str, columns: tuple[str, ...]) -> str:
    """`param[1], param[2], …`: an array parameter's items, one a column."""
    return ", ".join(f"{param}[{i}]" for i in range(1, len(columns) + 1))


def _create_task(s: str, status_at: bool = False) -> str:
    """`status_at`: the version 3 function, which also takes the status's time (a column)."""
    param = " p_status_at text," if status_at else ""
    column, value = (", status_at", ", p_status_at") if status_at else ("", "")
    outbox, outbox_values = ", ".join(OUTBOX_COLUMNS), _values("p_entry", OUTBOX_COLUMNS)
    received = ", ".join(RECEIVED_COLUMNS)
    received_values = _values("p_received", RECEIVED_COLUMNS)
    return f"""
-- Insert a task, its first events, and (optionally) its outbox entry and ledger row; with a
-- dedupe key already taken (and not expired), write nothing and return the task it names.
-- NULL: created. A duplicate task id or handoff id raises unique_violation (all undone).
CREATE FUNCTION {s}.create_task(
    p_id text, p_owner text, p_delegate text, p_context text, p_state text,{param}
    p_version integer, p_created text, p_updated text, p_body text, p_events text[], p_dedupe text,
    p_ttl double precision, p_entry text[], p_received text[], p_channel text
) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    found_id text;
BEGIN
    IF p_dedupe IS NOT NULL THEN
        INSERT INTO {s}.dedupe AS d (key, task_id, expires)
        VALUES (p_dedupe, p_id,
                CASE WHEN p_ttl IS NULL THEN NULL
                     ELSE clock_timestamp() + make_interval(secs => p_ttl) END)
        ON CONFLICT (key) DO UPDATE SET task_id = excluded.task_id, expires = excluded.expires
            WHERE d.expires IS NOT NULL AND d.expires <= clock_timestamp();
        IF NOT FOUND THEN
            SELECT task_id INTO found_id FROM {s}.dedupe WHERE key = p_dedupe;
            RETURN found_id;
        END IF;
    END IF;
    INSERT INTO {s}.tasks (id, context_id, owner, delegate, state, version, created_at,
                           updated_at, body{column})
    VALUES (p_id, p_context, p_owner, p_delegate, p_state, p_version, p_created, p_updated,
            p_body{value});
    INSERT INTO {s}.task_events (task_id, seq, body)
    SELECT p_id, e.n, e.body FROM unnest(p_events) WITH ORDINALITY AS e(body, n);
    IF p_entry IS NOT NULL THEN
        INSERT INTO {s}.outbox ({outbox}) VALUES ({outbox_values});
    END IF;
    IF p_received IS NOT NULL THEN
        INSERT INTO {s}.received ({received}) VALUES ({received_values});
    END IF;
    PERFORM pg_notify(p_channel, p_id);
    RETURN NULL;
END $$;
"""


def _update_task(s: str, status_at: bool = False) -> str:
    """`status_at`: the version 3 function, which also takes the status's time (a column)."""
    param = " p_status_at text," if status_at else ""
    column = ", status_at = p_status_at" if status_at else ""
    outbox, outbox_values = ", ".join(OUTBOX_COLUMNS), _values("p_entry", OUTBOX_COLUMNS)
    return f"""
-- Replace a task's snapshot and append its events if its version is p_expected; with
-- p_entry, add that pending outbox entry; with p_close, close that pending entry first.
-- Returns 'ok', 'conflict' (missing or moved) or 'not_pending', having written nothing
-- unless 'ok'. A handoff id already checkpointed raises unique_violation (all undone).
CREATE FUNCTION {s}.update_task(
    p_id text, p_expected integer, p_version integer, p_state text,{param} p_updated text,
    p_body text, p_events text[], p_entry text[], p_close text, p_status text, p_detail text,
    p_channel text
) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    current_version integer;
BEGIN
    SELECT version INTO current_version FROM {s}.tasks WHERE id = p_id FOR UPDATE;
    IF NOT FOUND OR current_version <> p_expected THEN
        RETURN 'conflict';
    END IF;
    IF p_close IS NOT NULL THEN
        UPDATE {s}.outbox SET status = p_status, detail = p_detail, updated_at = p_updated
        WHERE handoff_id = p_close AND status = 'pending';
        IF NOT FOUND THEN
            RETURN 'not_pending';
        END IF;
    END IF;
    IF p_entry IS NOT NULL THEN
        INSERT INTO {s}.outbox ({outbox}) VALUES ({outbox_values});
    END IF;
    UPDATE {s}.tasks SET state = p_state, version = p_version, updated_at = p_updated,
                         body = p_body{column}
    WHERE id = p_id;
    INSERT INTO {s}.task_events (task_id, seq, body)
    SELECT p_id, p_expected + e.n, e.body FROM unnest(p_events) WITH ORDINALITY AS e(body, n);
    PERFORM pg_notify(p_channel, p_id);
    RETURN 'ok';
END $$;
"""


def _push_tables(s: str) -> str:
    """Migration 1 → 2: the push configs."""
    return f"""
CREATE TABLE {s}.push_configs (
    task_id        text NOT NULL,
    config_id      text NOT NULL,
    config         text NOT NULL,
    cursor         integer NOT NULL,
    failing_since  text NOT NULL,
    history        text NOT NULL,
    done           boolean NOT NULL,
    created_at     text NOT NULL,
    updated_at     text NOT NULL,
    PRIMARY KEY (task_id, config_id)
);
CREATE INDEX push_configs_active ON {s}.push_configs (task_id) WHERE NOT done;
"""


def _status_time_and_owner(s: str) -> str:
    """Migration 2 → 3: the status's time as a column (ListTasks' statusTimestampAfter filters
    on it and its index, never on a parsed body; the rows there are filled from their bodies
    once, here), the write functions that set it, and the table naming the agent that owns
    the schema (`stores._owner`)."""
    return (
        f"""
ALTER TABLE {s}.tasks ADD COLUMN status_at text NOT NULL DEFAULT '';
UPDATE {s}.tasks SET status_at = coalesce(body::jsonb #>> '{{status,timestamp}}', '');
CREATE INDEX tasks_by_status_time ON {s}.tasks (owner, status_at);
CREATE INDEX tasks_by_delegate_status_time ON {s}.tasks (delegate, status_at)
    WHERE delegate <> '';
DROP FUNCTION {s}.create_task;
DROP FUNCTION {s}.update_task;
CREATE TABLE {s}.agent (name text NOT NULL);
"""
        + _create_task(s, status_at=True)
        + _update_task(s, status_at=True)
    )


ONLINE_INDEXES: dict[int, tuple[tuple[str, str, str], ...]] = {
    4: (
        ("dedupe_by_task", "dedupe", "task_id"),
        ("outbox_by_task", "outbox", "task_id"),
        ("received_by_task", "received", "task_id"),
        ("received_by_time", "received", "at"),
    ),
}
"""The indexes a migration only adds, by its version: (name, table, column). `db upgrade`
builds them first, CONCURRENTLY (writes go on meanwhile), outside its transaction; the
migration's own statements then find them made."""


def _retention_indexes(s: str) -> str:
    """Migration 3 → 4: what retention deletes by, indexed (a task's dedupe keys, outbox
    entries and ledger rows; finished tasks by time are `tasks_by_state`)."""
    return "".join(
        f"CREATE INDEX IF NOT EXISTS {name} ON {s}.{table} ({column});\n"
        for name, table, column in ONLINE_INDEXES[4]
    )


MIGRATIONS: tuple[Callable[[str], str], ...] = (
    lambda s: _tables(s) + _functions(s),  # 0 → 1: everything above
    _push_tables,  # 1 → 2: push-notification configs
    _status_time_and_owner,  # 2 → 3: tasks.status_at, the functions setting it, the owner
    _retention_indexes,  # 3 → 4: indexes retention deletes by
)
"""`MIGRATIONS[n](schema)`: the SQL that brings a schema (a quoted identifier) from version
n to n + 1. Append only."""

VERSION = len(MIGRATIONS)
"""The schema version this code reads and writes."""

VERSIONS = (
    Migration(1, "tables and the write functions", "breaking"),
    Migration(2, "push-notification configs", "expand"),
    # The write functions take the status's time: code of version 2 cannot call them.
    Migration(3, "the status's time as a column, write functions setting it, owner", "breaking"),
    Migration(4, "indexes retention deletes by: a task's rows, ledger rows by time", "expand"),
)
"""`MIGRATIONS`, named and of their kind (`stores.versions`)."""
