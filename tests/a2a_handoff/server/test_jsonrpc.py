"""Bad input to the JSON-RPC endpoint, in process: the right JSON-RPC error, never an HTTP 500.

Every app here is the echo agent (`servers.echo`) behind `create_app`, served through
`httpx.ASGITransport` (which does not run the lifespan, so each app is wrapped in its
`lifespan_context`). The transport is built with `raise_app_exceptions=False` so that an
unhandled server error shows up as the HTTP 500 a real client would get.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.types import a2a_pb2
from google.protobuf import json_format

from a2a_handoff import (
    ApiKeyAuth,
    LimitsConfig,
    MemoryTaskStore,
    SqliteTaskStore,
    TaskStore,
    TrustConfig,
    create_app,
)
from a2a_handoff.protocol.agent_card import AgentCard
from servers.echo import EchoAgent, echo_card

pytestmark = pytest.mark.anyio

URL = "http://agent.test/"
HEADERS = {"A2A-Version": "1.0", "Content-Type": "application/json"}
KEYS = {"alice": "k-alice", "bob": "k-bob"}
ALICE = {"X-API-Key": "k-alice"}
BOB = {"Authorization": "Bearer k-bob"}
PUSH_METHODS = [
    "CreateTaskPushNotificationConfig",
    "GetTaskPushNotificationConfig",
    "ListTaskPushNotificationConfigs",
    "DeleteTaskPushNotificationConfig",
]

Json = dict[str, Any]


class Caller:
    """JSON-RPC over an in-process transport; remembers every response it saw."""

    def __init__(self, http: httpx.AsyncClient, headers: dict[str, str] | None = None) -> None:
        self.http = http
        self.headers = headers or {}
        self.seen: list[httpx.Response] = []

    async def raw(self, body: bytes | str, headers: dict[str, str] | None = None) -> httpx.Response:
        content = body.encode() if isinstance(body, str) else body
        merged = {**HEADERS, **self.headers, **(headers or {})}
        response = await self.http.post(URL, content=content, headers=merged)
        self.seen.append(response)
        return response

    async def rpc(
        self,
        method: str,
        params: Any = None,
        *,
        call_id: Any = 1,
        headers: dict[str, str] | None = None,
    ) -> httpx.Response:
        payload: Json = {"jsonrpc": "2.0", "id": call_id, "method": method}
        if params is not None:
            payload["params"] = params
        return await self.raw(json.dumps(payload), headers)

    async def result(self, method: str, params: Any = None, **headers: str) -> Json:
        response = await self.rpc(method, params, headers=headers)
        assert response.status_code == 200, response.text
        body = response.json()
        assert "error" not in body, body
        result: Json = body["result"]
        return result

    async def send(
        self,
        text: str,
        *,
        message_id: str | None = None,
        task_id: str | None = None,
        context_id: str | None = None,
        **headers: str,
    ) -> Json:
        result = await self.result(
            "SendMessage", send_params(text, message_id, task_id, context_id), **headers
        )
        task: Json = result["task"]
        return task

    async def total(self, **headers: str) -> int:
        result = await self.result("ListTasks", {"pageSize": 100}, **headers)
        total: int = result["totalSize"]
        return total


def send_params(
    text: str,
    message_id: str | None = None,
    task_id: str | None = None,
    context_id: str | None = None,
) -> Json:
    message: Json = {
        "messageId": message_id or str(uuid.uuid4()),
        "role": "ROLE_USER",
        "parts": [{"text": text}],
    }
    if task_id is not None:
        message["taskId"] = task_id
    if context_id is not None:
        message["contextId"] = context_id
    return {"message": message}


REASONS = {
    -32001: "TASK_NOT_FOUND",
    -32002: "TASK_NOT_CANCELABLE",
    -32003: "PUSH_NOTIFICATION_NOT_SUPPORTED",
    -32004: "UNSUPPORTED_OPERATION",
    -32005: "CONTENT_TYPE_NOT_SUPPORTED",
    -32006: "INVALID_AGENT_RESPONSE",
    -32007: "EXTENDED_AGENT_CARD_NOT_CONFIGURED",
    -32008: "EXTENSION_SUPPORT_REQUIRED",
    -32009: "VERSION_NOT_SUPPORTED",
}


def rpc_error(response: httpx.Response, code: int, *, status: int = 200) -> Json:
    """The JSON-RPC error of `response`, checked to be well formed and to carry `code` — an
    A2A error with its `google.rpc.ErrorInfo` first in `data` (spec §9.5)."""
    assert response.status_code == status, (response.status_code, response.text)
    assert response.headers["content-type"].startswith("application/json")
    assert "Traceback" not in response.text
    body = response.json()
    assert body["jsonrpc"] == "2.0"
    assert "result" not in body, body
    assert "id" in body
    error: Json = body["error"]
    assert error["code"] == code, body
    assert isinstance(error["message"], str)
    assert error["message"]
    if code in REASONS:
        info = error["data"][0]
        assert info["@type"] == "type.googleapis.com/google.rpc.ErrorInfo", error
        assert info["domain"] == "a2a-protocol.org"
        assert info["reason"] == REASONS[code]
    return error


def names(field: str, message: str) -> bool:
    return re.search(rf"(?<![\w.]){re.escape(field)}(?![\w])", message) is not None


@contextlib.asynccontextmanager
async def serve(store: TaskStore | None = None, **options: Any) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(EchoAgent(), echo_card(URL), store or MemoryTaskStore(), **options)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url=URL) as http:
            yield http


@pytest.fixture
async def caller() -> AsyncIterator[Caller]:
    async with serve() as http:
        yield Caller(http)


@pytest.fixture
async def small() -> AsyncIterator[Caller]:
    async with serve(limits=LimitsConfig(max_body=1024)) as http:
        yield Caller(http)


# -- -32700 / -32600 / -32601 -------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        b"{",
        b'{"jsonrpc": "2.0", "id": 1,',
        b"not json",
        b"",
        b"   ",
        b"\xff\xfe\x00{}",
        b"{'jsonrpc': '2.0'}",
        b'{"jsonrpc": "2.0"}}',
        b'{"jsonrpc": "2.0", "id": 1, "method": "GetTask",}',
    ],
    ids=["open", "truncated", "words", "empty", "blank", "bad-utf8", "quotes", "extra", "comma"],
)
async def test_malformed_json_is_a_parse_error(caller: Caller, body: bytes) -> None:
    response = await caller.raw(body)
    rpc_error(response, -32700)
    assert response.json()["id"] is None


@pytest.mark.parametrize("depth", [5_000, 100_000])
async def test_deeply_nested_json_is_a_parse_error(caller: Caller, depth: int) -> None:
    # Well under the 1 MiB body limit, but deeper than the JSON parser will go: the server
    # could not parse the body, which JSON-RPC calls a parse error (not an internal error).
    response = await caller.raw(b"[" * depth + b"]" * depth)
    rpc_error(response, -32700)
    response = await caller.raw(b'{"a":' * depth + b"1" + b"}" * depth)
    rpc_error(response, -32700)


@pytest.mark.parametrize(
    "body",
    [
        b"[]",
        b'[{"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "x"}}]',
        b"42",
        b"-1.5",
        b'"GetTask"',
        b"null",
        b"true",
        b'{"id": 1, "method": "GetTask", "params": {"id": "x"}}',
        b'{"jsonrpc": "1.0", "id": 1, "method": "GetTask", "params": {"id": "x"}}',
        b'{"jsonrpc": 2.0, "id": 1, "method": "GetTask", "params": {"id": "x"}}',
        b'{"jsonrpc": "2.0", "id": 1, "params": {"id": "x"}}',
        b'{"jsonrpc": "2.0", "id": 1, "method": 5}',
        b'{"jsonrpc": "2.0", "id": 1, "method": null}',
        b'{"jsonrpc": "2.0", "id": 1, "method": ["GetTask"]}',
        b'{"jsonrpc": "2.0", "id": 1, "method": {"name": "GetTask"}}',
        b'{"jsonrpc": "2.0", "id": 1, "method": ""}',
        b'{"jsonrpc": "2.0", "id": true, "method": "GetTask"}',
        b'{"jsonrpc": "2.0", "id": {"a": 1}, "method": "GetTask"}',
        b'{"jsonrpc": "2.0", "id": [1], "method": "GetTask"}',
    ],
    ids=[
        "empty-array",
        "batch",
        "number",
        "float",
        "string",
        "null",
        "bool",
        "no-jsonrpc",
        "jsonrpc-1.0",
        "jsonrpc-number",
        "no-method",
        "method-number",
        "method-null",
        "method-list",
        "method-object",
        "method-empty",
        "id-bool",
        "id-object",
        "id-list",
    ],
)
async def test_json_that_is_not_a_request_is_an_invalid_request(
    caller: Caller, body: bytes
) -> None:
    rpc_error(await caller.raw(body), -32600)


@pytest.mark.parametrize(
    "method", ["Nope", "message/send", "tasks/get", "sendMessage", "getTask", " GetTask"]
)
async def test_unknown_method(caller: Caller, method: str) -> None:
    response = await caller.rpc(method, {"id": "x"}, call_id="req-7")
    error = rpc_error(response, -32601)
    assert response.json()["id"] == "req-7"
    assert method in error["message"]


@pytest.mark.parametrize("params", [[1, 2], "params", 3, True], ids=["list", "str", "int", "bool"])
async def test_params_that_are_not_an_object(caller: Caller, params: Any) -> None:
    response = await caller.rpc("GetTask", params, call_id=7)
    rpc_error(response, -32602)
    # JSON-RPC 2.0 §5: the id could be read, so the response carries it.
    assert response.json()["id"] == 7


# -- -32602: params, naming the field ------------------------------------------------------


def message(**members: Any) -> Json:
    base: Json = {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": "hi"}]}
    base.update(members)
    return {key: value for key, value in base.items() if value is not None}


@pytest.mark.parametrize(
    ("method", "params", "field"),
    [
        ("SendMessage", {}, "message"),
        ("SendMessage", {"message": "hi"}, "message"),
        ("SendMessage", {"message": message(parts=[])}, "message.parts"),
        ("SendMessage", {"message": message(parts="hi")}, "message.parts"),
        (
            "SendMessage",
            {"message": {"role": "ROLE_USER", "parts": [{"text": "x"}]}},
            "message.messageId",
        ),
        ("SendMessage", {"message": message(messageId="")}, "message.messageId"),
        ("SendMessage", {"message": message(messageId=17)}, "message.messageId"),
        ("SendMessage", {"message": message(role="user")}, "message.role"),
        ("SendMessage", {"message": message(role="ROLE_AGENT")}, "message.role"),
        ("SendMessage", {"message": message(parts=[{"text": "a", "url": "b"}])}, "message.parts.0"),
        ("SendMessage", {"message": message(parts=[{"text": "a"}, {}])}, "message.parts.1"),
        (
            "SendMessage",
            {"message": message(parts=[{"raw": "not base64!"}])},
            "message.parts.0.raw",
        ),
        ("SendMessage", {"message": message(taskId=5)}, "message.taskId"),
        (
            "SendMessage",
            {"message": message(), "configuration": {"historyLength": -1}},
            "configuration.historyLength",
        ),
        ("SendStreamingMessage", {"message": message(parts=[])}, "message.parts"),
        ("GetTask", {}, "id"),
        ("GetTask", {"id": 5}, "id"),
        ("GetTask", {"id": ""}, "id"),
        ("GetTask", {"id": "x", "historyLength": -1}, "historyLength"),
        ("GetTask", {"id": "x", "historyLength": "ten"}, "historyLength"),
        ("ListTasks", {"pageSize": 0}, "pageSize"),
        ("ListTasks", {"pageSize": 101}, "pageSize"),
        ("ListTasks", {"status": "working"}, "status"),
        ("ListTasks", {"pageToken": "not-a-token"}, "pageToken"),
        ("ListTasks", {"historyLength": -5}, "historyLength"),
        ("CancelTask", {}, "id"),
        ("CancelTask", {"id": ["x"]}, "id"),
        ("SubscribeToTask", {}, "id"),
    ],
)
async def test_wrong_params_name_the_field(
    caller: Caller, method: str, params: Json, field: str
) -> None:
    error = rpc_error(await caller.rpc(method, params), -32602)
    assert names(field, error["message"]), error


async def test_missing_params_name_the_field(caller: Caller) -> None:
    error = rpc_error(await caller.rpc("SendMessage"), -32602)
    assert names("message", error["message"]), error
    error = rpc_error(await caller.rpc("GetTask"), -32602)
    assert names("id", error["message"]), error


async def test_context_id_not_matching_the_task(caller: Caller) -> None:
    task = await caller.send("ask: which city?")
    assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    params = send_params("Paris", task_id=task["id"], context_id="some-other-context")
    for method in ("SendMessage", "SendStreamingMessage"):
        error = rpc_error(await caller.rpc(method, params), -32602)
        assert names("message.contextId", error["message"]), error
    # Refused, not applied: the task still waits for its input.
    still = await caller.result("GetTask", {"id": task["id"]})
    assert still["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    # The matching context is fine.
    done = await caller.send("Paris", task_id=task["id"], context_id=task["contextId"])
    assert done["status"]["state"] == "TASK_STATE_COMPLETED"


# -- A2A errors ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("GetTask", {"id": "no-such-task"}),
        ("CancelTask", {"id": "no-such-task"}),
        ("SubscribeToTask", {"id": "no-such-task"}),
        ("SendMessage", send_params("hi", task_id="no-such-task")),
        ("SendStreamingMessage", send_params("hi", task_id="no-such-task")),
    ],
)
async def test_unknown_task(caller: Caller, method: str, params: Json) -> None:
    before = await caller.total()
    rpc_error(await caller.rpc(method, params), -32001)
    assert await caller.total() == before


async def test_cancel_of_a_terminal_task(caller: Caller) -> None:
    done = await caller.send("hello")
    assert done["status"]["state"] == "TASK_STATE_COMPLETED"
    rpc_error(await caller.rpc("CancelTask", {"id": done["id"]}), -32002)

    waiting = await caller.send("ask: anything?")
    canceled = await caller.result("CancelTask", {"id": waiting["id"]})
    assert canceled["status"]["state"] == "TASK_STATE_CANCELED"
    rpc_error(await caller.rpc("CancelTask", {"id": waiting["id"]}), -32002)
    # Still what it was: the refused cancel changed nothing.
    again = await caller.result("GetTask", {"id": done["id"]})
    assert again["status"] == done["status"]


async def test_subscribe_to_a_terminal_task(caller: Caller) -> None:
    done = await caller.send("hello")
    rpc_error(await caller.rpc("SubscribeToTask", {"id": done["id"]}), -32004)
    waiting = await caller.send("ask: anything?")
    await caller.result("CancelTask", {"id": waiting["id"]})
    rpc_error(await caller.rpc("SubscribeToTask", {"id": waiting["id"]}), -32004)


@pytest.mark.parametrize("method", ["SendMessage", "SendStreamingMessage"])
async def test_message_to_a_terminal_task(caller: Caller, method: str) -> None:
    done = await caller.send("hello")
    before = await caller.total()
    rpc_error(await caller.rpc(method, send_params("more", task_id=done["id"])), -32004)
    assert await caller.total() == before
    after = await caller.result("GetTask", {"id": done["id"]})
    assert after["history"] == done["history"]


@pytest.mark.parametrize(
    "headers",
    [{}, {"A2A-Version": "0.3"}, {"A2A-Version": "2.0"}, {"A2A-Version": "1"}, {"A2A-Version": ""}],
    ids=["missing", "0.3", "2.0", "major-only", "empty"],
)
async def test_unsupported_protocol_version(caller: Caller, headers: dict[str, str]) -> None:
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}})
    merged = {"Content-Type": "application/json", **headers}
    response = await caller.http.post(URL, content=body, headers=merged)
    rpc_error(response, -32009)


async def test_version_may_come_as_a_query_parameter(caller: Caller) -> None:
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}})
    json_type = {"Content-Type": "application/json"}
    response = await caller.http.post(URL + "?A2A-Version=1.0", content=body, headers=json_type)
    assert "result" in response.json(), response.text
    wrong = await caller.http.post(URL + "?A2A-Version=2.0", content=body, headers=json_type)
    rpc_error(wrong, -32009)


async def test_a_0_3_method_name_with_the_1_0_header_is_unknown(caller: Caller) -> None:
    rpc_error(await caller.rpc("message/send", send_params("hi")), -32601)


async def test_unknown_task_names_the_task_in_its_error_info(caller: Caller) -> None:
    error = rpc_error(await caller.rpc("GetTask", {"id": "t-404"}), -32001)
    assert error["data"] == [
        {
            "@type": "type.googleapis.com/google.rpc.ErrorInfo",
            "reason": "TASK_NOT_FOUND",
            "domain": "a2a-protocol.org",
            "metadata": {"taskId": "t-404"},
        }
    ]


async def test_standard_json_rpc_errors_carry_no_error_info(caller: Caller) -> None:
    error = rpc_error(await caller.rpc("NoSuchMethod", {}), -32601)
    assert "data" not in error


@pytest.mark.parametrize("content_type", ["text/plain", "application/xml", "multipart/form-data"])
async def test_a_body_that_is_not_json_sent_as_another_type_is_32005(
    caller: Caller, content_type: str
) -> None:
    before = await caller.total()
    body = str({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {}})
    error = rpc_error(await caller.raw(body, {"Content-Type": content_type}), -32005)
    assert content_type in error["message"]
    assert await caller.total() == before


@pytest.mark.parametrize("content_type", ["application/json-rpc", "application/octet-stream"])
async def test_valid_json_is_served_under_a_type_no_page_sends_unasked(
    caller: Caller, content_type: str
) -> None:
    body = json.dumps(
        {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": send_params("hi")}
    )
    response = await caller.raw(body, {"Content-Type": content_type})
    assert response.json()["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"


@pytest.mark.parametrize(
    "content_type",
    ["text/plain;charset=UTF-8", "application/x-www-form-urlencoded", "multipart/form-data", None],
)
async def test_valid_json_sent_as_a_type_a_page_sends_unasked_is_refused(
    caller: Caller, content_type: str | None
) -> None:
    # A web page may POST these (or a Blob with no type) to any address without a CORS
    # preflight: served, they would let any site the user visits drive a local agent.
    before = await caller.total()
    body = json.dumps(
        {"jsonrpc": "2.0", "id": 7, "method": "SendMessage", "params": send_params("hi")}
    )
    headers = {**HEADERS, **caller.headers}
    headers.pop("Content-Type", None)
    if content_type is not None:
        headers["Content-Type"] = content_type
    response = await caller.http.post(URL, content=body, headers=headers)
    error = rpc_error(response, -32005)
    assert response.json()["id"] == 7
    assert "application/json" in error["message"]
    assert await caller.total() == before


async def test_a_body_that_is_not_json_sent_as_json_stays_a_parse_error(caller: Caller) -> None:
    for content_type in ("application/json", "application/a2a+json; charset=utf-8"):
        rpc_error(await caller.raw("{not json", {"Content-Type": content_type}), -32700)


async def test_version_header_is_case_insensitive(caller: Caller) -> None:
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}})
    headers = {"a2a-version": "1.0", "content-type": "application/json"}
    response = await caller.http.post(URL, content=body, headers=headers)
    assert response.status_code == 200
    assert "result" in response.json()


@pytest.mark.parametrize("method", PUSH_METHODS)
async def test_push_notification_methods(caller: Caller, method: str) -> None:
    params = {"taskId": "t", "id": "c", "url": "https://client.example.com/webhook"}
    rpc_error(await caller.rpc(method, params), -32003)


async def test_send_with_a_push_config_is_refused_before_any_task(caller: Caller) -> None:
    before = await caller.total()
    params = send_params("hello")
    params["configuration"] = {
        "taskPushNotificationConfig": {"url": "https://client.example.com/webhook"}
    }
    rpc_error(await caller.rpc("SendMessage", params), -32003)
    assert await caller.total() == before


# -- body limit ----------------------------------------------------------------------------


async def test_body_over_the_limit_declared_up_front_is_not_read(small: Caller) -> None:
    pulled = 0

    async def body() -> AsyncIterator[bytes]:
        nonlocal pulled
        for _ in range(10_000):
            pulled += 1
            yield b"x" * 512

    headers = {**HEADERS, "Content-Length": str(512 * 10_000)}
    response = await small.http.post(URL, content=body(), headers=headers)
    rpc_error(response, -32100, status=413)
    assert pulled <= 1


async def test_body_over_the_limit_without_a_length_is_cut_short(small: Caller) -> None:
    pulled = 0

    async def body() -> AsyncIterator[bytes]:
        nonlocal pulled
        for _ in range(10_000):
            pulled += 1
            yield b"x" * 512

    response = await small.http.post(URL, content=body(), headers=HEADERS)
    assert response.request.headers.get("transfer-encoding") == "chunked"
    rpc_error(response, -32100, status=413)
    # 1024 bytes is two chunks: the server stops right after the one that crosses the limit.
    assert pulled <= 4


async def test_our_errors_carry_error_info_in_our_domain(small: Caller) -> None:
    error = rpc_error(await small.raw("x" * 2048), -32100, status=413)
    assert error["data"] == [
        {
            "@type": "type.googleapis.com/google.rpc.ErrorInfo",
            "reason": "PAYLOAD_TOO_LARGE",
            "domain": "a2a-handoff",
        }
    ]


async def test_body_limit_boundary(small: Caller) -> None:
    def padded(size: int) -> bytes:
        head = b'{"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}'
        return head + b" " * (size - len(head) - 1) + b"}"

    at_limit = await small.raw(padded(1024))
    assert at_limit.status_code == 200, at_limit.text
    assert "result" in at_limit.json()
    rpc_error(await small.raw(padded(1025)), -32100, status=413)


# -- idempotency ---------------------------------------------------------------------------


async def test_repeated_message_id_returns_the_same_task(caller: Caller) -> None:
    first = await caller.send("hello", message_id="dup-1")
    total = await caller.total()
    for _ in range(3):
        again = await caller.send("hello", message_id="dup-1")
        assert again["id"] == first["id"]
    # Even with other content: a message id names one message.
    other = await caller.send("something else", message_id="dup-1")
    assert other["id"] == first["id"]
    assert await caller.total() == total


async def test_concurrent_repeats_of_a_message_id_make_one_task(caller: Caller) -> None:
    before = await caller.total()
    params = send_params("hello", message_id="dup-concurrent")
    responses = await asyncio.gather(*(caller.rpc("SendMessage", params) for _ in range(8)))
    ids = {response.json()["result"]["task"]["id"] for response in responses}
    assert len(ids) == 1
    assert await caller.total() == before + 1


async def test_repeated_follow_up_is_not_applied_twice(caller: Caller) -> None:
    waiting = await caller.send("ask: which city?")
    done = await caller.send("Paris", task_id=waiting["id"], message_id="answer-1")
    assert done["status"]["state"] == "TASK_STATE_COMPLETED"
    again = await caller.send("Paris", task_id=waiting["id"], message_id="answer-1")
    assert again["id"] == done["id"]
    assert again["history"] == done["history"]


# -- input that parses but is odd ------------------------------------------------------------


async def test_lone_surrogate_in_the_id_is_still_a_json_rpc_answer(caller: Caller) -> None:
    # `"\ud800"` is a legal JSON string escape (RFC 8259 §7), so this is a parseable request
    # with an unknown method: the answer is a JSON-RPC error, never an HTTP 500.
    response = await caller.raw(b'{"jsonrpc": "2.0", "id": "\\ud800", "method": "Nope"}')
    rpc_error(response, -32601)


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


ODD_MESSAGES = {
    # NaN is not JSON (RFC 8259 §6), although Python's parser reads it.
    "nan-data": '{"data": NaN}',
    "infinity-data": '{"data": {"x": -Infinity}}',
    # Numbers too large for a double are infinite once parsed: refused alike.
    "overflow-data": '{"data": {"x": 1e999}}',
    "negative-overflow-data": '{"data": [-1.5e400]}',
    # Valid JSON, nested deeper than the serializer goes but well within the parser's reach.
    "deep-data": '{"data": ' + nested(300) + "}",
    # Valid JSON whose string cannot be encoded as UTF-8.
    "lone-surrogate-text": '{"text": "caf\\udce9"}',
}
MUST_BE_REFUSED = {"nan-data", "infinity-data", "overflow-data", "negative-overflow-data"}


@pytest.mark.parametrize("number", ["NaN", "Infinity", "-Infinity", "1e999", "-2E+400"])
async def test_non_finite_numbers_are_refused_alike(caller: Caller, number: str) -> None:
    body = (
        '{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": '
        '{"messageId": "nf", "role": "ROLE_USER", "parts": [{"data": {"x": ' + number + "}}]}}}"
    )
    error = rpc_error(await caller.raw(body), -32700)
    assert "finite" in error["message"] or "not JSON" in error["message"]
    assert await caller.total() == 0


@pytest.mark.parametrize("store_kind", ["memory", "sqlite"])
@pytest.mark.parametrize("odd", sorted(ODD_MESSAGES))
async def test_odd_input_never_breaks_the_store(tmp_path: Path, store_kind: str, odd: str) -> None:
    store: TaskStore = (
        MemoryTaskStore() if store_kind == "memory" else SqliteTaskStore(tmp_path / "odd.db")
    )
    async with serve(store) as http:
        caller = Caller(http)
        good = await caller.send("hello")
        before = await caller.total()
        body = (
            '{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": '
            '{"messageId": "odd-1", "role": "ROLE_USER", "parts": [' + ODD_MESSAGES[odd] + "]}}}"
        )
        response = await caller.raw(body)
        problems: list[str] = []
        reply: Json = response.json() if response.status_code == 200 else {}
        code = reply.get("error", {}).get("code")
        refused = code in (-32700, -32600, -32602)
        if response.status_code != 200 or (code is not None and not refused):
            # Not the client's mistake reported as such: a server failure.
            problems.append(f"SendMessage answered {response.status_code} {response.text[:300]}")
        elif odd in MUST_BE_REFUSED and not refused:
            problems.append(f"non-JSON input was taken: {response.text[:300]}")
        # Whatever the answer, the store still answers for every task afterwards.
        for method, params in [
            ("GetTask", {"id": good["id"], "historyLength": 10}),
            ("ListTasks", {"historyLength": 10, "includeArtifacts": True}),
        ]:
            after = await caller.rpc(method, params)
            if after.status_code != 200 or "error" in after.json():
                problems.append(f"then {method} answered {after.status_code} {after.text[:300]}")
        if "result" in reply:
            # Taken: then readable like any other task.
            task_id = reply["result"]["task"]["id"]
            after = await caller.rpc("GetTask", {"id": task_id, "historyLength": 10})
            if after.status_code != 200 or "error" in after.json():
                problems.append(f"then its GetTask answered {after.text[:300]}")
        elif refused and await caller.total() != before:
            problems.append("refused, yet a task was stored")
        assert not problems, problems


# -- the store stays consistent ------------------------------------------------------------


async def test_sqlite_store_is_consistent_after_bad_input(tmp_path: Path) -> None:
    async with serve(SqliteTaskStore(tmp_path / "a2a.db")) as http:
        caller = Caller(http)
        good = await caller.send("hello")
        waiting = await caller.send("ask: which city?")
        snapshot = await caller.result("GetTask", {"id": good["id"]})
        before = await caller.total()

        bad: list[tuple[bytes | str, dict[str, str], int]] = [
            (b"{", {}, -32700),
            (b"[]", {}, -32600),
            (b"17", {}, -32600),
            (json.dumps({"id": 1, "method": "GetTask"}), {}, -32600),
            (json.dumps({"jsonrpc": "2.0", "id": 1, "method": 3}), {}, -32600),
            (json.dumps({"jsonrpc": "2.0", "id": 1, "method": "Nope"}), {}, -32601),
        ]
        for body, headers, code in bad:
            rpc_error(await caller.raw(body, headers), code)

        calls: list[tuple[str, Any, dict[str, str], int]] = [
            ("SendMessage", {"message": message(parts=[])}, {}, -32602),
            ("SendMessage", {"message": message(parts=[{"text": "a", "data": 1}])}, {}, -32602),
            ("SendMessage", {"message": message(role="ROLE_AGENT")}, {}, -32602),
            ("SendMessage", send_params("x", task_id="nope"), {}, -32001),
            ("SendMessage", send_params("x", task_id=good["id"]), {}, -32004),
            ("SendStreamingMessage", send_params("x", task_id=good["id"]), {}, -32004),
            (
                "SendMessage",
                send_params("x", task_id=waiting["id"], context_id="elsewhere"),
                {},
                -32602,
            ),
            ("GetTask", {"id": "nope"}, {}, -32001),
            ("CancelTask", {"id": "nope"}, {}, -32001),
            ("CancelTask", {"id": good["id"]}, {}, -32002),
            ("SubscribeToTask", {"id": good["id"]}, {}, -32004),
            ("SubscribeToTask", {"id": waiting["id"]}, {"Last-Event-ID": "abc"}, -32602),
            ("ListTasks", {"pageToken": "garbage"}, {}, -32602),
            ("ListTasks", {"status": "TASK_STATE_NOPE"}, {}, -32602),
            ("ListTasks", {}, {"A2A-Version": "0.3"}, -32009),
            ("GetTask", {"id": good["id"]}, {"A2A-Version": "9.9"}, -32009),
            (PUSH_METHODS[0], {"taskId": good["id"]}, {}, -32003),
        ]
        for method, params, headers, code in calls:
            rpc_error(await caller.rpc(method, params, headers=headers), code)

        assert await caller.result("GetTask", {"id": good["id"]}) == snapshot
        still = await caller.result("GetTask", {"id": waiting["id"]})
        assert still["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        assert await caller.total() == before
        health = await http.get(URL + "health")
        assert health.status_code == 200


# -- authentication and ownership ----------------------------------------------------------


@pytest.fixture
async def auth_http() -> AsyncIterator[httpx.AsyncClient]:
    async with serve(trust=TrustConfig(auth=ApiKeyAuth.from_keys(KEYS))) as http:
        yield http


def assert_no_secret(responses: list[httpx.Response]) -> None:
    assert responses
    for response in responses:
        seen = response.text + " " + " ".join(f"{k}: {v}" for k, v in response.headers.items())
        for secret in (*KEYS.values(), "k-mallory"):
            assert secret not in seen, response.text


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"X-API-Key": ""},
        {"X-API-Key": "k-mallory"},
        {"X-API-Key": "K-ALICE"},
        {"X-API-Key": "k-alicex"},
        {"Authorization": "Bearer k-mallory"},
        {"Authorization": "Basic k-alice"},
        {"Authorization": "k-alice"},
        {"Authorization": "Bearer"},
    ],
    ids=[
        "none",
        "empty-key",
        "wrong-key",
        "wrong-case",
        "near-miss",
        "wrong-bearer",
        "basic",
        "no-scheme",
        "bearer-no-token",
    ],
)
async def test_missing_or_wrong_credentials(
    auth_http: httpx.AsyncClient, headers: dict[str, str]
) -> None:
    caller = Caller(auth_http, headers)
    for method, params in [("ListTasks", {}), ("SendMessage", send_params("hello"))]:
        response = await caller.rpc(method, params)
        rpc_error(response, -32101, status=401)
        assert response.headers["www-authenticate"].lower().startswith("bearer")
    # Checked before anything else is read from the request.
    rpc_error(await caller.raw(b"{not json"), -32101, status=401)
    assert_no_secret(caller.seen)
    # Nothing was created on anyone's behalf.
    alice = Caller(auth_http, ALICE)
    assert await alice.total() == 0


async def test_either_credential_form_works(auth_http: httpx.AsyncClient) -> None:
    by_header = Caller(auth_http, ALICE)
    by_bearer = Caller(auth_http, {"Authorization": "Bearer k-alice"})
    task = await by_header.send("hello")
    same = await by_bearer.result("GetTask", {"id": task["id"]})
    assert same["id"] == task["id"]


async def test_tasks_belong_to_their_principal(auth_http: httpx.AsyncClient) -> None:
    alice = Caller(auth_http, ALICE)
    bob = Caller(auth_http, BOB)
    done = await alice.send("hello", message_id="shared-id")
    waiting = await alice.send("ask: which city?")
    missing = "00000000-0000-0000-0000-000000000000"
    probes: list[tuple[str, Callable[[str], Json]]] = [
        ("GetTask", lambda task_id: {"id": task_id}),
        ("CancelTask", lambda task_id: {"id": task_id}),
        ("SubscribeToTask", lambda task_id: {"id": task_id}),
        ("SendMessage", lambda task_id: send_params("Paris", task_id=task_id)),
        ("SendStreamingMessage", lambda task_id: send_params("Paris", task_id=task_id)),
    ]
    for task in (done, waiting):
        for method, params_for in probes:
            error = rpc_error(await bob.rpc(method, params_for(task["id"])), -32001)
            # Exactly as if it did not exist: the same answer as for a task nobody has.
            absent = rpc_error(await bob.rpc(method, params_for(missing)), -32001)
            assert error["message"].replace(task["id"], "ID") == absent["message"].replace(
                missing, "ID"
            )

    listed = await bob.result("ListTasks", {})
    assert listed["tasks"] == []
    assert listed["totalSize"] == 0
    # A context id does not open a door either.
    listed = await bob.result("ListTasks", {"contextId": done["contextId"]})
    assert listed["tasks"] == []

    # Bob's attempts changed nothing of Alice's.
    still = await alice.result("GetTask", {"id": waiting["id"]})
    assert still["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert len(still["history"]) == len(waiting["history"])
    assert await alice.total() == 2

    # The same message id from Bob is Bob's own message: a task of his, not Alice's.
    own = await bob.send("hello", message_id="shared-id")
    assert own["id"] != done["id"]
    assert await bob.total() == 1
    assert await alice.total() == 2

    assert_no_secret(alice.seen + bob.seen)


async def test_card_declares_the_security_schemes(auth_http: httpx.AsyncClient) -> None:
    # Discovery is public: the card needs no credentials.
    response = await auth_http.get(URL + ".well-known/agent-card.json")
    assert response.status_code == 200
    card = response.json()
    schemes = card["securitySchemes"]
    api_keys = [s["apiKeySecurityScheme"] for s in schemes.values() if "apiKeySecurityScheme" in s]
    assert {"location": "header", "name": "X-API-Key"}.items() <= api_keys[0].items()
    bearers = [
        s["httpAuthSecurityScheme"] for s in schemes.values() if "httpAuthSecurityScheme" in s
    ]
    assert bearers[0]["scheme"].lower() == "bearer"
    required = {
        name for requirement in card["securityRequirements"] for name in requirement["schemes"]
    }
    assert required
    assert required <= set(schemes)
    AgentCard.model_validate(card)
    json_format.ParseDict(card, a2a_pb2.AgentCard())
    assert_no_secret([response])


async def test_card_without_auth_declares_no_schemes(caller: Caller) -> None:
    card = (await caller.http.get(URL + ".well-known/agent-card.json")).json()
    assert "securitySchemes" not in card
    assert "securityRequirements" not in card


@pytest.mark.parametrize(
    "call_id", [0, 7, -12, 2**70, "1", "é", "line\u2028sep", 'q"\\', "\U0001f600"]
)
async def test_a_result_carries_the_id_as_json_writes_it(caller: Caller, call_id: Any) -> None:
    body = {
        "jsonrpc": "2.0",
        "id": call_id,
        "method": "SendMessage",
        "params": {
            "message": {
                "messageId": str(uuid.uuid4()),
                "role": "ROLE_USER",
                "parts": [{"text": "hello"}],
            }
        },
    }
    response = await caller.raw(json.dumps(body).encode())
    assert response.json()["id"] == call_id
    assert response.content.startswith(b'{"jsonrpc":"2.0","id":' + json.dumps(call_id).encode())
    assert response.json()["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
