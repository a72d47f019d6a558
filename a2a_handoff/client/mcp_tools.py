"""Calls to the MCP servers an agent was configured with: one pooled session per server.

Invariants:
- only a configured server is called, by its name: a handler never gives a URL (an unknown
  name is `ToolCallError(kind="unknown_server")`), and the SDK follows no redirect that
  leaves the configured origin;
- each server has one client session, held open by a task of its own; a session that
  failed (the server died, the connection broke) is dropped and the next call connects again;
- every call is bounded by its timeout (connecting included) and runs behind the server's
  circuit breaker: a connection failure or a timeout counts against it, an answer does not
  (even `isError`, even a JSON-RPC error such as an unknown tool or invalid arguments);
- a call is retried — when no answer came (the connection failed, the server failed the
  request: an HTTP 5xx, a JSON-RPC internal error), within its timeout — when it carries an
  idempotency key, which the server receives in the call's `_meta` under `KEY_META`: a
  retry may reach a server that executed the first attempt, and only the key lets it tell;
- a tool's `isError` answer is raised (`kind="tool_error"`, its text), never returned as if
  it had worked;
- a server's URL is shown (errors, logs, `/health`) without the password of its userinfo;
- an answer is bounded (`client.mcp_bounds.MAX_ANSWER_BYTES`): a larger one fails the call;
  a server's error text is repeated up to `MAX_SAID` characters.

The `mcp` package (`pip install '.[mcp]'` in the a2a-handoff clone) is imported by the first
connection, so an agent without MCP servers never loads it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from a2a_handoff.client.breaker import CircuitBreaker
from a2a_handoff.client.reasons import reason
from a2a_handoff.errors import CircuitOpenError, ToolCallError
from a2a_handoff.protocol.mcp_result import ToolResult

log = logging.getLogger("a2a_handoff.client")

KEY_META = "a2a-handoff/idempotencyKey"
"""Where a keyed call's idempotency key travels: `params._meta[KEY_META]`."""
# What the SDK answers a call with when no answer came: the transport went away (-32000),
# or the server failed it (-32603: also the SDK's stand-in for an HTTP 5xx). The call may
# have run: a failure, retried only with a key.
CONNECTION_CLOSED = -32000
INTERNAL_ERROR = -32603
# A server that keeps sessions (the handshake-era protocol) and restarted does not know
# ours: it refuses the call before running it. A new session, and the call made again.
INVALID_REQUEST = -32600
SESSION_GONE = ("Session terminated", "Session not found")
MAX_SAID = 2000  # characters of a server's error text an error repeats


