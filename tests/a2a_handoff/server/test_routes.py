"""An agent's routes mounted into an app of one's own — under a prefix beside the app's own
routes, or at its root — talked to by the official A2A client (card resolution, JSON-RPC and
HTTP+JSON), with the agent's gate in front of its routes wherever they stand."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
import pytest
from a2a.client import Client, ClientConfig, create_client
from a2a.types.a2a_pb2 import (
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    TaskState,
)
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Mount, Route

from a2a_handoff import MemoryTaskStore
from a2a_handoff.server import AgentService, agent_routes
from servers.echo import EchoAgent, echo_card

pytestmark = pytest.mark.anyio

BASE = "http://shop.test"


async def home(request: Request) -> PlainTextResponse:
    return PlainTextResponse("the shop's own page")


@asynccontextmanager
async def http_to(app: Starlette) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=app)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=transport, base_url=BASE, timeout=10.0) as http,
    ):
        yield http


@asynccontextmanager
async def sdk(http: httpx.AsyncClient, url: str, binding: str) -> AsyncIterator[Client]:
    config = ClientConfig(streaming=False, httpx_client=http, supported_protocol_bindings=[binding])
    client = await create_client(url, config)
    try:
        yield client
    finally:
        await client.close()


async def echoed(client: Client, text: str) -> str:
    """The SDK sends `text` and returns the completed task's id, its artifact checked."""
    message = Message(message_id=f"m-{uuid.uuid4()}", role=Role.ROLE_USER, parts=[Part(text=text)])
    tasks = [
        event.task
        async for event in client.send_message(SendMessageRequest(message=message))
        if event.HasField("task")
    ]
    assert tasks, "the SDK got no task back"
    assert tasks[-1].status.state == TaskState.TASK_STATE_COMPLETED
    assert tasks[-1].artifacts[0].parts[0].text == text
    return str(tasks[-1].id)


@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON"])
async def test_an_agent_mounted_under_a_prefix_beside_the_apps_own_routes(binding: str) -> None:
    url = f"{BASE}/agents/echo/"
    service = AgentService(EchoAgent(), echo_card(url), MemoryTaskStore())
    app = Starlette(
        routes=[Route("/", home), Mount("/agents/echo", routes=agent_routes(service))],
        lifespan=service.lifespan,
    )
    async with http_to(app) as http:
        assert (await http.get("/")).text == "the shop's own page"
        async with sdk(http, url, binding) as client:  # the card read at <prefix>/.well-known
            task_id = await echoed(client, f"hello over {binding}")
            task = await client.get_task(GetTaskRequest(id=task_id))
            assert task.status.state == TaskState.TASK_STATE_COMPLETED
        # The gate stands in front of the mounted routes: a rebound name is refused, as the
        # JSON-RPC endpoint's error object at its own path.
        foreign = await http.post(
            "/agents/echo/", json={}, headers={"Host": "rebound.test", "A2A-Version": "1.0"}
        )
        assert foreign.status_code == 403
        assert foreign.json()["error"]["code"] == -32107
        assert (await http.get("/agents/echo/health")).json()["status"] == "healthy"


async def test_an_agent_mounted_at_the_root_of_an_app_with_routes_of_its_own() -> None:
    url = f"{BASE}/"
    service = AgentService(EchoAgent(), echo_card(url), MemoryTaskStore())
    app = Starlette(
        routes=[Route("/shop", home), *agent_routes(service)], lifespan=service.lifespan
    )
    async with http_to(app) as http:
        assert (await http.get("/shop")).text == "the shop's own page"
        async with sdk(http, url, "JSONRPC") as client:
            await echoed(client, "hello at the root")
        assert service.streams.open == 0
