"""A2A 0.3 requests (no `A2A-Version`) on the JSON-RPC endpoint, in process; the official 0.3
client is in `tests/integration/test_interop03.py`."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from a2a_handoff import MemoryTaskStore, create_app
from servers.echo import EchoAgent, echo_card

pytestmark = pytest.mark.anyio
URL = "http://agent.test/"
Json = dict[str, Any]


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(EchoAgent(), echo_card(URL), MemoryTaskStore())
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=transport, base_url=URL) as client,
    ):
        yield client


def send_params(text: str, **extra: Any) -> Json:
    message = {
        "kind": "message",
        "messageId": str(uuid.uuid4()),
        "role": "user",
        "parts": [{"kind": "text", "text": text}],
        **extra,
    }
    return {"message": message, "configuration": {"blocking": True}}


async def call(http: httpx.AsyncClient, method: str, params: Json) -> Json:
    body = {"jsonrpc": "2.0", "id": "r-1", "method": method, "params": params}
    response = await http.post(URL, json=body)  # no A2A-Version: a 0.3 request
    assert response.status_code == 200
    answer: Json = response.json()
    assert answer["id"] == "r-1"
    return answer


async def stream(http: httpx.AsyncClient, method: str, params: Json) -> list[Json]:
    body = {"jsonrpc": "2.0", "id": 9, "method": method, "params": params}
    found = []
    async with http.stream("POST", URL, json=body) as response:
        async for line in response.aiter_lines():
            if line.startswith("data:"):
                found.append(json.loads(line[5:])["result"])
    return found


async def test_send_get_and_cancel_in_0_3_shapes(http: httpx.AsyncClient) -> None:
    task = (await call(http, "message/send", send_params("hello")))["result"]
    assert task["kind"] == "task"
    assert task["status"]["state"] == "completed"
    assert task["artifacts"][0]["parts"] == [{"kind": "text", "text": "hello"}]
    assert task["history"][0]["role"] == "user"

    got = (await call(http, "tasks/get", {"id": task["id"], "historyLength": 1}))["result"]
    assert got["id"] == task["id"]
    assert len(got["history"]) == 1

    asked = (await call(http, "message/send", send_params("ask: name?")))["result"]
    assert asked["status"]["state"] == "input-required"
    canceled = (await call(http, "tasks/cancel", {"id": asked["id"]}))["result"]
    assert canceled["status"]["state"] == "canceled"
    refused = (await call(http, "tasks/cancel", {"id": asked["id"]}))["error"]
    assert refused["code"] == -32002


async def test_non_blocking_send_and_a_reply(http: httpx.AsyncClient) -> None:
    params = send_params("sleep:0.2")
    params["configuration"] = {"blocking": False}
    task = (await call(http, "message/send", params))["result"]
    assert task["status"]["state"] in ("submitted", "working")
    reply = (await call(http, "message/send", send_params("reply: hi")))["result"]
    assert reply == {**reply, "kind": "message", "role": "agent"}
    assert reply["parts"] == [{"kind": "text", "text": "hi"}]


async def test_stream_and_resubscribe_carry_kinds_and_final(http: httpx.AsyncClient) -> None:
    events = await stream(http, "message/stream", send_params("sleep:0.1"))
    assert events[0]["kind"] == "task"
    kinds = {e["kind"] for e in events[1:]}
    assert kinds == {"status-update", "artifact-update"}
    assert events[-1]["status"]["state"] == "completed"
    assert events[-1]["final"] is True
    assert all(e["final"] is False for e in events[1:-1] if e["kind"] == "status-update")

    asked = (await call(http, "message/send", send_params("ask: name?")))["result"]
    sub_params = {"id": asked["id"]}
    await call(http, "tasks/cancel", sub_params)
    # A 0.3 client reads a stream whatever it holds: the error is one SSE event.
    body = {"jsonrpc": "2.0", "id": 9, "method": "tasks/resubscribe", "params": sub_params}
    async with http.stream("POST", URL, json=body) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        lines = [line async for line in response.aiter_lines() if line.startswith("data:")]
    assert [json.loads(line[5:])["error"]["code"] for line in lines] == [-32004]


@pytest.mark.parametrize(
    ("method", "params", "code"),
    [
        ("tasks/get", {"id": "nope"}, -32001),
        ("tasks/get", {}, -32602),
        ("tasks/pushNotificationConfig/set", {"taskId": "t"}, -32003),
        ("agent/getAuthenticatedExtendedCard", {}, -32007),
        ("tasks/list", {}, -32601),
        ("message/send", {"message": {"kind": "message", "role": "user"}}, -32602),
        ("SendMessage", {}, -32009),  # a 1.0 method without the 1.0 header
    ],
)
async def test_0_3_errors(http: httpx.AsyncClient, method: str, params: Json, code: int) -> None:
    assert (await call(http, method, params))["error"]["code"] == code


async def test_the_1_0_card_is_pure_and_the_0_3_card_finds_the_endpoint(
    http: httpx.AsyncClient,
) -> None:
    card = (await http.get("/.well-known/agent-card.json")).json()
    assert not {"url", "preferredTransport", "protocolVersion"} & card.keys()
    legacy = (await http.get("/.well-known/agent.json")).json()
    assert legacy["url"] == URL
    assert legacy["preferredTransport"] == "JSONRPC"
    assert legacy["protocolVersion"] == "0.3.0"
    assert legacy["supportedInterfaces"] == card["supportedInterfaces"]

    app = create_app(EchoAgent(), echo_card(URL), MemoryTaskStore(), card_v03_fields=True)
    transport = httpx.ASGITransport(app=app)
    async with (
        app.router.lifespan_context(app),  # the card is signed: the agent's keys are loaded
        httpx.AsyncClient(transport=transport, base_url=URL) as client,
    ):
        merged = (await client.get("/.well-known/agent-card.json")).json()
    assert merged["url"] == URL
    assert merged["name"] == "echo"
