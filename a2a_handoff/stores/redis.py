"""Tasks, event streams, idempotency records, outbox, ledger and leases in Redis.

For several replicas of one agent sharing their state (`redis://HOST:PORT/DB`). Every write
that checks something — a task's version, a dedupe key, a pending outbox entry, a lease — is
ONE Lua script (`stores._redis_scripts`), so it is atomic across replicas; the snapshot, its
events and its indexes change together or not at all. Redis must run with `appendonly yes`,
`appendfsync always` and `maxmemory-policy noeviction` for the durability of the SQLite
default (an acknowledged write is on disk): the store refuses to open otherwise, unless the URL
says `durability=none` (`stores._redis_durability`).

Calls have timeouts (connect 1 s, read 2 s by default; `socket_connect_timeout` and
`socket_timeout` in the URL) and are not retried blindly (but for the first PING at open: a
Redis slow to answer gets 10 s): while Redis cannot be reached every call fails at once with
StoreDownError, one probe a half-second finding it back
(`stores._guard`). Idle pooled connections are checked before use, so the connections a Redis
restart broke are replaced rather than failing a call.

Key layout (prefix `a2a:<agent name>:` by default, `?prefix=` in the URL; several agents may
share a Redis with different prefixes, and a prefix names the agent that owns it in its
`agent` key, refusing another at start: `stores._owner`):
    t:<id>              hash: owner, delegate, context, state, version, created, updated, body,
                        stime (the status's timestamp: ListTasks filters on it, not the body)
    ev:<id>             stream of the task's events; entry id `<seq>-0`, field `e` = JSON
    d:<key>             string: the task a dedupe (idempotency) key created; expires (the
                        key is also kept in its task's hash, `dk`, for retention)
    i:all, i:o:<owner>, i:d:<delegate>, i:c:<context>, i:s:<state>    sets of task ids
    ob:<handoff id>     hash: an outbox entry; ob:ids, ob:c:<context>, ob:pend (pending):
                        zsets by creation; ob:last_done: when the last one completed
    rcv, rcv:c:<context>    lists of received-handoff ledger entries (JSON)
    l:<name>            string: a lease's holder, expiring with the lease
    agent               string: the name of the agent that owns the prefix
    id:<agent>          string: an identity document an older version kept (`keys move`)
    n:<id>              pub/sub channel: "task <id> has new events"
    layout              the key layout's version (a store of an earlier one is refused until
                        `db upgrade` moves it); layout:compat, the oldest code's it suits

The rooms: `stores._redis_ledger` (connection, lifecycle, layout version, outbox, ledger,
leases), `stores._redis_retention` (finished tasks purged),
`stores._redis_follow` (followers), `stores._redis_scripts` (the Lua), this module (tasks).
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, Sequence
from dataclasses import asdict
from typing import Any
from urllib.parse import parse_qs, parse_qsl, urlencode, urlsplit

from a2a_handoff.errors import ConflictError, StoreError
from a2a_handoff.protocol.models import Task
from a2a_handoff.stores._event_log import from_log, log_json, needs_snapshot
from a2a_handoff.stores._pages import Summary, encode_page_token, fitting, summary_page
from a2a_handoff.stores._redis_ledger import guarded, guarded_read, score
from a2a_handoff.stores._redis_retention import RedisRetention
from a2a_handoff.stores.base import (
    Capabilities,
    Commit,
    TaskEvent,
    TaskPage,
    TaskQuery,
    TaskRecord,
    check_ledger,
)

DEFAULT_IDEMPOTENCY_TTL = 24 * 3600.0
_SUMMARY_FIELDS = ("owner", "delegate", "context", "state", "updated", "stime")


def parse_redis_url(url: str) -> tuple[str, dict[str, Any]]:
    """`redis://HOST:PORT/DB?prefix=a2a:NAME:&idempotency_ttl=86400&durability=none` (query
    optional; `durability=none` accepts a Redis that may lose writes, see
    `stores._redis_durability`) → redis-py's URL (its own options kept) and ours."""
    parts = urlsplit(url)
    query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
    ours = ("prefix", "idempotency_ttl", "durability")
    rest = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k not in ours]
    base = parts._replace(query=urlencode(rest)).geturl()  # redis-py's own options stay
    try:
        ttl = float(query.get("idempotency_ttl", DEFAULT_IDEMPOTENCY_TTL))
    except ValueError:
        ttl = -1.0
    if not ttl > 0:
        raise StoreError(f"idempotency_ttl must be a positive number of seconds in {url!r}")
    durability = query.get("durability", "full")
    if durability not in ("full", "none"):
        raise StoreError(f"durability must be full (the default) or none in {url!r}")
    prefix = query.get("prefix")  # None: the agent's default (`claim`)
    return base, {"prefix": prefix, "idempotency_ttl": ttl, "durability": durability}


