"""The PostgreSQL store's lifecycle: its URL's options, opening, closing and its schema.

Opening `PostgresPool` makes the pool (its connections: `stores._postgres_connections`),
creates or migrates the schema (`stores._postgres_schema`), claims it for the agent
(`stores._owner`) and starts the LISTENing connection (`stores._postgres_follow`); the first
connection's failure is said in one line with its fix. `db status` and `db upgrade` work on a
connection of their own, without the pool or a claim.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

from a2a_handoff.errors import StoreDownError, StoreError
from a2a_handoff.stores._owner import LEGACY_SCHEMA, schema_for
from a2a_handoff.stores._postgres_connections import (
    ACQUIRE_TIMEOUT,
    COMMAND_TIMEOUT,
    CONNECT_TIMEOUT,
    POOL_MAX,
    PostgresConnections,
    keep_session,
    unreachable,
)
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

__all__ = ["PostgresPool"]

_SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,47}")
_OURS = ("schema", "pool_max", "acquire_timeout", "command_timeout", "connect_timeout")


class PostgresPool(PostgresConnections):
    """The store opened, closed and its schema (module docstring)."""

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
        super().__init__(
            dsn,
            pool_max=pool_max,
            acquire_timeout=acquire_timeout,
            command_timeout=command_timeout,
            connect_timeout=connect_timeout,
        )
        self.explicit_schema = schema is not None  # else the agent's default (`claim`)
        self.agent: str | None = None  # the agent this store serves, once claimed
        self._unchecked = False  # claimed, its owner not yet checked
        self._use_schema(schema or LEGACY_SCHEMA)

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
                reset=keep_session,
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
        await self._close_connections()

    async def __aenter__(self) -> PostgresPool:
        return await self.open()

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


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
    if not isinstance(exc, unreachable()) or isinstance(exc, StoreError):
        return exc
    reason = os.strerror(exc.errno) if isinstance(exc, OSError) and exc.errno else str(exc)
    return StoreDownError(
        f"cannot reach PostgreSQL at {host}:{port} ({reason or type(exc).__name__}):"
        " start it, or give the store URL the host and port it listens on"
    )
