"""Tasks, event streams, idempotency records, outbox, ledger and leases in Redis.

For several replicas of one agent sharing their state (`redis://HOST:PORT/DB`). Every write
that checks something — a task's version, a dedupe key, a pending outbox entry, a lease — is
ONE Lua script, so it is atomic across replicas; the snapshot, its events and its indexes
change together or not at all. Run Redis with `appendonly yes` and `appendfsync always`
for the durability of the SQLite default (an acknowledged write is on disk).

Key layout (prefix `a2a:` by default, `?prefix=` in the URL; several agents may share a
Redis with different prefixes):
    t:<id>              hash: owner, delegate, context, state, version, created, updated, body
    ev:<id>             stream of the task's events; entry id `<seq>-0`, field `e` = JSON
    d:<key>             string: the task a dedupe (idempotency) key created; expires
    i:all, i:o:<owner>, i:d:<delegate>, i:c:<context>, i:s:<state>    sets of task ids
    ob:<handoff id>     hash: an outbox entry;  ob:ids (zset by creation), ob:pending (set)
    rcv                 list of received-handoff ledger entries (JSON)
    l:<name>            string: a lease's holder, expiring with the lease
    id:<agent>          string: the agent's identity document (its signing keys)
    n:<id>              pub/sub channel: "task <id> has new events"

`follow()` reads the stream (XRANGE) and waits for a notification on `n:<id>`, published
by the writing script itself; a notification is only a hint — the stream is the truth, and
a follower also re-reads after a quiet second — so a lost notification delays, never loses.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncGenerator, Sequence
from dataclasses import asdict
from typing import Any
from urllib.parse import parse_qs, parse_qsl, urlencode, urlsplit

from a2a_handoff.errors import ConflictError, StoreError
from a2a_handoff.protocol.models import StreamResponse, Task
from a2a_handoff.stores.base import (
    OutboxEntry,
    ReceivedEntry,
    TaskEvent,
    TaskPage,
    TaskQuery,
    TaskRecord,
    check_create,
    check_update,
    page_of,
)

try:
    import redis.asyncio as aioredis
except ImportError:  # pragma: no cover - the optional extra
    aioredis = None  # type: ignore[assignment]

DEFAULT_IDEMPOTENCY_TTL = 24 * 3600.0
QUIET_SECONDS = 1.0  # a follower re-reads the stream after this long without a notification

# KEYS: task, events, dedupe|"", i:all, i:o, i:d|"", i:c, i:s, outbox|"", ob:ids, ob:pending,
#       rcv|""
# ARGV: id owner delegate context state version created updated body ttl_ms channel
#       n_events events… entry_json|"" created_score received_json|""
_CREATE = """
if KEYS[3] ~= '' then
  local found = redis.call('GET', KEYS[3])
  if found then return {'dup', found} end
end
if redis.call('EXISTS', KEYS[1]) == 1 then return {'exists', ''} end
if KEYS[9] ~= '' and redis.call('EXISTS', KEYS[9]) == 1 then return {'entry', ''} end
if KEYS[3] ~= '' then redis.call('SET', KEYS[3], ARGV[1], 'PX', ARGV[10]) end
redis.call('HSET', KEYS[1], 'owner', ARGV[2], 'delegate', ARGV[3], 'context', ARGV[4],
  'state', ARGV[5], 'version', ARGV[6], 'created', ARGV[7], 'updated', ARGV[8], 'body', ARGV[9])
local n = tonumber(ARGV[12])
for i = 1, n do redis.call('XADD', KEYS[2], i .. '-0', 'e', ARGV[12 + i]) end
redis.call('SADD', KEYS[4], ARGV[1])
redis.call('SADD', KEYS[5], ARGV[1])
if KEYS[6] ~= '' then redis.call('SADD', KEYS[6], ARGV[1]) end
redis.call('SADD', KEYS[7], ARGV[1])
redis.call('SADD', KEYS[8], ARGV[1])
if KEYS[9] ~= '' then
  local entry = cjson.decode(ARGV[13 + n])
  for field, value in pairs(entry) do redis.call('HSET', KEYS[9], field, value) end
  redis.call('ZADD', KEYS[10], ARGV[14 + n], entry['handoff_id'])
  redis.call('SADD', KEYS[11], entry['handoff_id'])
