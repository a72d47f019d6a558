"""The console's server: a poller of the agents, the snapshot stream, the page's calls."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import hmac
import json
import logging
import secrets
import socket
import sys
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Receive, Scope, Send

from a2a_handoff import HANDOFF_EXTENSION_URI, AgentClient
from a2a_handoff.errors import AuthenticationError, HandoffError, RemoteError
from a2a_handoff.exits import ExitCode
from a2a_handoff.protocol import Task
from orchestrator import operator
from orchestrator.reach import origin

log = logging.getLogger("orchestrator.console")
STATIC = Path(__file__).parent / "static"
VERDICTS = {"approve": "approved", "deny": "denied", "reply": "answered"}


def _ext(raw: dict[str, Any]) -> dict[str, Any]:
    value = (raw.get("metadata") or {}).get(HANDOFF_EXTENSION_URI)
    return value if isinstance(value, dict) else {}


def hop_of(agent_url: str, agent_name: str, raw: dict[str, Any]) -> dict[str, Any]:
    """One task as the page draws it: a box, and the arrow that led to it (if any)."""
    ext = _ext(raw)
    received = ext.get("handoff") or {}
    transfer = ext.get("transfer") or {}
    source = received.get("source") or {}
    state = raw["status"]["state"].removeprefix("TASK_STATE_").lower()
    if ext.get("state") == "TRANSFERRED":
        state = "transferred"
    return {
        "agentUrl": agent_url,
        "agent": agent_name,
        "taskId": raw["id"],
        "contextId": raw["contextId"],
        "state": state,
        "at": raw["status"].get("timestamp") or "",
        "text": _status_text(raw),
        "from": {  # the arrow into this box
            "agent": source.get("agent", ""),
            "taskId": source.get("taskId", ""),
            "kind": received.get("kind", "handoff"),
            "reason": received.get("reason", ""),
            "handoffId": received.get("handoffId", ""),
            "onBehalfOf": received.get("onBehalfOf", ""),  # whose task it is
        }
        if received
        else None,
        "to": {  # the arrow out of this box: drawn to a stand-in when its agent is not watched
            "agent": transfer.get("agentName", ""),
            "taskId": transfer.get("taskId", ""),
            "reason": transfer.get("reason", ""),
        }
        if transfer
        else None,
        "rejected": ext.get("rejected"),
    }


def _unread(name: str, caller: Any) -> str:
    """Why the console sees only some of an agent's tasks, if it does: its key is not an
    operator's there (an operator reads every task, anyone else its own only). '' when it
    reads them all (or the agent has no API keys: everyone reads everything)."""
    if not isinstance(caller, dict) or caller.get("operator", True):
        return ""
    principal = str(caller.get("principal", ""))
    return (
        f"not watched: the console's key here is {principal}'s, not an operator's, so it reads"
        f" only {principal}'s own tasks at {name}; start {name} with --operators {principal}"
        " (or give the console an operator's key with --keys-file)"
    )


def _status_text(raw: dict[str, Any]) -> str:
    message = raw["status"].get("message") or {}
    texts = [p["text"] for p in message.get("parts") or [] if "text" in p]
    return " ".join(texts)[:300]


class Console:
    """Watches agents; keeps the latest snapshot; answers the page."""

    def __init__(
        self,
        agents: Sequence[str],
        client: AgentClient,
        keys: dict[str, str],
        every: float = 0.5,
    ) -> None:
        self.agents = list(dict.fromkeys(agents))
        self.client = client
        self.keys = keys
        self.every = every
        self.http = httpx.AsyncClient(timeout=5.0)
        self.names: dict[str, str] = {}
        self.snapshot: dict[str, Any] = {"agents": [], "conversations": [], "inbox": []}
        self.version = 0
        self.changed = asyncio.Condition()

    def _key_headers(self, url: str) -> dict[str, str]:
        key = self.keys.get(origin(url))
        return {"X-API-Key": key} if key else {}

    async def _agent(self, url: str) -> tuple[dict[str, Any], list[dict[str, Any]], list[Any]]:
        """One agent's health, recent tasks (as hops) and escalations waiting."""
        status: dict[str, Any] = {"url": url, "name": self.names.get(url, url)}
        hops: list[dict[str, Any]] = []
        items: list[Any] = []
        try:
            if url not in self.names:
                self.names[url] = status["name"] = (await self.client.card(url)).name
            health = await self.http.get(
                url.rstrip("/") + "/health", headers=self._key_headers(url)
            )
            status["health"] = health.json()
            unread = _unread(status["name"], status["health"].get("caller"))
            if unread:
                status["unread"] = unread
            page = await self.client.list_tasks(url, pageSize=100, historyLength=0)
            hops = [hop_of(url, status["name"], raw) for raw in page["tasks"]]
            items = [{**i, "agentUrl": url} for i in await operator.inbox(self.client, url)]
            status["reachable"] = True
        except (HandoffError, httpx.HTTPError, ValueError, KeyError) as exc:
            status["reachable"] = False
            status["error"] = f"{type(exc).__name__}: {exc}"[:200]
            if isinstance(exc, RemoteError) and exc.code == AuthenticationError.code:
                status["unread"] = (
                    f"not watched: {status['name']} refuses the console's key ({exc.message});"
                    " give the key of one of its operators with --api-key or --keys-file"
                )
        return status, hops, items

    async def poll(self) -> None:
        found = await asyncio.gather(*(self._agent(u) for u in self.agents))
        conversations: dict[str, list[dict[str, Any]]] = {}
        for _, hops, _ in found:
            for hop in hops:
                conversations.setdefault(hop["contextId"], []).append(hop)
        chains: list[dict[str, Any]] = [
            {"contextId": context, "hops": sorted(hops, key=lambda h: str(h["taskId"]))}
            for context, hops in conversations.items()
        ]
        chains.sort(key=lambda c: str(c["hops"][-1]["taskId"]), reverse=True)  # newest first
        snapshot = {
            "agents": [status for status, _, _ in found],
            "conversations": chains[:30],
            "inbox": [item for _, _, items in found for item in items],
        }
        if snapshot != self.snapshot:
            self.snapshot = snapshot
            async with self.changed:
                self.version += 1
                self.changed.notify_all()

    async def run(self) -> None:
        while True:
            try:
                await self.poll()
            except Exception:  # the console keeps watching whatever one poll ran into
                log.exception("console poll failed")
            await asyncio.sleep(self.every)

    async def events(self, request: Request) -> Response:
        """SSE: the snapshot now, then each time it changes."""

        async def frames() -> AsyncIterator[bytes]:
            seen = -1
            while not await request.is_disconnected():
                if seen != self.version:
                    seen = self.version
                    yield f"event: snapshot\ndata: {json.dumps(self.snapshot)}\n\n".encode()
                    continue
                async with self.changed:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self.changed.wait(), 15.0)
                if seen == self.version:
                    yield b": ping\n\n"

        headers = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
        return StreamingResponse(frames(), media_type="text/event-stream", headers=headers)

    def _known(self, url: str) -> str:
        if url not in self.agents:
            raise ValueError("not an agent this console watches")
        return url

    async def task(self, request: Request) -> Response:
        """A task's detail: its history, artifacts, the envelope it came with, ledger rows."""
        try:
            url = self._known(request.query_params["agent"])
            task_id = request.query_params["id"]
            task = await self.client.get_task(url, task_id)
            raw = task.dump()
            ledger = await self.client.call(
                url, "ListHandoffs", {"contextId": task.context_id}, idempotent=True
            )
        except (KeyError, ValueError, HandoffError) as exc:
            return JSONResponse({"error": str(exc)}, status_code=400)
        rows = [
            r
            for r in [*ledger.get("sent", []), *ledger.get("received", [])]
            if task_id in (r.get("taskId"), (r.get("source") or {}).get("taskId"))
        ]
        return JSONResponse(
            {
                "task": raw,
                "envelope": _envelope_of(task),
                "ledger": rows,
                "ext": _ext(raw),
            }
        )

    async def answer(self, request: Request) -> Response:
        """approve / deny / reply, as the CLI does (the agent checks the operator's role)."""
        if request.headers.get("content-type", "").split(";")[0] != "application/json":
            return JSONResponse({"error": "send JSON"}, status_code=415)  # no cross-site forms
        try:
            body = await request.json()
            url = self._known(str(body["agent"]))
            verdict = VERDICTS[str(body["action"])]
            text = str(body.get("text") or "")
            if verdict == "answered" and not text:
                raise ValueError("a reply needs text")
            answered = await operator.answer(self.client, url, str(body["taskId"]), verdict, text)
        except (KeyError, ValueError, HandoffError, operator.AlreadyDecided) as exc:
            return JSONResponse({"error": str(exc)}, status_code=400)
        return JSONResponse(
            {"taskId": answered.task_id, "verdict": answered.verdict, "noted": answered.noted}
        )


