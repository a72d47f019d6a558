"""The HTTP+JSON binding, in process: every route, the spec's status mapping, AIP-193 errors."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from a2a_handoff import ApiKeyAuth, LimitsConfig, MemoryTaskStore, TrustConfig, create_app
from servers.echo import EchoAgent, echo_card

pytestmark = pytest.mark.anyio
URL = "http://agent.test"
V1 = {"A2A-Version": "1.0"}
Json = dict[str, Any]


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(EchoAgent(), echo_card(URL + "/"), MemoryTaskStore())
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app, raise_app_exceptions=False),
            base_url=URL,
            headers=V1,
        ) as client,
    ):
        yield client


def message(text: str, **ids: str) -> Json:
    return {
        "message": {
            "messageId": str(uuid.uuid4()),
            "role": "ROLE_USER",
            "parts": [{"text": text}],
            **ids,
        }
    }


def aip193(response: httpx.Response, status: int, reason: str | None) -> Json:
    """The AIP-193 error of `response`: its code is the HTTP status, ErrorInfo in details."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    error: Json = response.json()["error"]
    assert error["code"] == status
    assert isinstance(error["status"], str)
    assert error["message"]
    if reason is None:
        assert "details" not in error
    else:
        [info] = error["details"]
        assert info["@type"] == "type.googleapis.com/google.rpc.ErrorInfo"
        assert info["reason"] == reason
        assert info["domain"] == "a2a-protocol.org"
    return error


async def events(http: httpx.AsyncClient, method: str, path: str, body: Any = None) -> list[Json]:
    found = []
    async with http.stream(method, path, json=body) as response:
        assert response.status_code == 200, await response.aread()
        assert response.headers["content-type"].startswith("text/event-stream")
        async for line in response.aiter_lines():
            if line.startswith("data:"):
                found.append(json.loads(line[5:]))
    return found