end
if KEYS[12] ~= '' then redis.call('RPUSH', KEYS[12], ARGV[15 + n]) end
redis.call('PUBLISH', ARGV[11], n)
return {'ok', ''}
"""

# KEYS: task, events, i:s:<new state>, outbox|"", ob:pending, prefix-of-state-sets, ob:ids,
#       closed outbox|""
# ARGV: id expected new_version state updated body channel n_events events…
#       mode ("" | "checkpoint" | "terminate")
#       [entry_json created_score closed_id|"" status detail | status detail handoff_id]
_UPDATE = """
local current = redis.call('HMGET', KEYS[1], 'version', 'state')
if not current[1] then return 'missing' end
if tonumber(current[1]) ~= tonumber(ARGV[2]) then return 'conflict' end
local n = tonumber(ARGV[8])
local mode = ARGV[9 + n]
if mode == 'checkpoint' then
  if redis.call('EXISTS', KEYS[4]) == 1 then return 'entry' end
  if ARGV[12 + n] ~= '' and redis.call('SISMEMBER', KEYS[5], ARGV[12 + n]) == 0 then
    return 'not_pending'
  end
elseif mode == 'terminate' then
  if redis.call('SISMEMBER', KEYS[5], ARGV[12 + n]) == 0 then return 'not_pending' end
end
redis.call('HSET', KEYS[1], 'state', ARGV[4], 'version', ARGV[3], 'updated', ARGV[5],
  'body', ARGV[6])
local seq = tonumber(ARGV[2])
for i = 1, n do redis.call('XADD', KEYS[2], (seq + i) .. '-0', 'e', ARGV[8 + i]) end
if current[2] ~= ARGV[4] then
  redis.call('SREM', KEYS[6] .. current[2], ARGV[1])
  redis.call('SADD', KEYS[3], ARGV[1])
end
if mode == 'checkpoint' then
  local entry = cjson.decode(ARGV[10 + n])
  for field, value in pairs(entry) do redis.call('HSET', KEYS[4], field, value) end
  redis.call('ZADD', KEYS[7], ARGV[11 + n], entry['handoff_id'])
  redis.call('SADD', KEYS[5], entry['handoff_id'])
  if ARGV[12 + n] ~= '' then
    redis.call('HSET', KEYS[8], 'status', ARGV[13 + n], 'detail', ARGV[14 + n],
      'updated_at', ARGV[5])
    redis.call('SREM', KEYS[5], ARGV[12 + n])
  end
elseif mode == 'terminate' then
  redis.call('HSET', KEYS[4], 'status', ARGV[10 + n], 'detail', ARGV[11 + n],
    'updated_at', ARGV[5])
  redis.call('SREM', KEYS[5], ARGV[12 + n])
end
redis.call('PUBLISH', ARGV[7], n)
return 'ok'
"""

_ACQUIRE = """
local holder = redis.call('GET', KEYS[1])
if holder and holder ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
"""

_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
return 1
"""

_ENTRY_FIELDS = tuple(OutboxEntry.__dataclass_fields__)


_SWAP = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[2])
  return 1