def _envelope_of(task: Task) -> dict[str, Any] | None:
    """The handoff envelope a received task came with (its first message carries it)."""
    for message in task.history or []:
        value = (message.metadata or {}).get(HANDOFF_EXTENSION_URI)
        if isinstance(value, dict) and "handoffId" in value:
            return value
    return None


LOOPBACK = ("127.0.0.1", "localhost", "[::1]", "::1")


class Guard:
    """Who may use the console: a request must name the console's own address (`Host`: a
    page rebound by DNS to 127.0.0.1 still says its own name), come from the console's own
    page (`Origin`, when a browser sends one), and carry the per-run token (printed at
    start, in the URL the operator opens) — the page, then, its API calls and its stream."""

    def __init__(self, app: ASGIApp, host: str, port: int, token: str) -> None:
        self.app = app
        self.token = token
        names = {host, *(LOOPBACK if host in LOOPBACK else ())}
        self.hosts = {f"{name}:{port}" for name in names}
        self.origins = {f"http://{h}" for h in self.hosts}

    def refusal(self, scope: Scope) -> str | None:
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        if headers.get("host", "") not in self.hosts:
            return "this console answers only at its own address"
        origin = headers.get("origin")
        if origin is not None and origin not in self.origins:
            return "this console answers only its own page"
        if scope["path"].startswith("/static/"):
            return None  # the page's script and style: nothing of the agents in them
        offered = headers.get("x-console-token") or ""
        if not offered:
            query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
            offered = (query.get("token") or [""])[0]
        if not hmac.compare_digest(offered, self.token):
            return "open the console with the URL it printed at start (its token)"
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            refused = self.refusal(scope)
            if refused is not None:
                await JSONResponse({"error": refused}, status_code=403)(scope, receive, send)
                return
        await self.app(scope, receive, send)