class RedisTaskStore(RedisRetention):
    """The store on Redis, shared by every replica of an agent (see the module docstring)."""

    def __init__(
        self,
        url: str = "redis://127.0.0.1:6379/0",
        *,
        prefix: str | None = None,
        idempotency_ttl: float = DEFAULT_IDEMPOTENCY_TTL,
        durability: str = "full",
    ) -> None:
        super().__init__(url, prefix, durability)
        self.idempotency_ttl = idempotency_ttl
        # Beyond the core (`stores.base`): never the agent's keys (whoever reaches Redis
        # would read them), but those an older version left here, until moved out.
        self.capabilities = Capabilities(
            ledger=self, push=self, leases=self, legacy_keys=self, schema=self, retention=self
        )

    @classmethod
    def from_url(cls, url: str) -> RedisTaskStore:
        """The store `url` names (`parse_redis_url`)."""
        base, options = parse_redis_url(url)
        return cls(base, **options)

    async def open(self) -> RedisTaskStore:
        await super().open()
        return self

    async def __aenter__(self) -> RedisTaskStore:
        return await self.open()

    # -- tasks ------------------------------------------------------------------------------

    def _index_keys(self, record: TaskRecord) -> tuple[str, str, str, str]:
        return (
            self._key(f"i:o:{record.owner}"),
            self._key(f"i:d:{record.delegate}") if record.delegate else "",
            self._key(f"i:c:{record.task.context_id}"),
            self._key(f"i:s:{record.state.value}"),
        )

    async def commit(self, unit: Commit) -> TaskRecord:
        check_ledger(unit, self.capabilities.ledger)
        if unit.expected_version is None:  # a new task: the `create` script
            return await self._create(unit)
        await self._update(unit, unit.expected_version)
        return unit.record

    @guarded
    async def _create(self, unit: Commit) -> TaskRecord:
        record, events, dedupe_key = unit.record, unit.events, unit.dedupe_key
        outbox, received = unit.outbox, unit.received
        ttl = self.idempotency_ttl if unit.dedupe_ttl is None else unit.dedupe_ttl
        owner_key, delegate_key, context_key, state_key = self._index_keys(record)
        keys = [
            self._key(f"t:{record.id}"),
            self._key(f"ev:{record.id}"),
            self._key(f"d:{dedupe_key}") if dedupe_key is not None else "",
            self._key("i:all"),
            owner_key,
            delegate_key,
            context_key,
            state_key,
            self._key(f"ob:{outbox.handoff_id}") if outbox is not None else "",
            self._key("ob:ids"),
            self._key("ob:pend"),
            self._key("rcv") if received is not None else "",
            self._key(f"ob:c:{outbox.context_id}") if outbox is not None else "",
            self._key(f"rcv:c:{received.context_id}") if received is not None else "",
        ]
        args: list[Any] = [
            record.id,
            record.owner,
            record.delegate,
            record.task.context_id,
            record.state.value,
            record.version,
            record.created_at,
            record.updated_at,
            record.task_json(),
            max(1, int(ttl * 1000)),
            self._key(f"n:{record.id}"),
            len(events),
            *(log_json(item, record.task) for item in events),
        ]
        if outbox is not None:
            args += [json.dumps(asdict(outbox)), score(outbox.created_at)]
        else:
            args += ["", 0]
        args.append(json.dumps(asdict(received)) if received is not None else "")
        args.append(record.task.status.timestamp or "")  # `stime`: ListTasks filters on it
        outcome, found = await self._scripts["create"](keys=keys, args=args)
        if outcome == "dup":
            existing = await self._get(found)
            if existing is None:
                raise StoreError(f"dedupe key names a missing task {found}")
            return existing
        if outcome == "exists":
            raise ConflictError(f"task {record.id} already exists")
        if outcome == "entry":
            raise ConflictError("handoff already checkpointed")
        return record

    @guarded
    async def _update(self, unit: Commit, expected_version: int) -> None:
        """A move of a stored task: the `update` script, in its mode for the commit's outbox
        part — an entry added (`checkpoint`, and one closed with it), or one closed
        (`terminate`)."""
        record, events, entry, close = unit.record, unit.events, unit.outbox, unit.close
        extra: list[Any] = []
        outbox_key = closed_key = ""
        if entry is not None:
            closing = (close.handoff_id, close.status, close.detail) if close else ("", "", "")
            extra = ["checkpoint", json.dumps(asdict(entry)), score(entry.created_at), *closing]
            outbox_key = self._key(f"ob:{entry.handoff_id}")
            closed_key = self._key(f"ob:{close.handoff_id}") if close else ""
        elif close is not None:
            extra = ["terminate", close.status, close.detail, close.handoff_id]
            outbox_key = self._key(f"ob:{close.handoff_id}")
        keys = [
            self._key(f"t:{record.id}"),
            self._key(f"ev:{record.id}"),
            self._key(f"i:s:{record.state.value}"),
            outbox_key,
            self._key("ob:pend"),
            self._key("i:s:"),
            self._key("ob:ids"),
            closed_key,
            self._key(f"ob:c:{record.task.context_id}"),
            self._key("ob:last_done"),
        ]
        args: list[Any] = [
            record.id,
            expected_version,
            record.version,
            record.state.value,
            record.updated_at,
            record.task_json(),
            self._key(f"n:{record.id}"),
            len(events),
            *(log_json(item, record.task) for item in events),
            *extra,
        ]
        if not extra:
            args.append("")
        args.append(record.task.status.timestamp or "")  # `stime`: ListTasks filters on it
        outcome = await self._scripts["update"](keys=keys, args=args)
        if outcome == "ok":
            return
        if outcome in ("missing", "conflict"):
            raise ConflictError(f"task {record.id} changed since version {expected_version}")
        if outcome == "entry":
            raise ConflictError("handoff already checkpointed")
        raise ConflictError("handoff is not pending")

    @guarded
    async def get(self, task_id: str) -> TaskRecord | None:
        return await self._get(task_id)

    async def _get(self, task_id: str) -> TaskRecord | None:
        row = await self._redis.hgetall(self._key(f"t:{task_id}"))
        return _record(row) if row else None

    @guarded
    async def find(self, dedupe_key: str) -> str | None:
        found = await self._redis.get(self._key(f"d:{dedupe_key}"))
        return str(found) if found is not None else None

    @guarded_read
    async def list_tasks(self, query: TaskQuery) -> TaskPage:
        redis = self._redis
        narrowing = []
        if query.context_id is not None:
            narrowing.append(self._key(f"i:c:{query.context_id}"))
        states = query.states
        if states is not None and len(states) == 1:
            narrowing.append(self._key(f"i:s:{next(iter(states)).value}"))
        # several states: the page filters them (page_of)
        if narrowing:
            ids = await redis.sinter(narrowing)
        elif query.owner is not None:
            ids = await redis.sunion(
                [self._key(f"i:o:{query.owner}"), self._key(f"i:d:{query.owner}")]
            )
        else:
            ids = await redis.smembers(self._key("i:all"))
        summaries = await _summaries(self, sorted(ids))
        page, token, total = summary_page(summaries, query)
        rows = await self._rows(page)
        kept = fitting((len(row["body"]) for row in rows), query.page_bytes)
        records = [_record(row) for row in rows[:kept]]  # only what the page holds is parsed
        if kept < len(rows):
            token = encode_page_token(records[-1].updated_at, records[-1].id)
        return TaskPage(records=records, next_page_token=token, total_size=total)

    async def _rows(self, ids: Sequence[str]) -> list[dict[str, str]]:
        if not ids:
            return []
        async with self._redis.pipeline(transaction=False) as pipe:
            for task_id in ids:
                pipe.hgetall(self._key(f"t:{task_id}"))
            rows = await pipe.execute()
        return [row for row in rows if row]

    @guarded
    async def events(self, task_id: str, after: int = 0) -> list[TaskEvent]:
        entries = await self._redis.xrange(self._key(f"ev:{task_id}"), f"{after + 1}-0", "+")
        snapshot = None
        if needs_snapshot([fields["e"] for _, fields in entries]):
            record = await self._get(task_id)  # read after the events: every ref resolves
            snapshot = record.task if record is not None else None
        return [
            TaskEvent(int(entry_id.split("-")[0]), from_log(fields["e"], snapshot))
            for entry_id, fields in entries
        ]

    def follow(self, task_id: str, after: int = 0) -> AsyncGenerator[TaskEvent, None]:
        return self.followers.follow(task_id, after, self.events, self.get)


async def _summaries(store: RedisTaskStore, ids: Sequence[str]) -> list[Summary]:
    """The candidates' index fields only (one pipelined round trip): what a list filters,
    orders and pages by, without a body."""
    async with store._redis.pipeline(transaction=False) as pipe:
        for task_id in ids:
            pipe.hmget(store._key(f"t:{task_id}"), *_SUMMARY_FIELDS)
        rows = await pipe.execute()
    summaries = []
    for task_id, row in zip(ids, rows, strict=True):
        if row[0] is None:  # deleted meanwhile
            continue
        owner, delegate, context, state, updated, stime = row
        if stime is None:  # written before `stime` was kept: read from its body once
            record = await store._get(task_id)
            stime = (record.task.status.timestamp or "") if record is not None else ""
        summaries.append(Summary(task_id, owner, delegate or "", context, state, updated, stime))
    return summaries


def _record(row: dict[str, str]) -> TaskRecord:
    body = row["body"]
    return TaskRecord(
        task=Task.model_validate_json(body),
        owner=row["owner"],
        version=int(row["version"]),
        created_at=row["created"],
        updated_at=row["updated"],
        delegate=row.get("delegate", ""),
        json=body,
    )
