"""The browser guard, in process: a request whose `Host` or `Origin` is not the agent's is
refused (403, -32107) on every route before anything runs; an A2A client's requests, which
carry the agent's own host and no `Origin`, pass untouched. The attack itself, against real
agents and from a real browser, is tests/integration/test_browser_attacks.py."""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from a2a_handoff import MemoryTaskStore, TrustConfig, create_app
from a2a_handoff.errors import ConfigError
from a2a_handoff.stores.base import TaskQuery
from servers.echo import EchoAgent, echo_card

pytestmark = pytest.mark.anyio

JSON = {"A2A-Version": "1.0", "Content-Type": "application/json"}


def send(text: str = "hi", call_id: int = 1) -> str:
    message = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": text}]}
    request = {"jsonrpc": "2.0", "id": call_id, "method": "SendMessage"}
    return json.dumps({**request, "params": {"message": message}})


@contextlib.asynccontextmanager
async def serving(card_url: str, **trust: Any) -> AsyncIterator[tuple[httpx.AsyncClient, Any]]:
    store = MemoryTaskStore()
    app = create_app(
        EchoAgent(), echo_card(card_url), store, trust=TrustConfig(**trust), mcp_server=True
    )
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url=card_url) as http:
            yield http, store


async def stored(store: MemoryTaskStore) -> int:
    return (await store.list_tasks(TaskQuery(owner=None))).total_size


def foreign(response: httpx.Response, said: str) -> None:
    assert response.status_code == 403, response.text
    body = response.json()
    error = body["error"]
    if "jsonrpc" in body:
        assert error["code"] == -32107
        assert error["data"][0]["reason"] == "FOREIGN_REQUEST"
    else:
        assert error["status"] == "PERMISSION_DENIED"
        assert error["details"][0]["reason"] == "FOREIGN_REQUEST"
    assert said in error["message"]


async def test_a_rebound_name_is_refused_on_every_route_and_nothing_is_done() -> None:
    async with serving("http://127.0.0.1:8001/") as (http, store):
        rebound = {"Host": "rebound.test:8001"}
        foreign(await http.post("/", content=send(), headers={**JSON, **rebound}), "Host")
        sent = await http.post("/message:send", content=send(), headers={**JSON, **rebound})
        foreign(sent, "Host")
        for path in ("/tasks", "/.well-known/agent-card.json", "/health", "/metrics", "/mcp"):
            foreign(await http.get(path, headers={**JSON, **rebound}), "rebound.test")
        assert await stored(store) == 0
        # The agent's own address, any IP address and, on loopback, `localhost` are its own.
        for host in ("127.0.0.1:8001", "10.1.2.3:8001", "[::1]:8001", "localhost:8001", None):
            headers = JSON if host is None else {**JSON, "Host": host}
            answer = await http.post("/", content=send(), headers=headers)
            assert answer.status_code == 200, (host, answer.text)
            assert answer.json()["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"


async def test_a_name_is_its_own_only_when_it_is_the_agents_or_allowed() -> None:
    async with serving("https://billing.example.com/", allowed_hosts=["billing"]) as (http, _):
        for host in ("billing.example.com", "BILLING.example.com.", "billing:8000"):
            card = await http.get("/.well-known/agent-card.json", headers={"Host": host})
            assert card.status_code == 200, host
        # `localhost` is not this agent's: its own host is not a loopback address.
        for host in ("localhost", "billing.example.com.evil.test", "x:y:z", "[::1"):
            refused = await http.get("/.well-known/agent-card.json", headers={"Host": host})
            assert refused.status_code == 403, host
    async with serving("http://127.0.0.1:8001/", allowed_hosts=["*"]) as (http, _):
        card = await http.get("/.well-known/agent-card.json", headers={"Host": "any.test"})
        assert card.status_code == 200


async def test_a_page_of_another_origin_is_refused_its_own_origin_is_not() -> None:
    async with serving("http://127.0.0.1:8001/", allowed_origins=["https://ops.test"]) as (
        http,
        store,
    ):
        for origin in ("http://attacker.test", "null", "http://127.0.0.1:9999"):
            answer = await http.post("/", content=send(), headers={**JSON, "Origin": origin})
            foreign(answer, "Origin")
        assert await stored(store) == 0
        for origin in ("http://127.0.0.1:8001", "https://ops.test", "https://OPS.test/"):
            answer = await http.post("/", content=send(), headers={**JSON, "Origin": origin})
            assert answer.status_code == 200, (origin, answer.text)
        # A page of the address the request was made to (its own scheme://Host) is its own.
        own = {**JSON, "Host": "10.0.0.7:8001", "Origin": "http://10.0.0.7:8001"}
        assert (await http.post("/", content=send(), headers=own)).status_code == 200
        assert await stored(store) == 4


async def test_the_mcp_face_is_guarded_and_takes_no_more_than_the_agents_body_limit() -> None:
    async with serving("http://127.0.0.1:8001/") as (http, _):
        page = {"Origin": "http://attacker.test", "Content-Type": "application/json"}
        foreign(await http.post("/mcp", content="{}", headers=page), "Origin")
        mcp = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
        big = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping", "pad": "x" * 1_100_000})
        too_big = await http.post("/mcp", content=big, headers=mcp)
        assert too_big.status_code == 413
        assert "1048576" in too_big.json()["error"]
        ping = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"})
        assert (await http.post("/mcp", content=ping, headers=mcp)).status_code == 200


def test_an_allowed_origin_must_be_an_origin() -> None:
    with pytest.raises(ConfigError, match="allowed_origins"):
        TrustConfig(allowed_origins=["attacker.test"])
    with pytest.raises(ConfigError, match="list of names"):
        TrustConfig(allowed_hosts="billing")
