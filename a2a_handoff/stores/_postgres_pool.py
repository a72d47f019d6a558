"""The PostgreSQL store's connections and lifecycle.

`PostgresPool` holds a bounded pool (`pool_max` connections, 10 by default; a call waits at
most `acquire_timeout` for one, then fails with StoreError) with timeouts on connecting (1 s)
and on every statement (`command_timeout`, 2 s). A slow statement is not an outage: the
server itself cancels a statement past `command_timeout` (its `statement_timeout`), and that
call alone fails with StoreTimeoutError; the client gives up `SERVER_GRACE` later, and only
that — a server that does not answer — counts as unreachable. While PostgreSQL cannot be
reached every call fails at once with StoreDownError, one probe a half-second finding it back
(`stores._guard`). /health probes on a connection of its own, so a pool busy with slow calls
does not read as a server down. Opening it creates or migrates the schema
(`stores._postgres_schema`), claims it for the agent (`stores._owner`) and starts the
LISTENing connection (`stores._postgres_follow`). `guarded` wraps every call that reaches
the server.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any, Concatenate, ParamSpec, TypeVar
from urllib.parse import parse_qsl, urlencode, urlsplit

from a2a_handoff.errors import (
    HandoffError,
    StoreDownError,
    StoreError,
    StoreTimeoutError,
    TrustError,
)
from a2a_handoff.stores._guard import ServerPing, StoreGuard
from a2a_handoff.stores._owner import LEGACY_SCHEMA, schema_for
from a2a_handoff.stores._postgres_follow import PostgresFollowers
from a2a_handoff.stores._postgres_migrate import (
    build_online,
    keep_legacy,
    migrate,
    read_status,
    upgrade,
)
from a2a_handoff.stores.versions import SchemaStatus

try:
    import asyncpg
except ImportError:  # pragma: no cover - the optional extra
    asyncpg = None

CONNECT_TIMEOUT = 1.0
COMMAND_TIMEOUT = 2.0
ACQUIRE_TIMEOUT = 5.0
POOL_MAX = 10
SERVER_GRACE = 0.5  # past the server's own cancellation: the client stops waiting
_SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,47}")
_OURS = ("schema", "pool_max", "acquire_timeout", "command_timeout", "connect_timeout")

P = ParamSpec("P")
T = TypeVar("T")
B = TypeVar("B", bound="PostgresPool")


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
        except asyncpg.QueryCanceledError as exc:  # statement_timeout: this call only
            raise StoreTimeoutError(
                f"the store query ran past its {self.command_timeout:g} s limit and was"
                " cancelled: ask for less (a filter, a smaller pageSize)"
            ) from exc
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


class PostgresPool(ServerPing):
    """The pool and the schema (module docstring)."""

    shared = True

    def __init__(
        self,
        dsn: str,
        *,
        schema: str | None = None,
        pool_max: int = POOL_MAX,
        acquire_timeout: float = ACQUIRE_TIMEOUT,
        command_timeout: float = COMMAND_TIMEOUT,
        connect_timeout: float = CONNECT_TIMEOUT,
    ) -> None:
        if asyncpg is None:  # pragma: no cover - the optional extra
            raise StoreError(
                "the PostgreSQL store needs asyncpg: pip install '.[postgres]' in the"
                " a2a-handoff clone"
            )
        self.dsn = dsn
        self.explicit_schema = schema is not None  # else the agent's default (`claim`)
        self.agent: str | None = None  # the agent this store serves, once claimed
        self._unchecked = False  # claimed, its owner not yet checked
        self._use_schema(schema or LEGACY_SCHEMA)
        self.pool_max = pool_max
        self.acquire_timeout = acquire_timeout
        self.command_timeout = command_timeout
        self.connect_timeout = connect_timeout
        self.guard = StoreGuard(_unreachable())
        self._pool: Any = None
        self._probe: Any = None  # /health's own connection
        self._probing = asyncio.Lock()
        self._lost_signal: asyncio.Future[None] | None = None  # set when one is lost
        self._releasing: set[asyncio.Future[None]] = set()  # connections going back (_abandon)

    def _use_schema(self, schema: str) -> None:
        self.schema = _checked(schema)
        self.s = f'"{schema}"'  # the quoted identifier, in every statement
        self.channel = f"a2a_events_{schema}"
        self.followers = PostgresFollowers(self.channel, self._connect)

    def claim(self, agent: str) -> None:
        """Serve the agent named `agent`: its default schema unless the URL named one, and
        the next `open` records it as the schema's owner or refuses another's (a store opened
        before keeps the schema it has)."""
        self.agent = agent
        self._unchecked = True
        if not self.explicit_schema and self._pool is None:
            self._use_schema(schema_for(agent))

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

    def _settings(self) -> dict[str, Any]:
        """The connection's options: the server cancels a statement past `command_timeout`
        (a slow call fails alone), the client waits `SERVER_GRACE` longer (then the server
        does not answer)."""
        return {
            "timeout": self.connect_timeout,
            "command_timeout": self.command_timeout + SERVER_GRACE,
            "server_settings": {"statement_timeout": str(int(self.command_timeout * 1000))},
        }

    async def _connect(self) -> Any:
        return await asyncpg.connect(self.dsn, **self._settings())

    async def open(self) -> PostgresPool:
        if self._pool is not None:
            if self._unchecked:  # claimed once open: the owner checked now
                async with self._pool.acquire() as conn, conn.transaction():
                    await migrate(conn, self.schema, self.agent, self.store_url)
                self._unchecked = False
            return self
        try:
            pool = await asyncpg.create_pool(
                self.dsn,
                min_size=0,  # no floor to restore while the server is down
                max_size=self.pool_max,
                **self._settings(),
                max_inactive_connection_lifetime=60.0,
                reset=_keep_session,
            )
        except Exception as exc:
            raise StoreError(f"cannot reach PostgreSQL at {_safe(self.dsn)}: {exc}") from exc
        try:
            await self._migrate(pool)
            await self.followers.start()
        except BaseException as exc:
            await self.followers.aclose()
            await pool.close()
            said = _opening_error(exc, self.dsn)
            raise said from (None if said is exc else exc)
        self._pool = pool
        return self

    async def _migrate(self, pool: Any) -> None:
        """Choose the schema (the old default kept for its agent), then create or migrate it
        and claim it for the agent, in one transaction (`stores._postgres_migrate`)."""
        if self.agent is not None and not self.explicit_schema:
            async with pool.acquire() as conn:
                chosen = await keep_legacy(conn, self.schema, self.agent)
            if chosen != self.schema:
                self._use_schema(chosen)
        async with pool.acquire() as conn, conn.transaction():
            await migrate(conn, self.schema, self.agent, self.store_url)
        self._unchecked = False

    @property
    def store_url(self) -> str:
        """The store's URL, its schema named (what `db upgrade --store` takes)."""
        parts = urlsplit(self.dsn)
        query = urlencode([*parse_qsl(parts.query), ("schema", self.schema)])
        return parts._replace(query=query).geturl()

    # -- SchemaStore ------------------------------------------------------------------------

    async def schema_status(self) -> SchemaStatus:
        async with self._tool_conn() as conn:
            return await read_status(conn, self.schema)

    async def upgrade(self) -> SchemaStatus:
        async with self._tool_conn() as conn:
            await build_online(conn, self.schema)  # indexes only added: writes go on
            async with conn.transaction():
                return await upgrade(conn, self.schema, self.store_url)

    @contextlib.asynccontextmanager
    async def _tool_conn(self) -> AsyncIterator[Any]:
        """A connection of its own, for `db status` and `db upgrade` (no pool, no claim; the
        agent's default schema when it was claimed)."""
        try:
            conn = await self._connect()
        except Exception as exc:  # in one line with its fix, as when the agent opens it
            said = _opening_error(exc, self.dsn)
            if said is exc:
                raise StoreError(f"cannot reach PostgreSQL at {_safe(self.dsn)}: {exc}") from exc
            raise said from None
        try:
            yield conn
        except asyncpg.PostgresError as exc:
            raise StoreError(f"PostgreSQL refused the call: {exc}") from exc
        finally:
            await conn.close()

    async def aclose(self) -> None:
        await self.followers.aclose()
        if self._probe is not None:
            probe, self._probe = self._probe, None
            probe.terminate()
        if self._pool is not None:
            pool, self._pool = self._pool, None
            try:
                await pool.close()  # waits for calls to finish
            except Exception:
                pool.terminate()

    async def __aenter__(self) -> PostgresPool:
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
        try:
            await asyncio.wait((acquiring, lost), return_when=asyncio.FIRST_COMPLETED)
        except BaseException:  # cancelled while waiting: the wait goes on without a caller
            self._abandon(acquiring)
            raise
        if not acquiring.done():
            self._abandon(acquiring)
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

    def _abandon(self, acquiring: asyncio.Future[Any]) -> None:
        """Stop waiting for a connection nobody will use: a connection the wait got anyway (it
        came in before the cancellation did) goes back to the pool rather than stay taken."""
        acquiring.cancel()
        pool = self._pool

        def give_back(done: asyncio.Future[Any]) -> None:
            if pool is None or done.cancelled() or done.exception() is not None:
                return
            releasing = asyncio.ensure_future(pool.release(done.result()))
            self._releasing.add(releasing)
            releasing.add_done_callback(self._releasing.discard)

        acquiring.add_done_callback(give_back)

    def _drop(self, conn: Any) -> None:
        """Terminate a connection a timeout or a cut left unusable; wake the calls waiting
        for a connection (`_acquire`)."""
        if self._lost_signal is not None:
            self._lost_signal.set_result(None)
            self._lost_signal = None
        with contextlib.suppress(Exception):  # the pool may have taken it back already
            conn.terminate()

    @guarded
    async def _ping(self) -> None:
        """`SELECT 1` on /health's own connection (made again when lost): whether the server
        answers, whatever the pool is busy with."""
        if self._pool is None:
            raise StoreError("the PostgreSQL store is not open")
        async with self._probing:
            try:
                if self._probe is None or self._probe.is_closed():
                    self._probe = await self._connect()
                await self._probe.fetchval("SELECT 1")
            except BaseException:
                if self._probe is not None:
                    self._probe.terminate()
                    self._probe = None
                raise

    def pool_use(self) -> dict[str, int]:
        """What /health tells of the pool: connections open, in use, and the bound."""
        pool = self._pool
        if pool is None:
            return {"open": 0, "inUse": 0, "max": self.pool_max}
        size = pool.get_size()
        return {"open": size, "inUse": size - pool.get_idle_size(), "max": self.pool_max}


