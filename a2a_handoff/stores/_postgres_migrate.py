"""Opening a PostgreSQL schema: which one (the old default kept for its agent), making it or
checking its version, and claiming it for the agent (`stores._owner`); and `db upgrade`'s
migrations.

`migrate` and `upgrade` run in the caller's transaction under an advisory lock on the
schema's name: replicas starting together make a new schema once, a crash mid-way leaves
the old version, and two agents opening one new schema at once cannot both claim it.
"""

from __future__ import annotations

from typing import Any

from a2a_handoff.stores._owner import LEGACY_SCHEMA, schema_for, taken, unclaimed_legacy
from a2a_handoff.stores._postgres_schema import MIGRATIONS, ONLINE_INDEXES, VERSION, VERSIONS
from a2a_handoff.stores.versions import SchemaStatus, check_usable, compatible_from, status_of

MIGRATION_TIMEOUT = 3600.0  # no limit but this: filling a new column reads every row


async def migrate(conn: Any, schema: str, agent: str | None, url: str) -> None:
    """Create `schema` at `VERSION` when it does not exist, or check that this code may use
    it (StoreVersionError otherwise: behind, naming the command that upgrades it — `url` —
    or ahead and not compatible); then record `agent` as its owner, or refuse it when
    another agent is (nothing recorded when `agent` is None: a tool, not an agent)."""
    s = f'"{schema}"'
    await conn.execute("SELECT pg_advisory_xact_lock(hashtext($1))", schema)
    status = await read_status(conn, schema)
    if not status.exists:
        await _run(conn, schema, 0)
    else:
        check_usable(status, url)
    if agent is None:
        return
    owner = await conn.fetchval(f"SELECT name FROM {s}.agent")
    if owner is None:
        await conn.execute(f"INSERT INTO {s}.agent VALUES ($1)", agent)
    elif owner != agent:
        raise taken("schema", schema, owner, agent, schema_for(agent))


async def read_status(conn: Any, schema: str) -> SchemaStatus:
    """Where `schema` stands (`stores.versions`)."""
    where = f"PostgreSQL schema {schema}"
    if not await conn.fetchval("SELECT to_regclass($1)", f'"{schema}".schema_version'):
        return status_of(where, VERSIONS, 0, None, exists=False)
    s = f'"{schema}"'
    kept = await conn.fetchval(
        "SELECT 1 FROM information_schema.columns WHERE table_schema = $1"
        " AND table_name = 'schema_version' AND column_name = 'compatible_from'",
        schema,
    )
    columns = "version, compatible_from" if kept else "version, NULL"
    row = await conn.fetchrow(f"SELECT {columns} FROM {s}.schema_version")
    if row is None:
        return status_of(where, VERSIONS, 0, None, exists=False)
    compatible = None if row[1] is None else int(row[1])
    return status_of(where, VERSIONS, int(row[0]), compatible)


async def upgrade(conn: Any, schema: str, url: str, upto: int = VERSION) -> SchemaStatus:
    """Run the migrations `schema` is missing, up to `upto`, in the caller's transaction
    under the schema's lock; the status after (StoreVersionError for a schema ahead of this
    code and not compatible with it)."""
    await conn.execute("SELECT pg_advisory_xact_lock(hashtext($1))", schema)
    status = await read_status(conn, schema)
    if status.ahead:
        check_usable(status, url)
        return status
    if status.exists and status.current < upto:  # a new schema: its agent makes it
        await _run(conn, schema, status.current, upto)
    return await read_status(conn, schema)


async def build_online(conn: Any, schema: str) -> None:
    """The indexes pending migrations only add, built CONCURRENTLY — outside a transaction,
    writes to their tables going on — before `upgrade` runs the migrations (which then find
    them made). An index a cut build left invalid is dropped and built again."""
    status = await read_status(conn, schema)
    if not status.exists:
        return
    await conn.execute("SET statement_timeout = 0")  # this connection is the tool's own
    s = f'"{schema}"'
    for migration in status.pending:
        if migration.version - 1 > status.current:
            break  # its tables come with a step before it: built in the transaction
        for name, table, column in ONLINE_INDEXES.get(migration.version, ()):
            valid = await conn.fetchval(
                "SELECT indisvalid FROM pg_index WHERE indexrelid = to_regclass($1)",
                f"{s}.{name}",
            )
            if valid is False:
                await conn.execute(f"DROP INDEX CONCURRENTLY {s}.{name}")
            await conn.execute(
                f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {name} ON {s}.{table} ({column})",
                timeout=MIGRATION_TIMEOUT,
            )


async def _run(conn: Any, schema: str, version: int, upto: int = VERSION) -> None:
    """The steps from `version` to `upto`, and the version recorded."""
    s = f'"{schema}"'
    await conn.execute("SET LOCAL statement_timeout = 0")  # a migration may be long
    await conn.execute(f"CREATE SCHEMA IF NOT EXISTS {s}")
    await conn.execute(
        f"CREATE TABLE IF NOT EXISTS {s}.schema_version (version integer NOT NULL,"
        " compatible_from integer)"
    )
    await conn.execute(
        f"ALTER TABLE {s}.schema_version ADD COLUMN IF NOT EXISTS compatible_from integer"
    )
    for step in range(version, upto):
        await conn.execute(MIGRATIONS[step](s), timeout=MIGRATION_TIMEOUT)
    await conn.execute(f"DELETE FROM {s}.schema_version")
    await conn.execute(
        f"INSERT INTO {s}.schema_version VALUES ($1, $2)",
        upto,
        compatible_from(VERSIONS, upto),
    )


async def keep_legacy(conn: Any, own: str, agent: str) -> str:
    """The schema an agent without an explicit one uses: its own default `own`, or `a2a` (the
    default before each agent had its own) when that names this agent and `own` does not
    exist yet; refused when `a2a` holds tasks and names no agent (it cannot tell whose)."""
    if await conn.fetchval("SELECT to_regclass($1)", f"{own}.schema_version"):
        return own  # this agent's own default exists: it is the one
    if not await conn.fetchval("SELECT to_regclass($1)", f"{LEGACY_SCHEMA}.tasks"):
        return own
    owner = None
    if await conn.fetchval("SELECT to_regclass($1)", f"{LEGACY_SCHEMA}.agent"):
        owner = await conn.fetchval(f'SELECT name FROM "{LEGACY_SCHEMA}".agent')
    if owner == agent:
        return LEGACY_SCHEMA
    if owner is None and await conn.fetchval(
        f'SELECT EXISTS (SELECT 1 FROM "{LEGACY_SCHEMA}".tasks)'
    ):
        raise unclaimed_legacy("schema", LEGACY_SCHEMA, agent, own)
    return own
