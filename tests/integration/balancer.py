"""A small load balancer for the tests, as one in front of replicas behaves: a reverse proxy on
127.0.0.1 that polls each replica's `/readyz` and sends a request only to a ready one, in
turn. A request that reached no replica — its connection refused — or that a replica refused
saying nothing was done with it (HTTP 503 carrying -32108, draining) is sent to another;
anything else a replica answers is the client's answer. It retries nothing else: a request
cut after it reached a replica is the client's failure, which is what the tests look for."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Sequence

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tests.support import free_port

POLL_SECONDS = 0.05
GIVE_UP_SECONDS = 20.0  # no ready replica for this long: the client gets a 503
_HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "host"}


class Balancer:
    """Round robin over the ready replicas (their base URLs, ending in `/`)."""

    def __init__(self, replicas: Sequence[str]) -> None:
        self.replicas = list(replicas)
        self.ready: set[str] = set()
        self.port = free_port()
        self.resent = 0  # requests sent again to another replica
        self._turn = 0
        self._polled: asyncio.Event | None = None  # set at the end of each round of polls
        # A connection per request: a replica that stops closes its idle ones, and a pooled
        # connection closed under a request would be a failure no balancer causes.
        self.http = httpx.AsyncClient(timeout=60, limits=httpx.Limits(max_keepalive_connections=0))

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    async def _poll(self) -> None:
        while True:
            for replica in self.replicas:
                try:
                    answer = await self.http.get(replica + "readyz", timeout=1.0)
                    ready = answer.status_code == 200
                except httpx.HTTPError:
                    ready = False
                if ready:
                    self.ready.add(replica)
                else:
                    self.ready.discard(replica)
            polled, self._polled = self._polled, asyncio.Event()
            if polled is not None:
                polled.set()
            await asyncio.sleep(POLL_SECONDS)

    async def until_ready(self, *replicas: str, within: float = 60.0) -> None:
        """Wait until the balancer takes each of `replicas` for ready (AssertionError after
        `within` seconds: one that never says ready, or has no `/readyz`)."""
        give_up = time.monotonic() + within
        while not set(replicas) <= self.ready:
            assert time.monotonic() < give_up, f"not ready: {set(replicas) - self.ready}"
            if self._polled is None:
                self._polled = asyncio.Event()
            await self._polled.wait()

    def _pick(self, tried: set[str]) -> str | None:
        candidates = [r for r in self.replicas if r in self.ready and r not in tried]
        if not candidates:
            return None
        self._turn += 1
        return candidates[self._turn % len(candidates)]

    async def _proxy(self, request: Request) -> Response:
        body = await request.body()
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP_BY_HOP}
        path = request.url.path.lstrip("/")
        if request.url.query:
            path += "?" + request.url.query
        tried: set[str] = set()
        give_up = time.monotonic() + GIVE_UP_SECONDS
        while True:
            replica = self._pick(tried)
            if replica is None:
                if time.monotonic() > give_up:
                    return Response("no ready replica\n", status_code=503)
                tried.clear()
                await asyncio.sleep(POLL_SECONDS)
                continue
            try:
                answer = await self.http.request(
                    request.method, replica + path, content=body, headers=headers
                )
            except httpx.ConnectError:  # it reached no replica: safe to send elsewhere
                tried.add(replica)
                self.resent += 1
                continue
            if answer.status_code == 503 and b'"code":-32108' in answer.content:
                tried.add(replica)  # draining: nothing was done with it
                self.resent += 1
                continue
            kept = {k: v for k, v in answer.headers.items() if k.lower() not in _HOP_BY_HOP}
            return Response(answer.content, status_code=answer.status_code, headers=kept)

    def app(self) -> Starlette:
        methods = ["GET", "POST"]
        return Starlette(
            routes=[
                Route("/", self._proxy, methods=methods),
                Route("/{path:path}", self._proxy, methods=methods),
            ]
        )

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[Balancer]:
        """Serving on its port, polling the replicas, until the block ends."""
        config = uvicorn.Config(self.app(), host="127.0.0.1", port=self.port, log_level="warning")
        server = uvicorn.Server(config)
        server.capture_signals = contextlib.nullcontext  # type: ignore[method-assign]
        serving = asyncio.create_task(server.serve())
        polling = asyncio.create_task(self._poll())
        try:
            while not server.started:
                if serving.done():
                    serving.result()  # it could not start: say why
                await asyncio.sleep(0.01)
            yield self
        finally:
            polling.cancel()
            server.should_exit = True
            with contextlib.suppress(asyncio.CancelledError):
                await polling
            await serving
            await self.http.aclose()
