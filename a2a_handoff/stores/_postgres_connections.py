"""The PostgreSQL store's connections: how one is made, and how a call gets one and gives
it back while the server may stop answering.

A bounded pool (`pool_max` connections, 10 by default; a call waits at most
`acquire_timeout` for one, then fails with StoreError) with timeouts on connecting (1 s) and
on every statement (`command_timeout`, 2 s). A slow statement is not an outage: the server
itself cancels a statement past `command_timeout` (its `statement_timeout`), and that call
alone fails with StoreTimeoutError; the client gives up `SERVER_GRACE` later, and only that —
a server that does not answer — counts as unreachable. A connection a timeout or a cut left
unusable is terminated, never reused, and the calls waiting for one fail at once rather than
wait out timeouts of their own. While PostgreSQL cannot be reached every call fails at once
with StoreDownError, one probe a half-second finding it back (`stores._guard`). /health
probes on a connection of its own, so a pool busy with slow calls does not read as a server
down. `guarded` wraps every call that reaches the server.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any, Concatenate, ParamSpec, TypeVar

from a2a_handoff.errors import (
    HandoffError,
    StoreDownError,
    StoreError,
    StoreTimeoutError,
    TrustError,
)
from a2a_handoff.stores._guard import ServerPing, StoreGuard

try:
    import asyncpg
except ImportError:  # pragma: no cover - the optional extra
    asyncpg = None

CONNECT_TIMEOUT = 1.0
COMMAND_TIMEOUT = 2.0
ACQUIRE_TIMEOUT = 5.0
POOL_MAX = 10
SERVER_GRACE = 0.5  # past the server's own cancellation: the client stops waiting

P = ParamSpec("P")
T = TypeVar("T")
B = TypeVar("B", bound="PostgresConnections")


def unreachable() -> tuple[type[BaseException], ...]:
    """The errors that mean PostgreSQL did not answer (the guard's outage), not that it
    refused a call."""
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


async def keep_session(_conn: Any) -> None:
    """A pooled connection goes back as it is: the store sets no session state on one (no
    SET, LISTEN — that has a connection of its own — session advisory locks or cursors; the
    schema is named in every statement), so asyncpg's default reset (UNLISTEN, RESET ALL,
    CLOSE ALL, pg_advisory_unlock_all: a round trip on every release) is not needed. An open
    transaction is still rolled back by asyncpg itself."""


class PostgresConnections(ServerPing):
    """The pool's connections, borrowed and given back (module docstring); the pool itself
    is opened and closed by `stores._postgres_pool.PostgresPool`."""

    def __init__(
        self,
        dsn: str,
        *,
        pool_max: int = POOL_MAX,
        acquire_timeout: float = ACQUIRE_TIMEOUT,
        command_timeout: float = COMMAND_TIMEOUT,
        connect_timeout: float = CONNECT_TIMEOUT,
    ) -> None:
        self.dsn = dsn
        self.pool_max = pool_max
        self.acquire_timeout = acquire_timeout
        self.command_timeout = command_timeout
        self.connect_timeout = connect_timeout
        self.guard = StoreGuard(unreachable())
        self._pool: Any = None
        self._probe: Any = None  # /health's own connection
        self._probing = asyncio.Lock()
        self._lost_signal: asyncio.Future[None] | None = None  # set when one is lost
        self._releasing: set[asyncio.Future[None]] = set()  # connections going back (_abandon)

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

    async def _close_connections(self) -> None:
        """/health's connection terminated, the pool closed once its calls are done."""
        if self._probe is not None:
            probe, self._probe = self._probe, None
            probe.terminate()
        if self._pool is not None:
            pool, self._pool = self._pool, None
            try:
                await pool.close()  # waits for calls to finish
            except Exception:
                pool.terminate()

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
