"""The Redis store's connection and lifecycle, its outbox and ledger, and its leases.

`RedisBase` holds the client (with connect and read timeouts, and `StoreGuard` failing calls
fast while Redis cannot be reached; opening it loads the scripts, and refuses a store of an
earlier key layout until `db upgrade` moved it), and everything about handoffs: the outbox
(`ob:<id>` hashes, `ob:ids` and `ob:c:<context>` by creation, `ob:pend` the pending ones by
creation, `ob:last_done`), the ledger of handoffs received (`rcv`, `rcv:c:<context>`), and
the leases (`l:<name>`). Every question /health and ListHandoffs ask is answered from these
indexes: no read scans the ledger.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Sequence
from dataclasses import asdict
from typing import Any, Concatenate, ParamSpec, TypeVar
from urllib.parse import parse_qsl, urlencode, urlsplit

from a2a_handoff.errors import StoreDownError, StoreError, StoreTimeoutError, TrustError
from a2a_handoff.stores._guard import ServerPing, StoreGuard
from a2a_handoff.stores._owner import LEGACY_PREFIX, claim_prefix, prefix_for
from a2a_handoff.stores._redis_durability import check_durability
from a2a_handoff.stores._redis_follow import RedisFollowers
from a2a_handoff.stores._redis_layout import layout_status, set_layout, upgrade_layout
from a2a_handoff.stores._redis_scripts import ALL as SCRIPTS
from a2a_handoff.stores.base import HandoffStats, OutboxEntry, ReceivedEntry
from a2a_handoff.stores.versions import SchemaStatus, check_usable

try:
    import redis.asyncio as aioredis
    from redis.exceptions import ConnectionError as RedisConnectionError
    from redis.exceptions import RedisError
    from redis.exceptions import TimeoutError as RedisTimeoutError
except ImportError:  # pragma: no cover - the optional extra
    aioredis = None  # type: ignore[assignment]
    RedisError = RedisConnectionError = RedisTimeoutError = OSError  # type: ignore[assignment,misc]

UNREACHABLE: tuple[type[BaseException], ...] = (
    RedisConnectionError,
    RedisTimeoutError,
    OSError,  # TimeoutError included
)
_ENTRY_FIELDS = tuple(OutboxEntry.__dataclass_fields__)
CONNECT_TIMEOUT = 1.0
READ_TIMEOUT = 2.0
PROBE_TIMEOUT = 0.5  # a PING telling a slow read from a Redis that does not answer
OPEN_PATIENCE = 10.0  # seconds a Redis that accepts connections may take to answer at open

P = ParamSpec("P")
T = TypeVar("T")
B = TypeVar("B", bound="RedisBase")


def guarded(
    method: Callable[Concatenate[B, P], Coroutine[Any, Any, T]],
) -> Callable[Concatenate[B, P], Coroutine[Any, Any, T]]:
    """Run a store call through the guard: fail fast while Redis is down, and turn Redis's own
    errors (out of memory, a failing disk) into StoreError."""

    async def call(self: B, /, *args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return await self.guard.call(lambda: method(self, *args, **kwargs))
        except StoreDownError:
            raise
        except RedisError as exc:
            raise StoreError(f"Redis refused the call: {exc}") from exc

    call.__name__, call.__doc__ = method.__name__, method.__doc__
    return call


def guarded_read(
    method: Callable[Concatenate[B, P], Coroutine[Any, Any, T]],
) -> Callable[Concatenate[B, P], Coroutine[Any, Any, T]]:
    """`guarded`, for a read that may be slow (a list): when it times out but Redis answers a
    PING at once, the read was slow, not Redis down — that call alone fails
    (StoreTimeoutError) and the guard stays closed. A write is never judged so: a timed-out
    write may still have landed, and the outage retry must recognise it."""

    async def read(self: B, /, *args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return await method(self, *args, **kwargs)
        except RedisTimeoutError as exc:
            try:
                await asyncio.wait_for(self._redis.ping(), PROBE_TIMEOUT)
            except Exception:
                raise exc from None  # no answer either: unreachable
            raise StoreTimeoutError(
                "the store query ran past its time limit: ask for less (a filter, a smaller"
                " pageSize)"
            ) from exc

    read.__name__, read.__doc__ = method.__name__, method.__doc__
    return guarded(read)


def score(stamp: str) -> float:
    """An ISO timestamp as a sortable number (the outbox's creation order)."""
    digits = "".join(ch for ch in stamp if ch.isdigit())
    return float(digits[:17] or 0)


MAX_CONNECTIONS = 2000  # Redis connections per process (Redis serves 10,000 clients by default)


class RedisBase(ServerPing):
    """The connection, the scripts, and the outbox, ledger and leases (module docstring)."""

    shared = True

    def __init__(self, url: str, prefix: str | None, durability: str = "full") -> None:
        if aioredis is None:  # pragma: no cover - the optional extra
            raise StoreError(
                "the Redis store needs redis-py: pip install '.[redis]' in the a2a-handoff clone"
            )
        self.url = url
        self.explicit_prefix = prefix is not None  # else the agent's default (`claim`)
        self.agent: str | None = None  # the agent this store serves, once claimed
        self._unchecked = False  # claimed, its owner not yet checked
        self._use_prefix(prefix if prefix is not None else LEGACY_PREFIX)
        self.durability = durability  # "none": a Redis that may lose writes is accepted
        self.guard = StoreGuard(UNREACHABLE)
        self._client: Any = None
        self._scripts: dict[str, Any] = {}

    def _use_prefix(self, prefix: str) -> None:
        self.prefix = prefix
        self.followers = RedisFollowers(prefix + "n:")

    def claim(self, agent: str) -> None:
        """Serve the agent named `agent`: its default prefix unless the URL named one, and
        the next `open` records it as the prefix's owner or refuses another's (a store opened
        before keeps the prefix it has)."""
        self.agent = agent
        self._unchecked = True
        if not self.explicit_prefix and self._client is None:
            self._use_prefix(prefix_for(agent))

    # -- lifecycle ------------------------------------------------------------------------

    async def open(self) -> RedisBase:
        if self._client is not None:
            if self._unchecked and self.agent is not None:  # claimed once open: checked now
                await claim_prefix(self._client, self.prefix, True, self.agent)
                self._unchecked = False
            return self
        import redis.asyncio as aioredis
        from redis.asyncio.retry import Retry
        from redis.backoff import NoBackoff
        from redis.exceptions import ConnectionError as RedisConnectionError

        client = aioredis.Redis.from_url(
            self.url,  # options in the URL (socket_timeout=…) take precedence
            decode_responses=True,
            socket_connect_timeout=CONNECT_TIMEOUT,
            socket_timeout=READ_TIMEOUT,
            health_check_interval=1,  # an idle pooled connection is pinged before use
            # One immediate retry, only for a connection found broken (a restarted Redis):
            # a timed-out call may still run, so it is never sent twice.
            retry=Retry(NoBackoff(), 1, supported_errors=(RedisConnectionError,)),
            # redis-py 8 caps a pool at 100 connections and fails the 101st call at once
            # ("Too many connections": a handoff's delivery failed under load in the chaos
            # test); earlier versions had no cap. A cap well above a process's needs.
            max_connections=MAX_CONNECTIONS,
        )
        try:
            await _first_ping(client)
        except Exception as exc:
            await client.aclose()
            raise StoreError(f"cannot reach Redis at {self.url}: {exc}") from exc
        try:
            await check_durability(
                client, f"{self.url} (prefix {self.prefix})", accept_loss=self.durability == "none"
            )
            if self.agent is not None:
                self._use_prefix(
                    await claim_prefix(client, self.prefix, self.explicit_prefix, self.agent)
                )
                self._unchecked = False
        except BaseException:
            await client.aclose()
            raise
        try:
            status = await layout_status(client, self.prefix)
            if not status.exists:  # a new prefix: made at this code's layout
                await set_layout(client, self.prefix, status.code)
            else:
                check_usable(status, self.store_url)
        except BaseException:
            await client.aclose()
            raise
        self._client = client
        for name, source in SCRIPTS.items():
            self._scripts[name] = client.register_script(source)
        await self.followers.start(client)
        return self

    # -- the key layout's version (SchemaStore: `stores._redis_layout`) ---------------------

    @property
    def store_url(self) -> str:
        """The store's URL, its prefix named (what `db upgrade --store` takes)."""
        parts = urlsplit(self.url)
        query = urlencode([*parse_qsl(parts.query), ("prefix", self.prefix)])
        return parts._replace(query=query).geturl()

    async def schema_status(self) -> SchemaStatus:
        async with self._tool_client() as client:
            return await layout_status(client, self.prefix)

    async def upgrade(self) -> SchemaStatus:
        async with self._tool_client() as client:
            return await upgrade_layout(client, self.prefix, self.store_url)

    @contextlib.asynccontextmanager
    async def _tool_client(self) -> AsyncIterator[Any]:
        """A client of its own, for `db status` and `db upgrade`."""
        import redis.asyncio as aioredis

        client = aioredis.Redis.from_url(
            self.url,
            decode_responses=True,
            socket_connect_timeout=CONNECT_TIMEOUT,
            socket_timeout=READ_TIMEOUT,
        )
        try:
            yield client
        except RedisError as exc:
            raise StoreError(f"Redis at {self.url} refused the call: {exc}") from exc
        finally:
            await client.aclose()

    async def aclose(self) -> None:
        await self.followers.aclose()
        if self._client is not None:
            with contextlib.suppress(Exception):
                await self._client.aclose()
            self._client = None

    async def __aenter__(self) -> RedisBase:
        return await self.open()

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    @guarded
    async def _ping(self) -> None:
        await self._redis.ping()

    @property
    def _redis(self) -> Any:
        if self._client is None:
            raise StoreError("the Redis store is not open")
        return self._client

    def _key(self, suffix: str) -> str:
        return self.prefix + suffix

    async def _entries(self, ids: Sequence[str]) -> list[OutboxEntry]:
        if not ids:
            return []
        async with self._redis.pipeline(transaction=False) as pipe:
            for handoff_id in ids:
                pipe.hgetall(self._key(f"ob:{handoff_id}"))
            rows = await pipe.execute()
        return [
            OutboxEntry(**{name: str(row.get(name, "")) for name in _ENTRY_FIELDS})
            for row in rows
            if row
        ]

    @guarded
    async def outbox(
        self, *, status: str | None = None, context_id: str | None = None
    ) -> list[OutboxEntry]:
        redis = self._redis
        if status == "pending":
            ids = await redis.zrange(self._key("ob:pend"), 0, -1)
        elif context_id is not None:
            ids = await redis.zrange(self._key(f"ob:c:{context_id}"), 0, -1)
        else:
            ids = await redis.zrange(self._key("ob:ids"), 0, -1)
        entries = await self._entries(ids)
        return sorted(
            (
                e
                for e in entries
                if (status is None or e.status == status)
                and (context_id is None or e.context_id == context_id)
            ),
            key=lambda e: (e.created_at, e.handoff_id),
        )

    @guarded
    async def sent_page(
        self, *, owner: str | None, context_id: str | None, after: str, limit: int
    ) -> tuple[list[OutboxEntry], str]:
        index = self._key(f"ob:c:{context_id}" if context_id is not None else "ob:ids")
        start = int(after) if after.isdigit() else 0
        ids = await self._redis.zrange(index, start, start + limit)  # one more: is there more?
        entries = await self._entries(ids[:limit])
        mine = [e for e in entries if owner is None or e.owner == owner]
        return mine, str(start + limit) if len(ids) > limit else ""

    @guarded
    async def record_received(self, entry: ReceivedEntry) -> None:
        keys = [self._key("rcv"), self._key(f"rcv:c:{entry.context_id}")]
        await self._scripts["record_received"](keys=keys, args=[json.dumps(asdict(entry))])

    @guarded
    async def received(self, context_id: str | None = None) -> list[ReceivedEntry]:
        key = self._key(f"rcv:c:{context_id}" if context_id is not None else "rcv")
        rows = await self._redis.lrange(key, 0, -1)
        return [ReceivedEntry(**json.loads(row)) for row in rows]

    @guarded
    async def received_page(
        self, *, context_id: str | None, after: str, limit: int
    ) -> tuple[list[ReceivedEntry], str]:
        key = self._key(f"rcv:c:{context_id}" if context_id is not None else "rcv")
        start = int(after) if after.isdigit() else 0
        rows = await self._redis.lrange(key, start, start + limit)
        entries = [ReceivedEntry(**json.loads(row)) for row in rows[:limit]]
        return entries, str(start + limit) if len(rows) > limit else ""

    @guarded
    async def handoff_stats(self, stale_before: str) -> HandoffStats:
        pending_key = self._key("ob:pend")
        async with self._redis.pipeline(transaction=False) as pipe:
            pipe.zcard(pending_key)
            pipe.zcount(pending_key, "-inf", f"({score(stale_before)}")
            pipe.zrange(pending_key, 0, 0)
            pipe.get(self._key("ob:last_done"))
            pending, stale, oldest_ids, last_done = await pipe.execute()
        oldest = None
        if oldest_ids:
            oldest = await self._redis.hget(self._key(f"ob:{oldest_ids[0]}"), "created_at")
        return HandoffStats(int(pending), int(stale), oldest, last_done)

    # -- leases -----------------------------------------------------------------------------

    @guarded
    async def acquire(self, name: str, holder: str, ttl: float) -> bool:
        taken = await self._scripts["acquire"](
            keys=[self._key(f"l:{name}")], args=[holder, max(1, int(ttl * 1000))]
        )
        return bool(taken)

    @guarded
    async def release(self, name: str, holder: str) -> None:
        await self._scripts["release"](keys=[self._key(f"l:{name}")], args=[holder])

    @guarded
    async def holder(self, name: str) -> str | None:
        found = await self._redis.get(self._key(f"l:{name}"))
        return str(found) if found is not None else None

    # -- the agent's identity: never kept here ---------------------------------------------
    # Whoever reaches Redis would read an agent's private signing key and sign as it. Each
    # agent keeps its keys in a file of its own (mode 0600; its replicas use the same one) or
    # in $A2A_AGENT_KEY. A store made before that rule is refused until its keys are moved
    # out (`keys move`): `LegacyKeys`, its declared capability.

    async def refuse_legacy_identity(self, agent: str) -> None:
        """TrustError while Redis still holds `agent`'s private keys (an older version kept
        them here): the agent does not start until they are moved out."""
        if await self.legacy_identity(agent) is not None:
            raise TrustError(
                f"{agent}'s private signing keys are kept in Redis ({self._key(f'id:{agent}')}),"
                " where whoever reaches Redis reads them: move them into a key file with"
                f" `python -m a2a_handoff keys move --store URL --agent {agent} --key-file PATH`,"
                " then start the agent with --key-file PATH"
            )

    @guarded
    async def legacy_identity(self, agent: str) -> str | None:
        """The identity document an older version kept in Redis, if any (for `keys move`)."""
        found = await self._redis.get(self._key(f"id:{agent}"))
        return str(found) if found is not None else None

    @guarded
    async def drop_legacy_identity(self, agent: str, document: str) -> bool:
        """Delete the identity kept in Redis if it is still `document` (once it is moved)."""
        key = self._key(f"id:{agent}")
        if await self._redis.get(key) != document:
            return False
        return bool(await self._redis.delete(key))


async def _first_ping(client: Any) -> None:
    """PING at open. A Redis that answers late (an fsync of its append-only file stalled by
    a busy disk), or whose connection times out, is tried again until `OPEN_PATIENCE` has
    passed: the agent would otherwise exit at start over a pause its calls later ride out. A
    Redis that refuses the connection is reported at once."""
    deadline = time.monotonic() + OPEN_PATIENCE
    while True:
        try:
            await client.ping()
            return
        except RedisTimeoutError:
            if time.monotonic() >= deadline:
                raise