async def test_send_get_list_and_cancel(http: httpx.AsyncClient) -> None:
    sent = await http.post("/message:send", json=message("hello"))
    assert sent.status_code == 200
    assert sent.headers["content-type"] == "application/json"
    task = sent.json()["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert task["artifacts"][0]["parts"] == [{"text": "hello"}]

    got = (await http.get(f"/tasks/{task['id']}", params={"historyLength": 1})).json()
    assert got["id"] == task["id"]
    assert len(got["history"]) == 1

    waiting = (await http.post("/message:send", json=message("ask: name?"))).json()["task"]
    listed = await http.get(
        "/tasks",
        params={"contextId": waiting["contextId"], "status": "input-required", "pageSize": 5},
    )
    body = listed.json()
    assert [t["id"] for t in body["tasks"]] == [waiting["id"]]
    assert body["nextPageToken"] == ""
    assert body["pageSize"] == 5
    assert body["totalSize"] == 1
    by_enum = await http.get("/tasks", params={"status": "TASK_STATE_COMPLETED"})
    assert [t["id"] for t in by_enum.json()["tasks"]] == [task["id"]]
    for flag, shown in (("true", True), ("false", False)):
        page = await http.get(
            "/tasks", params={"contextId": task["contextId"], "includeArtifacts": flag}
        )
        [listed_task] = page.json()["tasks"]
        assert ("artifacts" in listed_task) is shown

    canceled = await http.post(f"/tasks/{waiting['id']}:cancel")
    assert canceled.json()["status"]["state"] == "TASK_STATE_CANCELED"
    again = await http.post(f"/tasks/{waiting['id']}:cancel", json={})
    aip193(again, 409, "TASK_NOT_CANCELABLE")


async def test_stream_events_are_bare_stream_responses(http: httpx.AsyncClient) -> None:
    items = await events(http, "POST", "/message:stream", message("sleep:0.1"))
    assert "task" in items[0]
    assert "jsonrpc" not in items[0]
    assert items[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert any("artifactUpdate" in i for i in items)


async def test_a_direct_reply_is_a_message(http: httpx.AsyncClient) -> None:
    sent = (await http.post("/message:send", json=message("reply: hi there"))).json()
    assert sent["message"]["parts"] == [{"text": "hi there"}]
    streamed = await events(http, "POST", "/message:stream", message("reply: again"))
    assert [i["message"]["parts"] for i in streamed] == [[{"text": "again"}]]


@pytest.mark.parametrize("verb", ["GET", "POST"])
async def test_subscribe_stays_open_through_input_required_until_terminal(
    http: httpx.AsyncClient, verb: str
) -> None:
    task = (await http.post("/message:send", json=message("ask: name?"))).json()["task"]

    async def answer_soon() -> None:
        await asyncio.sleep(0.2)
        follow_up = message("Ada", taskId=task["id"])
        await http.post("/message:send", json=follow_up)

    answering = asyncio.create_task(answer_soon())
    items = await events(http, verb, f"/tasks/{task['id']}:subscribe")
    await answering
    assert items[0]["task"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert items[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"


@pytest.mark.parametrize(
    ("method", "path", "status", "reason"),
    [
        ("GET", "/tasks/nope", 404, "TASK_NOT_FOUND"),
        ("POST", "/tasks/nope:cancel", 404, "TASK_NOT_FOUND"),
        ("POST", "/tasks/nope:subscribe", 404, "TASK_NOT_FOUND"),
        ("POST", "/tasks/t/pushNotificationConfigs", 400, "PUSH_NOTIFICATION_NOT_SUPPORTED"),
        ("GET", "/tasks/t/pushNotificationConfigs", 400, "PUSH_NOTIFICATION_NOT_SUPPORTED"),
        ("GET", "/tasks/t/pushNotificationConfigs/c", 400, "PUSH_NOTIFICATION_NOT_SUPPORTED"),
        ("DELETE", "/tasks/t/pushNotificationConfigs/c", 400, "PUSH_NOTIFICATION_NOT_SUPPORTED"),
        ("GET", "/extendedAgentCard", 400, "UNSUPPORTED_OPERATION"),
        ("GET", "/no/such/route", 404, None),
        ("GET", "/message:send", 405, None),
        ("DELETE", "/tasks/t", 405, None),
        ("GET", "/tasks?pageSize=many", 400, None),
        ("GET", "/tasks?includeArtifacts=perhaps", 400, None),
    ],
)
async def test_errors_have_the_spec_status_and_aip193_body(
    http: httpx.AsyncClient, method: str, path: str, status: int, reason: str | None
) -> None:
    aip193(await http.request(method, path), status, reason)


async def test_terminal_tasks_refuse_subscribe_and_messages(http: httpx.AsyncClient) -> None:
    done = (await http.post("/message:send", json=message("hello"))).json()["task"]
    aip193(await http.get(f"/tasks/{done['id']}:subscribe"), 400, "UNSUPPORTED_OPERATION")
    more = await http.post("/message:send", json=message("more", taskId=done["id"]))
    aip193(more, 400, "UNSUPPORTED_OPERATION")


async def test_version_content_type_and_body_are_checked(http: httpx.AsyncClient) -> None:
    body = json.dumps(message("hi"))
    no_version = await http.post(
        "/message:send",
        content=body,
        headers={"A2A-Version": "", "Content-Type": "application/json"},
    )
    aip193(no_version, 400, "VERSION_NOT_SUPPORTED")
    future = await http.post("/message:send", content=body, headers={"A2A-Version": "9.0"})
    aip193(future, 400, "VERSION_NOT_SUPPORTED")
    by_query = await http.post(
        "/message:send?A2A-Version=1.0",
        content=body,
        headers={"A2A-Version": "", "Content-Type": "application/json"},
    )
    assert by_query.status_code == 200
    text = await http.post("/message:send", content=body, headers={"Content-Type": "text/plain"})
    aip193(text, 415, "CONTENT_TYPE_NOT_SUPPORTED")
    a2a_json = await http.post(
        "/message:send", content=body, headers={"Content-Type": "application/a2a+json"}
    )
    assert a2a_json.status_code == 200
    broken = await http.post(
        "/message:send", content=b"{nope", headers={"Content-Type": "application/json"}
    )
    aip193(broken, 400, None)
    not_object = await http.post("/message:send", json=[1, 2])
    aip193(not_object, 400, None)
    missing = await http.post("/message:send", json={"message": {"role": "ROLE_USER"}})
    assert "message.messageId" in aip193(missing, 400, None)["message"]
    listed = (await http.get("/tasks")).json()
    assert listed["totalSize"] == 1  # only the one sent by query version: nothing else stored


async def test_auth_and_body_size(http: httpx.AsyncClient) -> None:
    app = create_app(
        EchoAgent(),
        echo_card(URL + "/"),
        MemoryTaskStore(),
        trust=TrustConfig(auth=ApiKeyAuth.from_keys({"alice": "k"})),
        limits=LimitsConfig(max_body=200),
    )
    transport = httpx.ASGITransport(app=app)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=transport, base_url=URL, headers=V1) as client,
    ):
        denied = await client.get("/tasks")
        error = denied.json()["error"]
        assert denied.status_code == 401
        assert error["status"] == "UNAUTHENTICATED"
        assert denied.headers["www-authenticate"].startswith("Bearer")
        assert (await client.get("/tasks", headers={"X-API-Key": "k"})).status_code == 200
        big = await client.post(
            "/message:send", json=message("x" * 500), headers={"X-API-Key": "k"}
        )
        assert big.status_code == 413
        assert big.json()["error"]["code"] == 413
