"""Property tests: whatever is POSTed, the endpoint answers with well-formed JSON-RPC.

Random bytes, random JSON values and random JSON-RPC-shaped objects (our method names plus
junk, random params trees, valid and invalid credentials) are sent to one in-process app. Every
reply must be HTTP 200, 401 or 413 carrying a JSON-RPC 2.0 response (or, for streams, SSE
frames each holding one): `jsonrpc` "2.0", an `id`, exactly one of `result`/`error`, an integer
`error.code` from the codes the library defines, and never a traceback.

Hypothesis drives a synchronous property in a worker thread (`anyio.to_thread`); each example
runs its request on the test's event loop through `anyio.from_thread.run`, so one app, one
lifespan and one loop serve every example.
"""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
import anyio.from_thread
import anyio.to_thread
import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from a2a_handoff import ApiKeyAuth, LimitsConfig, MemoryTaskStore, TrustConfig, create_app
from a2a_handoff.errors import RpcError
from servers.echo import EchoAgent, echo_card

pytestmark = pytest.mark.anyio

URL = "http://agent.test/"
MAX_BODY = 2048
KEYS = {"alice": "k-alice", "bob": "k-bob"}
ALICE = {"X-API-Key": "k-alice"}
METHODS = [
    "SendMessage",
    "SendStreamingMessage",
    "GetTask",
    "ListTasks",
    "CancelTask",
    "SubscribeToTask",
    "GetExtendedAgentCard",
    "ListHandoffs",
    "CreateTaskPushNotificationConfig",
    "GetTaskPushNotificationConfig",
    "ListTaskPushNotificationConfigs",
    "DeleteTaskPushNotificationConfig",
]
STATES = [
    "TASK_STATE_SUBMITTED",
    "TASK_STATE_WORKING",
    "TASK_STATE_INPUT_REQUIRED",
    "TASK_STATE_COMPLETED",
    "TASK_STATE_CANCELED",
    "working",
]
FUZZ = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

Json = dict[str, Any]


def _known_codes() -> frozenset[int]:
    codes: set[int] = set()
    todo: list[type[RpcError]] = [RpcError]
    while todo:
        cls = todo.pop()
        codes.add(cls.code)
        todo.extend(cls.__subclasses__())
    return frozenset(codes)


KNOWN_CODES = _known_codes()
# Errors raised before the request's id could be read: their id is null.
BEFORE_ID = {-32700, -32600, -32100, -32101}


# -- checking a reply ----------------------------------------------------------------------


def valid_id(value: Any) -> bool:
    return value is None or (isinstance(value, str | int) and not isinstance(value, bool))


def check_message(body: Any, request: Any) -> None:
    """One JSON-RPC response object, answering `request` (a parsed payload, when known)."""
    assert isinstance(body, dict), body
    assert body.get("jsonrpc") == "2.0", body
    assert "id" in body, body
    assert ("result" in body) != ("error" in body), body
    error = body.get("error")
    if error is not None:
        assert isinstance(error, dict), body
        code = error.get("code")
        assert isinstance(code, int), body
        assert not isinstance(code, bool), body
        assert code in KNOWN_CODES, body
        assert isinstance(error.get("message"), str), body
    # JSON-RPC 2.0 §5: once the id could be read, the response carries it.
    read_id = isinstance(request, dict) and valid_id(request.get("id"))
    if read_id and (error is None or error["code"] not in BEFORE_ID):
        # Compared as the server read it: JSON joins an escaped surrogate pair into one char.
        sent_id = json.loads(json.dumps(request.get("id")))
        assert body["id"] == sent_id, (body, request)


def check_reply(response: httpx.Response, request: Any = None) -> None:
    assert response.status_code in (200, 401, 413), (response.status_code, response.text[:500])
    assert "Traceback" not in response.text
    content_type = response.headers.get("content-type", "")
    if content_type.startswith("text/event-stream"):
        assert response.status_code == 200
        frames = [
            line[len("data:") :].strip()
            for line in response.text.splitlines()
            if line.startswith("data:")
        ]
        assert frames, response.text[:500]
        for frame in frames:
            check_message(json.loads(frame), request)
        return
    assert content_type.startswith("application/json"), (content_type, response.text[:500])
    body = response.json()
    check_message(body, request)
    code = body.get("error", {}).get("code")
    if response.status_code == 401:
        assert code == -32101, body
    elif response.status_code == 413:
        assert code == -32100, body
    else:
        assert code not in (-32100, -32101), body


