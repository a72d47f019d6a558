"""Opening a PostgreSQL schema: which one (the old default kept for its agent), bringing it to
this code's version, and claiming it for the agent (`stores._owner`).

`migrate` runs in the caller's transaction under an advisory lock on the schema's name:
replicas starting together migrate once, a crash mid-way leaves the old version, and two
agents opening one new schema at once cannot both claim it.
"""

from __future__ import annotations

from typing import Any

from a2a_handoff.errors import StoreError
from a2a_handoff.stores._owner import LEGACY_SCHEMA, schema_for, taken, unclaimed_legacy
from a2a_handoff.stores._postgres_schema import MIGRATIONS, VERSION

MIGRATION_TIMEOUT = 3600.0  # no limit but this: filling a new column reads every row


async def migrate(conn: Any, schema: str, agent: str | None) -> None:
    """Create `schema`, or bring it to `VERSION`; then record `agent` as its owner, or refuse
    it when another agent is (nothing recorded when `agent` is None: a tool, not an agent)."""
    s = f'"{schema}"'
    await conn.execute("SET LOCAL statement_timeout = 0")  # a migration may be long
    await conn.execute("SELECT pg_advisory_xact_lock(hashtext($1))", schema)
    await conn.execute(f"CREATE SCHEMA IF NOT EXISTS {s}")
    await conn.execute(f"CREATE TABLE IF NOT EXISTS {s}.schema_version (version integer NOT NULL)")
    found = await conn.fetchval(f"SELECT version FROM {s}.schema_version")
    version = 0 if found is None else int(found)
    if version > VERSION:
        raise StoreError(
            f"schema {schema} is at version {version}, newer than this version of"
            f" a2a-handoff knows ({VERSION}): upgrade it before starting this replica"
        )
    for step in range(version, VERSION):
        await conn.execute(MIGRATIONS[step](s), timeout=MIGRATION_TIMEOUT)
    if found is None:
        await conn.execute(f"INSERT INTO {s}.schema_version VALUES ($1)", VERSION)
    elif version != VERSION:
        await conn.execute(f"UPDATE {s}.schema_version SET version = $1", VERSION)
    if agent is None:
        return
    owner = await conn.fetchval(f"SELECT name FROM {s}.agent")
    if owner is None:
        await conn.execute(f"INSERT INTO {s}.agent VALUES ($1)", agent)
    elif owner != agent:
        raise taken("schema", schema, owner, agent, schema_for(agent))


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
