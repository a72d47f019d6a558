"""An AgentClient whose agents are respx routes: answers scripted per request, no sockets."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import respx

from a2a_handoff.client.client import AgentClient
from a2a_handoff.client.retry import RetryPolicy

URL = "http://billing.test:8000/"
OTHER = "http://shipping.test:8000/"
TASK = {"id": "t1", "contextId": "c1", "status": {"state": "TASK_STATE_WORKING"}}


def ok(result: Any) -> httpx.Response:
    return httpx.Response(200, json={"jsonrpc": "2.0", "id": 1, "result": result})


def rpc_error(error: dict[str, Any], status: int = 200) -> httpx.Response:
    return httpx.Response(status, json={"jsonrpc": "2.0", "id": 1, "error": error})


def html(status: int) -> httpx.Response:
    """What a proxy in front of an agent answers: a page, not JSON-RPC."""
    page = f"<html><body><h1>{status}</h1><p>nginx</p></body></html>"
    return httpx.Response(status, html=page)


class FakeClock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@asynccontextmanager
async def scripted(**kwargs: Any) -> AsyncIterator[tuple[respx.Router, AgentClient]]:
    """A router (every request must match a route) and a client whose transport it is."""
    kwargs.setdefault("retry", RetryPolicy(wait=False))
    router = respx.Router(assert_all_called=False)
    http = httpx.AsyncClient(transport=httpx.MockTransport(router.async_handler))
    client = AgentClient(http, **kwargs)
    try:
        yield router, client
    finally:
        await client.aclose()