# -- strategies ----------------------------------------------------------------------------

# JSON strings may hold any code point, escaped lone surrogates included (RFC 8259 §7).
lone_surrogates = st.integers(0xD800, 0xDFFF).map(chr)
strings = st.one_of(
    st.text(max_size=12),
    st.lists(st.one_of(st.characters(), lone_surrogates), max_size=6).map("".join),
)
scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), strings)
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(strings, inner, max_size=4)
    ),
    max_leaves=12,
)
# What a caller may present: mostly good credentials, sometimes none or wrong ones.
credentials = st.sampled_from(
    [ALICE, ALICE, ALICE, {"Authorization": "Bearer k-bob"}, {}, {"X-API-Key": "k-mallory"}]
)
versions = st.sampled_from(
    [{"A2A-Version": "1.0"}] * 4 + [{}, {"A2A-Version": "0.3"}, {"A2A-Version": "1.0.1"}]
)


def encode(value: Any) -> bytes:
    # Python's encoder writes NaN/Infinity tokens and escapes lone surrogates.
    return json.dumps(value).encode()


def part_strategy() -> st.SearchStrategy[Any]:
    raw = st.binary(max_size=16).map(lambda data: base64.b64encode(data).decode())
    return st.one_of(
        st.fixed_dictionaries({"text": strings}),
        st.fixed_dictionaries({"data": json_values}, optional={"mediaType": strings}),
        st.fixed_dictionaries({"url": strings}, optional={"filename": strings}),
        st.fixed_dictionaries({"raw": raw | strings}, optional={"mediaType": strings}),
        st.dictionaries(
            st.sampled_from(["text", "data", "url", "raw", "mediaType", "metadata", "kind"]),
            json_values,
            max_size=3,
        ),
    )


def params_strategy(task_ids: list[str]) -> st.SearchStrategy[Any]:
    known = st.sampled_from(task_ids) if task_ids else st.nothing()
    task_id = st.one_of(known, known, strings, json_values)
    message = st.fixed_dictionaries(
        {
            "messageId": st.one_of(st.uuids().map(str), st.uuids().map(str), strings, json_values),
            "role": st.one_of(st.just("ROLE_USER"), st.just("ROLE_USER"), json_values),
            # The first part keeps the echo agent off its `sleep:` command.
            "parts": st.one_of(
                st.lists(part_strategy(), max_size=3).map(lambda ps: [{"text": "fuzz"}, *ps]),
                json_values,
            ),
        },
        optional={
            "taskId": task_id,
            "contextId": strings,
            "referenceTaskIds": st.lists(strings, max_size=2),
            "extensions": st.lists(strings, max_size=2),
            "metadata": json_values,
        },
    )
    configuration = st.fixed_dictionaries(
        {},
        optional={
            "returnImmediately": st.booleans(),
            "historyLength": st.one_of(st.integers(-2, 5), json_values),
            "acceptedOutputModes": st.lists(strings, max_size=2),
            "taskPushNotificationConfig": json_values,
        },
    )
    send = st.fixed_dictionaries(
        {"message": st.one_of(message, message, message, json_values)},
        optional={"configuration": configuration, "metadata": json_values, "tenant": strings},
    )
    by_id = st.fixed_dictionaries(
        {"id": task_id},
        optional={"historyLength": st.one_of(st.integers(-2, 20), json_values), "tenant": strings},
    )
    listing = st.fixed_dictionaries(
        {},
        optional={
            "contextId": strings,
            "status": st.one_of(st.sampled_from(STATES), json_values),
            "pageSize": st.one_of(st.integers(-5, 150), json_values),
            "pageToken": strings,
            "historyLength": st.one_of(st.integers(-2, 20), json_values),
            "includeArtifacts": st.one_of(st.booleans(), json_values),
            "statusTimestampAfter": strings,
        },
    )
    return st.one_of(st.none(), json_values, send, send, by_id, by_id, listing)


def envelope_strategy(task_ids: list[str]) -> st.SearchStrategy[Json]:
    return st.fixed_dictionaries(
        {
            "jsonrpc": st.one_of(st.just("2.0"), st.just("2.0"), st.just("2.0"), json_values),
            "method": st.one_of(st.sampled_from(METHODS), st.sampled_from(METHODS), json_values),
        },
        optional={
            "id": st.one_of(st.integers(), st.uuids().map(str), strings, json_values),
            "params": params_strategy(task_ids),
        },
    ).map(lambda request: finite_stream(request, task_ids[1:]))