end
return 0
"""


def _score(stamp: str) -> float:
    """An ISO timestamp as a sortable number (the outbox's creation order)."""
    digits = "".join(ch for ch in stamp if ch.isdigit())
    return float(digits[:17] or 0)


class RedisTaskStore:
    """The store on Redis, shared by every replica of an agent (see the module docstring)."""

    shared = True

    def __init__(
        self,
        url: str = "redis://127.0.0.1:6379/0",
        *,
        prefix: str = "a2a:",
        idempotency_ttl: float = DEFAULT_IDEMPOTENCY_TTL,
    ) -> None:
        if aioredis is None:  # pragma: no cover - the optional extra
            raise StoreError("the Redis store needs redis-py: pip install 'a2a-handoff[redis]'")
        self.url = url
        self.prefix = prefix
        self.idempotency_ttl = idempotency_ttl
        self._client: Any = None
        self._pubsub: Any = None
        self._listener: asyncio.Task[None] | None = None
        self._waiters: dict[str, set[asyncio.Event]] = {}
        self._scripts: dict[str, Any] = {}

    @classmethod
    def from_url(cls, url: str) -> RedisTaskStore:
        """`redis://HOST:PORT/DB?prefix=a2a:&idempotency_ttl=86400` (query optional)."""
        parts = urlsplit(url)
        query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        ours = ("prefix", "idempotency_ttl")
        rest = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k not in ours]
        base = parts._replace(query=urlencode(rest)).geturl()  # redis-py's own options stay
        try:
            ttl = float(query.get("idempotency_ttl", DEFAULT_IDEMPOTENCY_TTL))
        except ValueError:
            ttl = -1.0
        if not ttl > 0:
            raise StoreError(f"idempotency_ttl must be a positive number of seconds in {url!r}")
        return cls(base, prefix=query.get("prefix", "a2a:"), idempotency_ttl=ttl)

    # -- lifecycle ------------------------------------------------------------------------

    async def open(self) -> RedisTaskStore:
        if self._client is not None:
            return self
        assert aioredis is not None
        client = aioredis.Redis.from_url(self.url, decode_responses=True)
        try:
            await client.ping()
        except Exception as exc:
            await client.aclose()
            raise StoreError(f"cannot reach Redis at {self.url}: {exc}") from exc
        self._client = client
        for name, source in (
            ("create", _CREATE),
            ("update", _UPDATE),
            ("acquire", _ACQUIRE),
            ("release", _RELEASE),
        ):
            self._scripts[name] = client.register_script(source)
        self._pubsub = client.pubsub(ignore_subscribe_messages=True)
        await self._pubsub.psubscribe(self._key("n:*"))
        self._listener = asyncio.create_task(self._listen(), name="redis-notifications")
        return self

    async def aclose(self) -> None:
        if self._listener is not None:
            self._listener.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._listener
            self._listener = None
        if self._pubsub is not None:
            with contextlib.suppress(Exception):
                await self._pubsub.aclose()
            self._pubsub = None
        if self._client is not None:
            with contextlib.suppress(Exception):
                await self._client.aclose()
            self._client = None

    async def __aenter__(self) -> RedisTaskStore:
        return await self.open()

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def ping(self) -> bool:
        try:
            return bool(await self._redis.ping())
        except Exception:
            return False

    @property
    def _redis(self) -> Any:
        if self._client is None:
            raise StoreError("the Redis store is not open")
        return self._client

    def _key(self, suffix: str) -> str:
        return self.prefix + suffix

    async def _listen(self) -> None:
        channel_start = len(self._key("n:"))
        while True:
            try:
                message = await self._pubsub.get_message(timeout=1.0)
            except asyncio.CancelledError:
                raise
            except Exception:
                await asyncio.sleep(0.2)  # reconnecting; followers re-read meanwhile
                continue
            if message is None or message.get("type") != "pmessage":
                continue
            task_id = str(message["channel"])[channel_start:]
            for waiter in self._waiters.get(task_id, ()):
                waiter.set()

    # -- tasks ------------------------------------------------------------------------------

    def _index_keys(self, record: TaskRecord) -> tuple[str, str, str, str]:
        return (
            self._key(f"i:o:{record.owner}"),
            self._key(f"i:d:{record.delegate}") if record.delegate else "",
            self._key(f"i:c:{record.task.context_id}"),
            self._key(f"i:s:{record.state.value}"),
        )

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
        ttl = self.idempotency_ttl if dedupe_ttl is None else dedupe_ttl
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
            self._key("ob:pending"),
            self._key("rcv") if received is not None else "",
        ]
        args: list[Any] = [
            record.id, record.owner, record.delegate, record.task.context_id,
            record.state.value, record.version, record.created_at, record.updated_at,
            record.task_json(), max(1, int(ttl * 1000)), self._key(f"n:{record.id}"),
            len(events), *(item.dump_json() for item in events),
        ]  # fmt: skip
        if outbox is not None:
            args += [json.dumps(asdict(outbox)), _score(outbox.created_at)]
        else:
            args += ["", 0]
        args.append(json.dumps(asdict(received)) if received is not None else "")
        outcome, found = await self._scripts["create"](keys=keys, args=args)
        if outcome == "dup":
            existing = await self.get(found)
            if existing is None:
                raise StoreError(f"dedupe key names a missing task {found}")
            return existing
        if outcome == "exists":
            raise ConflictError(f"task {record.id} already exists")
        if outcome == "entry":
            raise ConflictError("handoff already checkpointed")
        return record

    async def _update(
        self,
        record: TaskRecord,
        events: Sequence[StreamResponse],
        expected_version: int,
        extra: Sequence[Any] = (),
        outbox_key: str = "",
        closed_key: str = "",
    ) -> None:
        check_update(record, events, expected_version)
        keys = [
            self._key(f"t:{record.id}"),
            self._key(f"ev:{record.id}"),
            self._key(f"i:s:{record.state.value}"),
            outbox_key,
            self._key("ob:pending"),
            self._key("i:s:"),
            self._key("ob:ids"),
            closed_key,
        ]
        args: list[Any] = [
            record.id, expected_version, record.version, record.state.value, record.updated_at,
            record.task_json(), self._key(f"n:{record.id}"), len(events),
            *(item.dump_json() for item in events), *extra,
        ]  # fmt: skip
        if not extra:
            args.append("")
        outcome = await self._scripts["update"](keys=keys, args=args)
        if outcome == "ok":
            return
        if outcome in ("missing", "conflict"):
            raise ConflictError(f"task {record.id} changed since version {expected_version}")
        if outcome == "entry":
            raise ConflictError("handoff already checkpointed")
        raise ConflictError("handoff is not pending")

    async def update(
        self, record: TaskRecord, events: Sequence[StreamResponse], *, expected_version: int
    ) -> None:
        await self._update(record, events, expected_version)

    async def get(self, task_id: str) -> TaskRecord | None:
        row = await self._redis.hgetall(self._key(f"t:{task_id}"))
        return _record(row) if row else None

    async def find(self, dedupe_key: str) -> str | None:
        found = await self._redis.get(self._key(f"d:{dedupe_key}"))
        return str(found) if found is not None else None

    async def list_tasks(self, query: TaskQuery) -> TaskPage:
        redis = self._redis
        narrowing = []
        if query.context_id is not None:
            narrowing.append(self._key(f"i:c:{query.context_id}"))
        if query.state is not None:
            narrowing.append(self._key(f"i:s:{query.state.value}"))
        if narrowing:
            ids = await redis.sinter(narrowing)
        elif query.owner is not None:
            ids = await redis.sunion(
                [self._key(f"i:o:{query.owner}"), self._key(f"i:d:{query.owner}")]
            )
        else:
            ids = await redis.smembers(self._key("i:all"))
        records = await self._records(sorted(ids))
        return page_of(records, query)

    async def _records(self, ids: Sequence[str]) -> list[TaskRecord]:
        if not ids:
            return []
        async with self._redis.pipeline(transaction=False) as pipe:
            for task_id in ids:
                pipe.hgetall(self._key(f"t:{task_id}"))
            rows = await pipe.execute()
        return [_record(row) for row in rows if row]

    async def events(self, task_id: str, after: int = 0) -> list[TaskEvent]:
        entries = await self._redis.xrange(self._key(f"ev:{task_id}"), f"{after + 1}-0", "+")
        return [
            TaskEvent(int(entry_id.split("-")[0]), StreamResponse.model_validate_json(fields["e"]))
            for entry_id, fields in entries
        ]

    def follow(self, task_id: str, after: int = 0) -> AsyncGenerator[TaskEvent, None]:
        return self._follow(task_id, after)

    async def _follow(self, task_id: str, after: int) -> AsyncGenerator[TaskEvent, None]:
        wakeup = asyncio.Event()
        self._waiters.setdefault(task_id, set()).add(wakeup)
        try:
            last = after
            first = True
            while True:
                batch = await self.events(task_id, last)
                if first and not batch:
                    record = await self.get(task_id)
                    if record is None or (record.state.terminal and record.version <= last):
                        return
                first = False
                for event in batch:
                    yield event
                    last = event.seq
                    if event.final:
                        return
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(wakeup.wait(), QUIET_SECONDS)
                wakeup.clear()
        finally:
            waiters = self._waiters.get(task_id)
            if waiters is not None:
                waiters.discard(wakeup)
                if not waiters:
                    del self._waiters[task_id]

    # -- outbox and ledger ------------------------------------------------------------------

    async def checkpoint(
        self,
        record: TaskRecord,
        events: Sequence[StreamResponse],
        *,
        expected_version: int,
        entry: OutboxEntry,
        close: tuple[str, str, str] | None = None,
    ) -> None:
        closed_id, status, detail = close or ("", "", "")
        extra = [
            "checkpoint", json.dumps(asdict(entry)), _score(entry.created_at),
            closed_id, status, detail,
        ]  # fmt: skip
        await self._update(
            record, events, expected_version, extra, self._key(f"ob:{entry.handoff_id}"),
            self._key(f"ob:{closed_id}") if closed_id else "",
        )  # fmt: skip

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
        extra = ["terminate", status, detail, handoff_id]
        await self._update(record, events, expected_version, extra, self._key(f"ob:{handoff_id}"))

    async def outbox(
        self, *, status: str | None = None, context_id: str | None = None
    ) -> list[OutboxEntry]:
        redis = self._redis
        if status == "pending":
            ids = list(await redis.smembers(self._key("ob:pending")))
        else:
            ids = list(await redis.zrange(self._key("ob:ids"), 0, -1))
        async with redis.pipeline(transaction=False) as pipe:
            for handoff_id in ids:
                pipe.hgetall(self._key(f"ob:{handoff_id}"))
            rows = await pipe.execute()
        entries = [
            OutboxEntry(**{name: str(row.get(name, "")) for name in _ENTRY_FIELDS})
            for row in rows
            if row
        ]
        return sorted(
            (
                e
                for e in entries
                if (status is None or e.status == status)
                and (context_id is None or e.context_id == context_id)
            ),
            key=lambda e: (e.created_at, e.handoff_id),
        )

    async def record_received(self, entry: ReceivedEntry) -> None:
        await self._redis.rpush(self._key("rcv"), json.dumps(asdict(entry)))

    async def received(self, context_id: str | None = None) -> list[ReceivedEntry]:
        rows = await self._redis.lrange(self._key("rcv"), 0, -1)
        entries = [ReceivedEntry(**json.loads(row)) for row in rows]
        return [e for e in entries if context_id is None or e.context_id == context_id]

    # -- the agent's identity ------------------------------------------------------------------

    async def load_identity(self, agent: str) -> str | None:
        found = await self._redis.get(self._key(f"id:{agent}"))
        return str(found) if found is not None else None

    async def save_identity(self, agent: str, document: str, expected: str | None) -> bool:
        """Check-and-set: every replica of an agent shares one identity."""
        key = self._key(f"id:{agent}")
        if expected is None:
            return bool(await self._redis.set(key, document, nx=True))
        swapped = await self._redis.eval(_SWAP, 1, key, expected, document)
        return bool(swapped)

    # -- leases -----------------------------------------------------------------------------

    async def acquire(self, name: str, holder: str, ttl: float) -> bool:
        taken = await self._scripts["acquire"](
            keys=[self._key(f"l:{name}")], args=[holder, max(1, int(ttl * 1000))]
        )
        return bool(taken)

    async def release(self, name: str, holder: str) -> None:
        await self._scripts["release"](keys=[self._key(f"l:{name}")], args=[holder])

    async def holder(self, name: str) -> str | None:
        found = await self._redis.get(self._key(f"l:{name}"))
        return str(found) if found is not None else None


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
