"""Tasks, event streams, idempotency records, outbox, ledger and leases in PostgreSQL.

For several replicas of one agent sharing their state on the database a team already runs,
backs up and monitors (`postgresql://USER@HOST:PORT/DB`, the `postgres` extra). Every write
that checks something — a task's version, a dedupe key, a pending outbox entry — is one call
of a PL/pgSQL function (`stores._postgres_schema`): one round trip, one transaction, atomic
across replicas; the snapshot, its events and the outbox or ledger row commit together or
not at all, and an acknowledged write is as durable as the server's `synchronous_commit`
makes it (on by default: flushed to the WAL). A journal flush (the events of one step of a
handler) is one such call. Leases are one upsert each (`stores._postgres_ledger`). A stream
served by one replica wakes on the NOTIFY another's write sent at commit
(`stores._postgres_follow`).

Round trips: a read is one; a write is one; `list_tasks` is one (the page, within its byte
budget, and the total in one statement); a task created with a dedupe key that is already
taken is two (the key's task is then read).

URL options: `?schema=NAME` (by default `a2a_<agent name>`: agents sharing a database get
different schemas, replicas of one agent the same; a schema names the agent that owns it and
refuses another, `stores._owner`), `pool_max=10`, `acquire_timeout=5`, `command_timeout=2`,
`connect_timeout=1` (seconds); asyncpg's own options (`sslmode`, …) pass through. A statement
that runs past `command_timeout` is cancelled by the server and fails its call alone
(StoreTimeoutError); only a server that does not answer at all counts as down.

The rooms: `stores._postgres_pool` (opening, closing, the schema), `stores._postgres_connections`
(connections under outages, /health), `stores._postgres_ledger` (outbox, ledger, leases),
`stores._postgres_schema` (tables, functions, migrations), `stores._postgres_follow` (LISTEN),
`stores._postgres_push` (push configs), this module (tasks).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence
from functools import cached_property
from typing import Any

from a2a_handoff.errors import ConflictError, StoreError
from a2a_handoff.protocol.models import Task
from a2a_handoff.protocol.states import TERMINAL_STATES
from a2a_handoff.stores._event_log import from_log, log_json, needs_snapshot
from a2a_handoff.stores._pages import decode_page_token, encode_page_token
from a2a_handoff.stores._postgres_connections import guarded
from a2a_handoff.stores._postgres_push import PostgresPush
from a2a_handoff.stores._postgres_schema import OUTBOX_COLUMNS, RECEIVED_COLUMNS
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

try:
    from asyncpg import UniqueViolationError
except ImportError:  # pragma: no cover - the optional extra
    UniqueViolationError = ConflictError

TASK_COLUMNS = "body, owner, version, created_at, updated_at, delegate"
_FINISHED = sorted(state.value for state in TERMINAL_STATES)


class PostgresTaskStore(PostgresPush):
    """The store on PostgreSQL, shared by every replica of an agent (module docstring)."""

    @classmethod
    def from_url(cls, url: str) -> PostgresTaskStore:
        dsn, options = cls.parse_url(url)
        return cls(dsn, **options)

    @cached_property
    def capabilities(self) -> Capabilities:
        """The ledger, push configs, leases and the pool's use; never the agent's keys
        (whoever reaches the database would read them, and sign as the agent)."""
        return Capabilities(
            ledger=self, push=self, leases=self, pool=self, schema=self, retention=self
        )

    async def open(self) -> PostgresTaskStore:
        await super().open()
        return self

    async def __aenter__(self) -> PostgresTaskStore:
        return await self.open()

    # -- tasks ------------------------------------------------------------------------------

    async def commit(self, unit: Commit) -> TaskRecord:
        check_ledger(unit, self.capabilities.ledger)
        if unit.expected_version is None:  # a new task: `create_task`
            return await self._create(unit)
        await self._update(unit, unit.expected_version)
        return unit.record

    @guarded
    async def _create(self, unit: Commit) -> TaskRecord:
        record, outbox, received = unit.record, unit.outbox, unit.received
        task = record.task
        entry = [getattr(outbox, c) for c in OUTBOX_COLUMNS] if outbox is not None else None
        ledger = [getattr(received, c) for c in RECEIVED_COLUMNS] if received else None
        async with self._conn() as conn:
            try:
                found = await conn.fetchval(
                    f"SELECT {self.s}.create_task($1, $2, $3, $4, $5, $6, $7, $8, $9, $10,"
                    " $11, $12, $13, $14, $15, $16)",
                    task.id,
                    record.owner,
                    record.delegate,
                    task.context_id,
                    task.status.state.value,
                    task.status.timestamp or "",
                    record.version,
                    record.created_at,
                    record.updated_at,
                    record.task_json(),
                    [log_json(item, task) for item in unit.events],
                    unit.dedupe_key,
                    unit.dedupe_ttl,
                    entry,
                    ledger,
                    self.channel,
                )
            except UniqueViolationError as exc:
                raise _conflict(exc, record.id) from exc
            if found is None:
                return record
            row = await conn.fetchrow(
                f"SELECT {TASK_COLUMNS} FROM {self.s}.tasks WHERE id = $1", found
            )
        if row is None:  # pragma: no cover - the dedupe row and the task commit together
            raise StoreError(f"dedupe key names a missing task {found}")
        return _record(row)

    @guarded
    async def _update(self, unit: Commit, expected_version: int) -> None:
        """A move of a stored task, with the entry added and the one closed: `update_task`."""
        record, entry, close = unit.record, unit.outbox, unit.close
        task = record.task
        row = [getattr(entry, c) for c in OUTBOX_COLUMNS] if entry is not None else None
        closed_id, status, detail = (
            (close.handoff_id, close.status, close.detail) if close else (None, None, None)
        )
        async with self._conn() as conn:
            try:
                outcome = await conn.fetchval(
                    f"SELECT {self.s}.update_task($1, $2, $3, $4, $5, $6, $7, $8, $9, $10,"
                    " $11, $12, $13)",
                    task.id,
                    expected_version,
                    record.version,
                    task.status.state.value,
                    task.status.timestamp or "",
                    record.updated_at,
                    record.task_json(),
                    [log_json(item, task) for item in unit.events],
                    row,
                    closed_id,
                    status,
                    detail,
                    self.channel,
                )
            except UniqueViolationError as exc:
                raise _conflict(exc, record.id) from exc
        if outcome == "ok":
            return
        if outcome == "conflict":
            raise ConflictError(f"task {record.id} changed since version {expected_version}")
        raise ConflictError(f"handoff {closed_id} is not pending")

    @guarded
    async def get(self, task_id: str) -> TaskRecord | None:
        async with self._conn() as conn:
            row = await conn.fetchrow(
                f"SELECT {TASK_COLUMNS} FROM {self.s}.tasks WHERE id = $1", task_id
            )
        return _record(row) if row is not None else None

    @guarded
    async def find(self, dedupe_key: str) -> str | None:
        async with self._conn() as conn:
            found = await conn.fetchval(
                f"SELECT task_id FROM {self.s}.dedupe WHERE key = $1"
                " AND (expires IS NULL OR expires > clock_timestamp())",
                dedupe_key,
            )
        return str(found) if found is not None else None

    @guarded
    async def list_tasks(self, query: TaskQuery) -> TaskPage:
        where, params = ["true"], []

        def param(value: Any) -> str:
            params.append(value)
            return f"${len(params)}"

        if query.owner:
            owner = param(query.owner)
            where.append(f"(owner = {owner} OR delegate = {owner})")
        elif query.owner is not None:  # "" (no authentication): no task without a delegate
            where.append(f"owner = {param(query.owner)}")
        if query.tenant is not None:
            condition, values = tenant_filter(query.tenant)
            for value in values:
                condition = condition.replace("?", param(value), 1)
            where.append(condition)
        if query.context_id is not None:
            where.append(f"context_id = {param(query.context_id)}")
        states = query.states
        if states is not None:
            where.append(f"state = ANY({param(sorted(s.value for s in states))})")
        if query.status_after is not None:
            # A column and its index: no body is read, let alone parsed, to filter (a
            # status changes no later than its task's updated_at: that index narrows too).
            after = param(query.status_after)
            where.append(f"updated_at > {after} AND status_at > {after}")
        filters = " AND ".join(where)
        filter_params = len(params)
        page_where = filters
        if query.page_token:
            updated_at, task_id = decode_page_token(query.page_token)
            page_where += f" AND (updated_at, id) < ({param(updated_at)}, {param(task_id)})"
        limit = param(query.page_size + 1)
        budget = param(query.page_bytes)
        async with self._conn() as conn:
            rows = await conn.fetch(_page_sql(self.s, filters, page_where, limit, budget), *params)
            if rows:
                total = int(rows[0][6])
            else:  # past the last page: the total alone
                total = int(
                    await conn.fetchval(
                        f"SELECT count(*) FROM {self.s}.tasks WHERE {filters}",
                        *params[:filter_params],
                    )
                )
        records = [_record(row) for row in rows[: query.page_size]]
        token = ""
        if rows and int(rows[0][7]) > len(records):  # more than this page holds
            token = encode_page_token(records[-1].updated_at, records[-1].id)
        return TaskPage(records=records, next_page_token=token, total_size=total)

    @guarded
    async def events(self, task_id: str, after: int = 0) -> list[TaskEvent]:
        async with self._conn() as conn:
            rows = await conn.fetch(
                f"SELECT seq, body FROM {self.s}.task_events WHERE task_id = $1 AND seq > $2"
                " ORDER BY seq",
                task_id,
                after,
            )
            snapshot = None
            if needs_snapshot([row[1] for row in rows]):
                # Read after the events: every reference resolves.
                found = await conn.fetchrow(
                    f"SELECT {TASK_COLUMNS} FROM {self.s}.tasks WHERE id = $1", task_id
                )
                snapshot = _record(found).task if found is not None else None
        return [TaskEvent(seq, from_log(body, snapshot)) for seq, body in rows]

    def follow(self, task_id: str, after: int = 0) -> AsyncGenerator[TaskEvent, None]:
        return self.followers.follow(task_id, after, self.events, self.get)

    # -- RetentionStore -----------------------------------------------------------------------

    @guarded
    async def purge_finished(self, before: str, limit: int) -> int:
        s = self.s
        async with self._conn() as conn, conn.transaction():
            # Rows another replica is purging are skipped, not waited for.
            ids = [
                row[0]
                for row in await conn.fetch(
                    f"SELECT id FROM {s}.tasks t WHERE state = ANY($1) AND updated_at < $2"
                    f" AND NOT EXISTS (SELECT 1 FROM {s}.dedupe d WHERE d.task_id = t.id"
                    " AND d.expires > clock_timestamp())"
                    f" AND NOT EXISTS (SELECT 1 FROM {s}.outbox o WHERE o.task_id = t.id"
                    " AND o.status = 'pending')"
                    f" AND NOT EXISTS (SELECT 1 FROM {s}.push_configs p WHERE p.task_id = t.id"
                    " AND NOT p.done)"
                    " ORDER BY state, updated_at LIMIT $3 FOR UPDATE SKIP LOCKED",
                    _FINISHED,
                    before,
                    limit,
                )
            ]
            if ids:
                for table in ("task_events", "push_configs", "outbox", "received", "dedupe"):
                    await conn.execute(f"DELETE FROM {s}.{table} WHERE task_id = ANY($1)", ids)
                await conn.execute(f"DELETE FROM {s}.tasks WHERE id = ANY($1)", ids)
            # Ledger rows of handoffs that made no task (refused), as old.
            rows = await conn.fetchval(
                f"WITH gone AS (DELETE FROM {s}.received WHERE seq IN (SELECT seq FROM"
                f" {s}.received r WHERE at < $1 AND NOT EXISTS (SELECT 1 FROM {s}.tasks t"
                " WHERE t.id = r.task_id) ORDER BY at LIMIT $2 FOR UPDATE SKIP LOCKED)"
                " RETURNING 1) SELECT count(*) FROM gone",
                before,
                limit - len(ids),
            )
        return len(ids) + int(rows)


def _page_sql(s: str, filters: str, page_where: str, limit: str, budget: str) -> str:
    """One round trip for a page: its candidates by their sizes (octet_length reads a stored
    body's length, not the body), the rows of those within the byte budget (one at least),
    how many candidates there were, and the total as an uncorrelated subquery (run once)."""
    order = "ORDER BY updated_at DESC, id DESC"
    columns = ", ".join(f"t.{c}" for c in TASK_COLUMNS.split(", "))
    return (
        f"WITH page AS (SELECT id, updated_at, octet_length(body) AS size FROM {s}.tasks"
        f" WHERE {page_where} {order} LIMIT {limit}),"
        f" sized AS (SELECT id, size, count(*) OVER () AS found,"
        f" sum(size) OVER ({order}) AS upto, row_number() OVER ({order}) AS n FROM page)"
        f" SELECT {columns}, (SELECT count(*) FROM {s}.tasks WHERE {filters}), sized.found"
        f" FROM sized JOIN {s}.tasks t USING (id) WHERE sized.n = 1 OR sized.upto <= {budget}"
        " ORDER BY t.updated_at DESC, t.id DESC"
    )


def _conflict(exc: Any, task_id: str) -> ConflictError:
    constraint = getattr(exc, "constraint_name", "") or ""
    if constraint.startswith("outbox"):
        return ConflictError("handoff already checkpointed")
    return ConflictError(f"task {task_id} already exists")


def _record(row: Sequence[Any]) -> TaskRecord:
    body, owner, version, created_at, updated_at, delegate = tuple(row)[:6]
    return TaskRecord(
        task=Task.model_validate_json(body),
        owner=owner,
        version=version,
        created_at=created_at,
        updated_at=updated_at,
        delegate=delegate,
        json=body,
    )