def _checked(schema: str) -> str:
    if not _SCHEMA_NAME.fullmatch(schema):
        raise StoreError(
            f"schema {schema!r}: lower-case letters, digits and _ (48 at most),"
            " not starting with a digit"
        )
    return schema


def _safe(dsn: str) -> str:
    """The DSN without its password, for messages."""
    parts = urlsplit(dsn)
    if parts.password is None:
        return dsn
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@")
    return parts._replace(netloc=netloc).geturl()


def _opening_error(exc: BaseException, dsn: str) -> BaseException:
    """The first connection's failure in one line with its fix: PostgreSQL not reachable (a
    StoreDownError, an OSError too), no such database, a user refused; another error as is."""
    parts = urlsplit(dsn)
    host, port = parts.hostname or "localhost", parts.port or 5432
    database = parts.path.lstrip("/") or parts.username or "postgres"
    if isinstance(exc, asyncpg.exceptions.InvalidCatalogNameError):
        return StoreError(
            f"PostgreSQL at {host}:{port} has no database {database!r}: create it (createdb"
            f" -h {host} -p {port} {database}), or name one that exists in the store URL"
        )
    if isinstance(exc, asyncpg.exceptions.InvalidAuthorizationSpecificationError):
        return StoreError(
            f"PostgreSQL at {host}:{port} refused {exc}; give the store URL a user it accepts"
        )
    if not isinstance(exc, _unreachable()) or isinstance(exc, StoreError):
        return exc
    reason = os.strerror(exc.errno) if isinstance(exc, OSError) and exc.errno else str(exc)
    return StoreDownError(
        f"cannot reach PostgreSQL at {host}:{port} ({reason or type(exc).__name__}):"
        " start it, or give the store URL the host and port it listens on"
    )