def console_app(console: Console) -> Starlette:
    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        watcher = asyncio.create_task(console.run())
        try:
            yield
        finally:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher
            await console.http.aclose()

    async def index(request: Request) -> Response:
        return FileResponse(STATIC / "index.html", headers={"Cache-Control": "no-store"})

    return Starlette(
        routes=[
            Route("/", index),
            Route("/api/events", console.events),
            Route("/api/task", console.task),
            Route("/api/answer", console.answer, methods=["POST"]),
            Mount("/static", StaticFiles(directory=STATIC), name="static"),
        ],
        lifespan=lifespan,
    )


async def serve(
    client: AgentClient, agents: Sequence[str], keys: dict[str, str], host: str, port: int
) -> int:
    """Serve the console until interrupted; a port in use is a usage error (64), said before
    anything is printed (the URL is printed only once the page's socket is ours)."""
    try:
        sock = _bind(host, port)
    except OSError as exc:
        why = "in use" if exc.errno == errno.EADDRINUSE else exc.strerror
        print(
            f"error: cannot listen on {host}:{port} ({why}): stop what listens there, or"
            " pick another --port",
            file=sys.stderr,
        )
        return int(ExitCode.USAGE)
    console = Console(agents, client, keys)
    token = secrets.token_urlsafe(24)
    app = Guard(console_app(console), host, port, token)
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", log_config=None)
    if host not in LOOPBACK:
        log.warning(
            "INSECURE: the console listens on %s: whoever reaches that address and has its"
            " URL acts with the operator's keys; keep it on 127.0.0.1 (a tunnel, not a bind)",
            host,
        )
    name = f"[{host}]" if ":" in host else host
    print(
        f"console on http://{name}:{port}/?token={token} watching {len(console.agents)} agent(s)",
        flush=True,
    )
    with sock:
        await uvicorn.Server(config).serve(sockets=[sock])
    return 0


def _bind(host: str, port: int) -> socket.socket:
    """The page's socket, bound as uvicorn binds one (SO_REUSEADDR)."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    return sock
