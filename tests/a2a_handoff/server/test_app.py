"""`create_app`'s app: `POST /` goes straight to the JSON-RPC route only while nothing added to
the app could see the call — middleware, an exception handler — and answers as the whole
stack would; an unhandled error there is still the server error middleware's HTTP 500."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from a2a_handoff import MemoryTaskStore, create_app
from a2a_handoff.server.routes import JsonRpcRoute
from servers.echo import EchoAgent, echo_card

pytestmark = pytest.mark.anyio

URL = "http://agent.test/"
HEADERS = {"A2A-Version": "1.0"}


def app_of() -> Starlette:
    return create_app(EchoAgent(), echo_card(URL), MemoryTaskStore())


@asynccontextmanager
async def http_to(app: Starlette) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=transport, base_url=URL, timeout=10.0) as http,
    ):
        yield http


def send_body(text: str = "hi") -> dict[str, Any]:
    message = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": text}]}
    return {"jsonrpc": "2.0", "id": 7, "method": "SendMessage", "params": {"message": message}}


async def sent(http: httpx.AsyncClient) -> dict[str, Any]:
    response = await http.post("/", json=send_body(), headers=HEADERS)
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    answer: dict[str, Any] = response.json()
    return answer


async def test_send_message_answers_through_the_short_path() -> None:
    app = app_of()
    async with http_to(app) as http:
        answer = await sent(http)
        assert answer["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
        assert app._rpc is not None  # type: ignore[attr-defined]
        # Anything else at / still goes through the router: GET is answered 405 as before.
        refused = await http.get("/")
        assert refused.status_code == 405


class Seen:
    """A middleware noting the paths it saw."""

    def __init__(self, app: ASGIApp, paths: list[str]) -> None:
        self.app = app
        self.paths = paths

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            self.paths.append(scope["path"])
        await self.app(scope, receive, send)


async def test_middleware_added_to_the_app_sees_every_call() -> None:
    app = app_of()
    paths: list[str] = []
    app.add_middleware(Seen, paths=paths)
    async with http_to(app) as http:
        await sent(http)
    assert paths == ["/"]
    assert app._rpc is None  # type: ignore[attr-defined]


async def test_an_exception_handler_added_keeps_the_whole_stack() -> None:
    app = app_of()

    async def teapot(request: Request, exc: Exception) -> PlainTextResponse:
        return PlainTextResponse("teapot", status_code=418)

    app.add_exception_handler(LookupError, teapot)
    async with http_to(app) as http:
        await sent(http)
    assert app._rpc is None  # type: ignore[attr-defined]


async def test_an_error_escaping_the_route_is_an_http_500(monkeypatch: pytest.MonkeyPatch) -> None:
    async def broken(self: JsonRpcRoute, scope: Scope, receive: Receive) -> Response:
        raise RuntimeError("broken")

    monkeypatch.setattr(JsonRpcRoute, "answer", broken)
    app = app_of()
    async with http_to(app) as http:
        response = await http.post("/", json=send_body(), headers=HEADERS)
    assert app._rpc is not None  # type: ignore[attr-defined]
    assert response.status_code == 500
    assert response.text == "Internal Server Error"


async def test_a_header_sent_twice_counts_by_its_first_value() -> None:
    async with http_to(app_of()) as http:
        # A2A-Version, Content-Type: the first value is the one read, as before.
        headers = [
            ("A2A-Version", "1.0"),
            ("A2A-Version", "0.3"),
            ("Content-Type", "application/json"),
            ("Content-Type", "text/plain"),
        ]
        body = httpx.Request("POST", URL, json=send_body()).content
        response = await http.post("/", content=body, headers=headers)
        assert response.json()["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
        # The other way round: an A2A 0.3 call of a 1.0 method, and a browser's body type.
        headers.reverse()
        response = await http.post("/", content=body, headers=headers)
        assert response.json()["error"]["code"] == -32005


async def test_the_apps_500_handler_answers_an_error_escaping_the_route(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def broken(self: JsonRpcRoute, scope: Scope, receive: Receive) -> Response:
        raise RuntimeError("broken")

    async def handler(request: Request, exc: Exception) -> PlainTextResponse:
        return PlainTextResponse(f"ours: {exc}", status_code=500)

    monkeypatch.setattr(JsonRpcRoute, "answer", broken)
    app = app_of()
    app.add_exception_handler(500, handler)
    async with http_to(app) as http:
        response = await http.post("/", json=send_body(), headers=HEADERS)
    assert app._rpc is not None  # type: ignore[attr-defined]
    assert (response.status_code, response.text) == (500, "ours: broken")


async def test_a_failure_while_a_held_answer_is_sent_is_the_servers_500(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    class Broken(Response):  # not a plain Response: sent under the server error middleware
        async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
            raise RuntimeError("broken")

    async def answer(self: JsonRpcRoute, scope: Scope, receive: Receive) -> Response:
        return Broken()

    monkeypatch.setattr(JsonRpcRoute, "answer", answer)
    async with http_to(app_of()) as http:
        response = await http.post("/", json=send_body(), headers=HEADERS)
    assert (response.status_code, response.text) == (500, "Internal Server Error")