class _Answered(Exception):
    """The server answered the call with a JSON-RPC error: it is up (not a breaker failure)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


class _SessionGone(_Answered):
    """The server does not know the session (it restarted): the call did not run."""


def _is_failure(exc: BaseException) -> bool:
    return not isinstance(exc, _Answered)


def _why(exc: BaseException) -> str:
    """A failure in words; an exception group (the SDK's task groups) by its first leaf."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return reason(exc)


class _Session:
    """One server's client session, entered and left by a task of its own (the SDK's task
    groups must be left by the task that entered them; calls come from handlers' tasks)."""

    def __init__(self, url: str, mode: str) -> None:
        self.url = url
        self.mode = mode
        self.ready: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.stop = asyncio.Event()
        self.task = asyncio.create_task(self._hold(), name=f"mcp-session {shown_url(url)}")

    @property
    def dead(self) -> bool:
        return self.task.done() or self.stop.is_set()

    async def _hold(self) -> None:
        try:
            import httpx2
            from mcp import Client
            from mcp.client.streamable_http import streamable_http_client

            from a2a_handoff.client.mcp_bounds import MAX_ANSWER_BYTES, BoundedTransport
        except ImportError as exc:  # pragma: no cover - the extra is missing
            self.ready.set_exception(
                ToolCallError(
                    "calling MCP tools needs the mcp package: pip install '.[mcp]' in the"
                    " a2a-handoff clone",
                    kind="unreachable",
                )
            )
            log.error("%s", exc)
            return
        try:
            timeout = httpx2.Timeout(30.0, read=300.0)
            async with (
                httpx2.AsyncClient(timeout=timeout, transport=BoundedTransport()) as http,
                Client(
                    streamable_http_client(
                        self.url, http_client=http, max_sse_event_size=MAX_ANSWER_BYTES
                    ),
                    mode=self.mode,
                ) as client,
            ):
                self.ready.set_result(client)
                await self.stop.wait()
        except Exception as exc:
            if not self.ready.done():
                self.ready.set_exception(exc)
            else:
                log.info("MCP session with %s ended: %s", shown_url(self.url), _why(exc))
        finally:
            if not self.ready.done():
                self.ready.set_exception(ConnectionError("the session was closed"))
            if not self.ready.cancelled():
                self.ready.exception()  # retrieved: no caller may be waiting any more

    async def close(self) -> None:
        self.stop.set()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await asyncio.wait_for(asyncio.shield(self.task), 5.0)
        if not self.task.done():
            self.task.cancel()


class McpTools:
    """The MCP servers an agent may call, by name; `call` runs one tool call."""

    def __init__(
        self,
        servers: Mapping[str, str],
        *,
        timeout: float = 30.0,
        attempts: int = 3,
        breaker_threshold: int = 5,
        breaker_cooldown: float = 10.0,
        mode: str = "auto",
    ) -> None:
        self.servers = dict(servers)
        self.mode = mode  # the SDK's protocol negotiation (tests pin "legacy": sessions)
        self.timeout = timeout
        self.attempts = attempts
        self.breakers = {
            name: CircuitBreaker(
                f"mcp {name}",
                threshold=breaker_threshold,
                cooldown=breaker_cooldown,
                is_failure=_is_failure,
            )
            for name in self.servers
        }
        self._sessions: dict[str, _Session] = {}

    async def call(
        self,
        server: str,
        tool: str,
        args: Mapping[str, Any] | None = None,
        *,
        idempotency_key: str | None = None,
    ) -> ToolResult:
        """Call `tool` on the server named `server`; its result, or `ToolCallError`."""
        self._check_configured(server, tool)
        deadline = time.monotonic() + self.timeout
        attempts = self.attempts if idempotency_key else 1
        meta = {KEY_META: idempotency_key} if idempotency_key else None
        where = f"MCP server {server} ({shown_url(self.servers[server])})"
        attempt, renewed = 1, False
        while True:
            try:
                result = await self._attempt(server, tool, dict(args or {}), meta, deadline)
            except TimeoutError:
                raise ToolCallError(
                    f"{where}: {tool} gave no answer within {self.timeout:g} s",
                    kind="timeout",
                    server=server,
                    tool=tool,
                ) from None
            except CircuitOpenError as exc:
                raise ToolCallError(
                    str(exc), kind="circuit_open", server=server, tool=tool
                ) from exc
            except _SessionGone as exc:
                if not renewed:  # the call did not run: made again on a new session
                    renewed = True
                    continue
                raise ToolCallError(
                    f"{where}: {tool} failed: {exc}", kind="unreachable", server=server, tool=tool
                ) from None
            except _Answered as exc:
                raise ToolCallError(
                    f"{where} refused the call to {tool}: {exc} (code {exc.code})",
                    kind="refused",
                    server=server,
                    tool=tool,
                ) from None
            except Exception as exc:
                pause = min(0.2 * 2 ** (attempt - 1), 2.0) * (0.5 + random.random() / 2)
                if attempt < attempts and time.monotonic() + pause < deadline:
                    log.info("%s: %s failed (%s); retrying", where, tool, _why(exc))
                    attempt += 1
                    await asyncio.sleep(pause)
                    continue
                tried = f" ({attempt} attempts)" if attempt > 1 else ""
                raise ToolCallError(
                    f"{where}: {tool} failed: {_why(exc)}{tried}",
                    kind="unreachable",
                    server=server,
                    tool=tool,
                ) from exc
            if result.is_error:
                raise ToolCallError(
                    f"{server}/{tool} answered an error: {_said(result.text) or 'no text'}",
                    kind="tool_error",
                    server=server,
                    tool=tool,
                )
            return result

    def _check_configured(self, server: str, tool: str) -> None:
        """Only a server configured by name is called, never a URL a handler made up."""
        if server not in self.servers:
            known = ", ".join(sorted(self.servers)) or "none"
            raise ToolCallError(
                f"no MCP server named {server!r} is configured (configured: {known})",
                kind="unknown_server",
                server=server,
                tool=tool,
            )

    async def _attempt(
        self,
        server: str,
        tool: str,
        args: dict[str, Any],
        meta: dict[str, Any] | None,
        deadline: float,
    ) -> ToolResult:
        """One try, behind the server's breaker; a session that failed is dropped."""
        from mcp import MCPError

        async with self.breakers[server].guard():
            async with asyncio.timeout_at(asyncio.get_running_loop().time() + _left(deadline)):
                session = self._session(server)
                try:
                    client = await asyncio.shield(session.ready)
                    answer = await client.call_tool(tool, args, meta=meta)
                except MCPError as exc:
                    if exc.code in (CONNECTION_CLOSED, INTERNAL_ERROR):
                        await self._drop(server, session)
                        raise ConnectionError(_said(exc.message) or "connection closed") from exc
                    if exc.code == INVALID_REQUEST and exc.message in SESSION_GONE:
                        await self._drop(server, session)
                        raise _SessionGone(exc.code, exc.message) from None
                    raise _Answered(exc.code, _said(exc.message)) from None
                except Exception:
                    await self._drop(server, session)
                    raise
        content = tuple(
            block.model_dump(mode="json", by_alias=True, exclude_none=True)
            for block in answer.content
        )
        return ToolResult(content, answer.structured_content, bool(answer.is_error))

    def _session(self, server: str) -> _Session:
        """The server's session: the one open (or opening), else a new one."""
        session = self._sessions.get(server)
        if session is None or session.dead:
            session = _Session(self.servers[server], self.mode)
            self._sessions[server] = session
        return session

    async def _drop(self, server: str, session: _Session) -> None:
        """Close `session`; the next call opens another (unless one already replaced it)."""
        if self._sessions.get(server) is session:
            del self._sessions[server]
        await session.close()

    def snapshot(self) -> dict[str, dict[str, object]]:
        """Each server's URL and breaker, for `/health`."""
        return {
            name: {"url": shown_url(self.servers[name]), **breaker.snapshot()}
            for name, breaker in self.breakers.items()
        }

    async def aclose(self) -> None:
        for server, session in list(self._sessions.items()):
            await self._drop(server, session)


def _said(text: str | None) -> str:
    """What a server said, as an error repeats it: cut after `MAX_SAID` characters (the
    text fails a task, and a keyed call's error is kept in its journal)."""
    text = text or ""
    return text if len(text) <= MAX_SAID else f"{text[:MAX_SAID]}… ({len(text)} characters)"


def shown_url(url: str) -> str:
    """`url` as it may be shown: a password in its userinfo replaced by `***` (a URL such
    as `https://user:token@host/mcp` is called as it is, never shown so)."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{parts.username or ''}:***@{netloc}"))


def _left(deadline: float) -> float:
    return max(0.0, deadline - time.monotonic())
