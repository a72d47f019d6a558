"""The PostgreSQL store's connections and lifecycle, its outbox and ledger, and its leases.

`PostgresBase` holds a bounded pool (`pool_max` connections, 10 by default; a call waits at
most `acquire_timeout` for one, then fails with StoreError) with timeouts on connecting (1 s)
and on every statement (2 s); while PostgreSQL cannot be reached every call fails at once with
StoreDownError, one probe a half-second finding it back (`stores.guard`). Opening it creates
or migrates the schema (`stores.postgres_schema`) and starts the LISTENing connection
(`stores.postgres_follow`).

Leases are rows of `leases`, taken or renewed by ONE upsert that succeeds only for the holder
or once the lease expired — in the database's time, so replicas' clocks are never compared.
Every question /health and ListHandoffs ask is answered from an index: no read scans the
ledger.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any, Concatenate, ParamSpec, TypeVar
from urllib.parse import parse_qsl, urlencode, urlsplit

from a2a_handoff.errors import HandoffError, StoreDownError, StoreError, TrustError
from a2a_handoff.stores.base import HandoffStats, OutboxEntry, ReceivedEntry
from a2a_handoff.stores.guard import StoreGuard
from a2a_handoff.stores.postgres_follow import PostgresFollowers
from a2a_handoff.stores.postgres_schema import (
    MIGRATIONS,
    OUTBOX_COLUMNS,
    RECEIVED_COLUMNS,
    VERSION,
)
from a2a_handoff.trust.keys import NO_KEYS_IN_SHARED_STORE

try:
    import asyncpg
except ImportError:  # pragma: no cover - the optional extra
    asyncpg = None

CONNECT_TIMEOUT = 1.0
COMMAND_TIMEOUT = 2.0
ACQUIRE_TIMEOUT = 5.0
POOL_MAX = 10
_SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,47}")
_OURS = ("schema", "pool_max", "acquire_timeout", "command_timeout", "connect_timeout")

P = ParamSpec("P")
T = TypeVar("T")
B = TypeVar("B", bound="PostgresBase")


def _unreachable() -> tuple[type[BaseException], ...]:
    if asyncpg is None:  # pragma: no cover - the optional extra
        return (OSError,)
    errors = asyncpg.exceptions
    return (
        OSError,  # refused, reset, TimeoutError (a statement or a connect that timed out)
        errors.PostgresConnectionError,  # class 08: the connection failed or was lost
        errors.CannotConnectNowError,  # starting up or shutting down
        errors.AdminShutdownError,  # restarted under us
        errors.CrashShutdownError,
        errors.TooManyConnectionsError,
        errors.ConnectionDoesNotExistError,
        # A pooled connection left mid-operation by a cut (asyncpg's own state machine):
        # it is dropped and the call fails like any other that could not reach the server.
        errors.InternalClientError,
    )


def guarded(
    method: Callable[Concatenate[B, P], Coroutine[Any, Any, T]],
) -> Callable[Concatenate[B, P], Coroutine[Any, Any, T]]:
    """Run a store call through the guard: fail fast while PostgreSQL is down, and turn its
    other errors (a full disk, a read-only server) into StoreError."""

    async def call(self: B, /, *args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return await self.guard.call(lambda: method(self, *args, **kwargs))
        except (StoreError, TrustError):
            raise
        except asyncpg.PostgresError as exc:
            raise StoreError(f"PostgreSQL refused the call: {exc}") from exc
        except asyncpg.InterfaceError as exc:
            raise StoreError(f"PostgreSQL client error: {exc}") from exc

    call.__name__, call.__doc__ = method.__name__, method.__doc__
    return call


async def _keep_session(_conn: Any) -> None:
    """A pooled connection goes back as it is: the store sets no session state on one (no
    SET, LISTEN — that has a connection of its own — session advisory locks or cursors; the
    schema is named in every statement), so asyncpg's default reset (UNLISTEN, RESET ALL,
    CLOSE ALL, pg_advisory_unlock_all: a round trip on every release) is not needed. An open
    transaction is still rolled back by asyncpg itself."""


class PostgresBase:
    """The pool, the schema, and the outbox, ledger and leases (module docstring)."""

    shared = True

    def __init__(
        self,
        dsn: str,
        *,
        schema: str = "a2a",
        pool_max: int = POOL_MAX,
        acquire_timeout: float = ACQUIRE_TIMEOUT,
        command_timeout: float = COMMAND_TIMEOUT,
        connect_timeout: float = CONNECT_TIMEOUT,
    ) -> None:
        if asyncpg is None:  # pragma: no cover - the optional extra
            raise StoreError(
                "the PostgreSQL store needs asyncpg: pip install 'a2a-handoff[postgres]'"
            )
        if not _SCHEMA_NAME.fullmatch(schema):
            raise StoreError(
                f"schema {schema!r}: lower-case letters, digits and _ (48 at most),"
                " not starting with a digit"
            )
        self.dsn = dsn
        self.schema = schema
        self.s = f'"{schema}"'  # the quoted identifier, in every statement
        self.pool_max = pool_max
        self.acquire_timeout = acquire_timeout
        self.command_timeout = command_timeout
        self.connect_timeout = connect_timeout
        self.guard = StoreGuard(_unreachable())
        self.channel = f"a2a_events_{schema}"
        self.followers = PostgresFollowers(self.channel, self._connect)
        self._pool: Any = None
        self._lost_signal: asyncio.Future[None] | None = None  # set when one is lost

    @staticmethod
    def parse_url(url: str) -> tuple[str, dict[str, Any]]:
        """`postgresql://USER@HOST:PORT/DB?schema=a2a&pool_max=10&acquire_timeout=5&
        command_timeout=2&connect_timeout=1` → asyncpg's DSN (its own options kept) and ours."""
        parts = urlsplit(url)
        pairs = parse_qsl(parts.query, keep_blank_values=True)
        ours = {k: v for k, v in pairs if k in _OURS}
        rest = [(k, v) for k, v in pairs if k not in _OURS]
        dsn = parts._replace(query=urlencode(rest)).geturl()
        options: dict[str, Any] = {}
        if "schema" in ours:
            options["schema"] = ours["schema"]
        try:
            if "pool_max" in ours:
                options["pool_max"] = int(ours["pool_max"])
                if options["pool_max"] < 1:
                    raise ValueError
            for name in ("acquire_timeout", "command_timeout", "connect_timeout"):
                if name in ours:
                    options[name] = float(ours[name])
                    if not options[name] > 0:
                        raise ValueError
        except ValueError:
            raise StoreError(
                f"pool_max and the timeouts must be positive numbers in {url!r}"
            ) from None
        return dsn, options

    # -- lifecycle ------------------------------------------------------------------------

    async def _connect(self) -> Any:
        return await asyncpg.connect(
            self.dsn, timeout=self.connect_timeout, command_timeout=self.command_timeout
        )

    async def open(self) -> PostgresBase:
        if self._pool is not None:
            return self
        try:
            pool = await asyncpg.create_pool(
                self.dsn,
                min_size=0,  # no floor to restore while the server is down
                max_size=self.pool_max,
                timeout=self.connect_timeout,
                command_timeout=self.command_timeout,
                max_inactive_connection_lifetime=60.0,
                reset=_keep_session,
            )
        except Exception as exc:
            raise StoreError(f"cannot reach PostgreSQL at {_safe(self.dsn)}: {exc}") from exc
        try:
            await self._migrate(pool)
            await self.followers.start()
        except BaseException:
            await self.followers.aclose()
            await pool.close()
            raise
        self._pool = pool
        return self

    async def _migrate(self, pool: Any) -> None:
        """Create the schema, or bring it to `VERSION`, in one transaction (module docstring
        of `stores.postgres_schema`)."""
        async with pool.acquire() as conn, conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock(hashtext($1))", self.schema)
            await conn.execute(f"CREATE SCHEMA IF NOT EXISTS {self.s}")
            await conn.execute(
                f"CREATE TABLE IF NOT EXISTS {self.s}.schema_version (version integer NOT NULL)"
            )
            found = await conn.fetchval(f"SELECT version FROM {self.s}.schema_version")
            version = 0 if found is None else int(found)
            if version > VERSION:
                raise StoreError(
                    f"schema {self.schema} is at version {version}, newer than this version of"
                    f" a2a-handoff knows ({VERSION}): upgrade it before starting this replica"
                )
            for step in range(version, VERSION):
                await conn.execute(MIGRATIONS[step](self.s))
            if found is None:
                await conn.execute(f"INSERT INTO {self.s}.schema_version VALUES ($1)", VERSION)
            elif version != VERSION:
                await conn.execute(f"UPDATE {self.s}.schema_version SET version = $1", VERSION)

    async def aclose(self) -> None:
        await self.followers.aclose()
        if self._pool is not None:
            pool, self._pool = self._pool, None
            try:
                await pool.close()  # waits for calls to finish
            except Exception:
                pool.terminate()

    async def __aenter__(self) -> PostgresBase:
        return await self.open()

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    @contextlib.asynccontextmanager
    async def _conn(self) -> AsyncIterator[Any]:
        """A pooled connection, waited for `acquire_timeout` at most."""
        if self._pool is None:
            raise StoreError("the PostgreSQL store is not open")
        conn = await self._acquire()
        try:
            yield conn
        except (HandoffError, asyncpg.PostgresError) as exc:
            if isinstance(exc, self.guard.unreachable):
                self._drop(conn)
            raise  # otherwise the server answered (a constraint, say): the connection is fine
        except BaseException:
            # Timed out, cut, or cancelled mid-statement: the connection is in no state to be
            # reset and reused (a reset would wait on a server that does not answer).
            self._drop(conn)
            raise
        finally:
            with contextlib.suppress(Exception):  # a failed reset terminated the connection
                await self._pool.release(conn)

    async def _acquire(self) -> Any:
        """A connection from the pool, waited for `acquire_timeout` at most — or until another
        call finds the server not answering (its statement timed out, its connection was cut):
        this one then fails at once rather than wait out timeouts of its own."""
        pool = self._pool
        acquiring = asyncio.ensure_future(pool.acquire(timeout=self.acquire_timeout))
        if self._lost_signal is None:
            self._lost_signal = asyncio.get_running_loop().create_future()
        lost = self._lost_signal
        await asyncio.wait((acquiring, lost), return_when=asyncio.FIRST_COMPLETED)
        if not acquiring.done():
            acquiring.cancel()  # asyncpg's acquire gives the connection back when cancelled
            with contextlib.suppress(BaseException):
                await acquiring
            raise StoreDownError("PostgreSQL stopped answering while this call waited")
        try:
            return acquiring.result()
        except TimeoutError as exc:
            if pool.get_size() < self.pool_max or pool.get_idle_size():
                raise  # a connection could not be made: the server does not answer
            raise StoreError(
                f"every one of the {self.pool_max} pooled connections stayed busy for"
                f" {self.acquire_timeout:g} s (raise pool_max in the store URL)"
            ) from exc

    def _drop(self, conn: Any) -> None:
        """Terminate a connection a timeout or a cut left unusable; wake the calls waiting
        for a connection (`_acquire`)."""
        if self._lost_signal is not None:
            self._lost_signal.set_result(None)
            self._lost_signal = None
        with contextlib.suppress(Exception):  # the pool may have taken it back already
            conn.terminate()

    async def ping(self) -> bool:
        return await self.problem() is None

    async def problem(self) -> str | None:
        try:
            await self._ping()
        except StoreError as exc:
            return f"unreachable: {exc}"
        return None

    @guarded
    async def _ping(self) -> None:
        async with self._conn() as conn:
            await conn.fetchval("SELECT 1")

    def pool_use(self) -> dict[str, int]:
        """What /health tells of the pool: connections open, in use, and the bound."""
        pool = self._pool
        if pool is None:
            return {"open": 0, "inUse": 0, "max": self.pool_max}
        size = pool.get_size()
        return {"open": size, "inUse": size - pool.get_idle_size(), "max": self.pool_max}

    # -- outbox and ledger ----------------------------------------------------------------

    @guarded
    async def outbox(
        self, *, status: str | None = None, context_id: str | None = None
    ) -> list[OutboxEntry]:
        where, params = ["true"], []
        if status is not None:
            params.append(status)
            where.append(f"status = ${len(params)}")
        if context_id is not None:
            params.append(context_id)
            where.append(f"context_id = ${len(params)}")
        async with self._conn() as conn:
            rows = await conn.fetch(
                f"SELECT {', '.join(OUTBOX_COLUMNS)} FROM {self.s}.outbox"
                f" WHERE {' AND '.join(where)} ORDER BY created_at, handoff_id",
                *params,
            )
        return [OutboxEntry(*row) for row in rows]

    @guarded
    async def record_received(self, entry: ReceivedEntry) -> None:
        values = ", ".join(f"${i}" for i in range(1, len(RECEIVED_COLUMNS) + 1))
        async with self._conn() as conn:
            await conn.execute(
                f"INSERT INTO {self.s}.received ({', '.join(RECEIVED_COLUMNS)}) VALUES ({values})",
                *(getattr(entry, name) for name in RECEIVED_COLUMNS),
            )

    @guarded
    async def received(self, context_id: str | None = None) -> list[ReceivedEntry]:
        where, params = (
            ("context_id = $1", [context_id]) if context_id is not None else ("true", [])
        )
        async with self._conn() as conn:
            rows = await conn.fetch(
                f"SELECT {', '.join(RECEIVED_COLUMNS)} FROM {self.s}.received"
                f" WHERE {where} ORDER BY seq",
                *params,
            )
        return [ReceivedEntry(*row) for row in rows]

    @guarded
    async def sent_page(
        self, *, owner: str | None, context_id: str | None, after: str, limit: int
    ) -> tuple[list[OutboxEntry], str]:
        rows, token = await self._page(
            "outbox", OUTBOX_COLUMNS, {"owner": owner, "context_id": context_id}, after, limit
        )
        return [OutboxEntry(*row) for row in rows], token

    @guarded
    async def received_page(
        self, *, context_id: str | None, after: str, limit: int
    ) -> tuple[list[ReceivedEntry], str]:
        filters = {"context_id": context_id}
        rows, token = await self._page("received", RECEIVED_COLUMNS, filters, after, limit)
        return [ReceivedEntry(*row) for row in rows], token

    async def _page(
        self,
        table: str,
        columns: tuple[str, ...],
        filters: dict[str, str | None],
        after: str,
        limit: int,
    ) -> tuple[list[Any], str]:
        """One page of a ledger table in insertion (`seq`) order after the token `after`."""
        params: list[Any] = [int(after) if after.isdigit() else 0]
        where = ["seq > $1"]
        for column, value in filters.items():
            if value is not None:
                params.append(value)
                where.append(f"{column} = ${len(params)}")
        params.append(limit + 1)
        async with self._conn() as conn:
            rows = await conn.fetch(
                f"SELECT seq, {', '.join(columns)} FROM {self.s}.{table}"
                f" WHERE {' AND '.join(where)} ORDER BY seq LIMIT ${len(params)}",
                *params,
            )
        token = str(rows[limit - 1][0]) if len(rows) > limit else ""
        return [tuple(row)[1:] for row in rows[:limit]], token

    @guarded
    async def handoff_stats(self, stale_before: str) -> HandoffStats:
        # Two partial indexes answer it: pending entries by creation, done ones by update.
        s = self.s
        async with self._conn() as conn:
            row = await conn.fetchrow(
                f"SELECT (SELECT count(*) FROM {s}.outbox WHERE status = 'pending'),"
                f" (SELECT count(*) FROM {s}.outbox WHERE status = 'pending'"
                "   AND created_at < $1),"
                f" (SELECT min(created_at) FROM {s}.outbox WHERE status = 'pending'),"
                f" (SELECT max(updated_at) FROM {s}.outbox WHERE status = 'done')",
                stale_before,
            )
        pending, stale, oldest, last_done = row
        return HandoffStats(int(pending), int(stale), oldest, last_done)

    # -- leases -----------------------------------------------------------------------------

    @guarded
    async def acquire(self, name: str, holder: str, ttl: float) -> bool:
        async with self._conn() as conn:
            status = await conn.execute(
                f"INSERT INTO {self.s}.leases AS l (name, holder, expires)"
                " VALUES ($1, $2, clock_timestamp() + make_interval(secs => $3))"
                " ON CONFLICT (name) DO UPDATE SET holder = excluded.holder,"
                " expires = excluded.expires"
                " WHERE l.holder = excluded.holder OR l.expires <= clock_timestamp()",
                name,
                holder,
                float(ttl),
            )
        return bool(status == "INSERT 0 1")

    @guarded
    async def release(self, name: str, holder: str) -> None:
        async with self._conn() as conn:
            await conn.execute(
                f"DELETE FROM {self.s}.leases WHERE name = $1 AND holder = $2", name, holder
            )

    @guarded
    async def holder(self, name: str) -> str | None:
        async with self._conn() as conn:
            found = await conn.fetchval(
                f"SELECT holder FROM {self.s}.leases"
                " WHERE name = $1 AND expires > clock_timestamp()",
                name,
            )
        return str(found) if found is not None else None

    # -- the agent's identity: never kept here ---------------------------------------------
    # Whoever reaches the database would read an agent's private signing key and sign as
    # it. Each agent keeps its keys in a file of its own (mode 0600; its replicas use the
    # same one) or in $A2A_AGENT_KEY.

    async def load_identity(self, agent: str) -> str | None:
        raise TrustError(NO_KEYS_IN_SHARED_STORE)

    async def save_identity(self, agent: str, document: str, expected: str | None) -> bool:
        raise TrustError(NO_KEYS_IN_SHARED_STORE)


def _safe(dsn: str) -> str:
    """The DSN without its password, for messages."""
    parts = urlsplit(dsn)
    if parts.password is None:
        return dsn
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@")
    return parts._replace(netloc=netloc).geturl()