def finite_stream(request: Json, waiting: list[str]) -> Json:
    """A subscription to a task waiting for input stays open until the task ends (spec
    §3.1.6), and the in-process transport answers only once a response is complete: such a
    request subscribes to an unknown task instead (-32001), which still exercises the path."""
    params = request.get("params")
    if (
        request.get("method") == "SubscribeToTask"
        and isinstance(params, dict)
        and params.get("id") in waiting
    ):
        return {**request, "params": {**params, "id": "no-such-task"}}
    return request


def corrupted(template: bytes) -> st.SearchStrategy[bytes]:
    """A valid request with one byte replaced, or cut short."""
    replace = st.tuples(st.integers(0, len(template) - 1), st.integers(0, 255)).map(
        lambda at: template[: at[0]] + bytes([at[1]]) + template[at[0] + 1 :]
    )
    cut = st.integers(0, len(template)).map(lambda at: template[:at])
    return st.one_of(replace, cut)


# -- the app -------------------------------------------------------------------------------


class Target:
    """One app on the test's event loop, called from Hypothesis' worker thread."""

    def __init__(self, http: httpx.AsyncClient, task_ids: list[str]) -> None:
        self.http = http
        self.task_ids = task_ids

    def post(self, body: bytes, headers: dict[str, str]) -> httpx.Response:
        async def call() -> httpx.Response:
            merged = {"Content-Type": "application/json", **headers}
            with anyio.fail_after(30):
                return await self.http.post(URL, content=body, headers=merged)

        response: httpx.Response = anyio.from_thread.run(call)
        return response


@pytest.fixture
async def target() -> AsyncIterator[Target]:
    app = create_app(
        EchoAgent(),
        echo_card(URL),
        MemoryTaskStore(),
        trust=TrustConfig(auth=ApiKeyAuth.from_keys(KEYS)),
        limits=LimitsConfig(max_body=MAX_BODY),
    )
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url=URL) as http:
            headers = {**ALICE, "A2A-Version": "1.0"}
            task_ids = []
            for text in ("hello", "ask: which city?"):
                message = {
                    "messageId": str(uuid.uuid4()),
                    "role": "ROLE_USER",
                    "parts": [{"text": text}],
                }
                payload = {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "SendMessage",
                    "params": {"message": message},
                }
                reply = await http.post(URL, json=payload, headers=headers)
                task_ids.append(reply.json()["result"]["task"]["id"])
            yield Target(http, task_ids)


async def run_property(prop: Callable[[], None]) -> None:
    await anyio.to_thread.run_sync(prop)


# -- properties ----------------------------------------------------------------------------

TEMPLATE = encode(
    {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendMessage",
        "params": {
            "message": {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": "fuzz"}]}
        },
    }
)


async def test_random_bytes(target: Target) -> None:
    bodies = st.one_of(
        st.binary(max_size=300),
        st.binary(min_size=MAX_BODY - 100, max_size=MAX_BODY + 100),
        corrupted(TEMPLATE),
    )

    @FUZZ
    @given(body=bodies, auth=credentials, version=versions)
    def prop(body: bytes, auth: dict[str, str], version: dict[str, str]) -> None:
        check_reply(target.post(body, {**auth, **version}))

    await run_property(prop)


async def test_random_json_values(target: Target) -> None:
    @FUZZ
    @given(value=json_values, auth=credentials, version=versions)
    def prop(value: Any, auth: dict[str, str], version: dict[str, str]) -> None:
        check_reply(target.post(encode(value), {**auth, **version}), value)

    await run_property(prop)


async def test_random_json_rpc_requests(target: Target) -> None:
    @FUZZ
    @given(request=envelope_strategy(target.task_ids), auth=credentials, version=versions)
    def prop(request: Json, auth: dict[str, str], version: dict[str, str]) -> None:
        check_reply(target.post(encode(request), {**auth, **version}), request)

    await run_property(prop)


async def test_well_formed_requests_with_good_credentials(target: Target) -> None:
    # The same shapes, always authenticated and versioned: the search goes past the gates.
    good = {**ALICE, "A2A-Version": "1.0"}

    @FUZZ
    @given(request=envelope_strategy(target.task_ids))
    def prop(request: Json) -> None:
        request = {**request, "jsonrpc": "2.0"}
        check_reply(target.post(encode(request), good), request)

    await run_property(prop)
