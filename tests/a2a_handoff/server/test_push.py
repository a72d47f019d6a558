"""The push config methods in process, on both bindings: scoping, validation, refusals."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from a2a_handoff import ApiKeyAuth, MemoryTaskStore, PushSettings, TrustConfig, create_app
from servers.echo import EchoAgent, echo_card

pytestmark = pytest.mark.anyio
URL = "http://agent.test"
V1 = {"A2A-Version": "1.0"}
ALICE = {"Authorization": "Bearer alice-key"}
BOB = {"Authorization": "Bearer bob-key"}
Json = dict[str, Any]
HOOK = "https://hooks.example.com/a2a"  # never called: its task is complete when it is made


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(
        EchoAgent(),
        echo_card(URL + "/"),
        MemoryTaskStore(),
        trust=TrustConfig(auth=ApiKeyAuth.from_keys({"alice": "alice-key", "bob": "bob-key"})),
        push=PushSettings(allow=("127.0.0.1",)),
    )
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=transport, base_url=URL, headers=V1) as client,
    ):
        yield client


async def rpc(http: httpx.AsyncClient, method: str, params: Json, who: dict[str, str]) -> Json:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    answer: Json = (await http.post("/", json=body, headers=who)).json()
    return answer


async def task_of(http: httpx.AsyncClient, who: dict[str, str] = ALICE, **config: Any) -> Json:
    message = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": "hi"}]}
    params: Json = {"message": message}
    if config:
        params["configuration"] = {"taskPushNotificationConfig": config}
    answer = await rpc(http, "SendMessage", params, who)
    task: Json = answer["result"]["task"]
    return task


async def test_the_card_declares_push_and_the_four_methods_work_over_json_rpc(
    http: httpx.AsyncClient,
) -> None:
    card = (await http.get("/.well-known/agent-card.json")).json()
    assert card["capabilities"]["pushNotifications"] is True
    task = await task_of(http)
    config = {
        "taskId": task["id"],
        "id": "c1",
        "url": HOOK,
        "token": "t",
        "authentication": {"scheme": "Bearer", "credentials": "x"},
    }
    created = await rpc(http, "CreateTaskPushNotificationConfig", config, ALICE)
    assert created["result"] == config
    got = await rpc(
        http, "GetTaskPushNotificationConfig", {"taskId": task["id"], "id": "c1"}, ALICE
    )
    assert got["result"] == config
    made = await rpc(
        http, "CreateTaskPushNotificationConfig", {"task_id": task["id"], "url": HOOK}, ALICE
    )
    assert made["result"]["id"]
    assert made["result"]["id"] != "c1"
    listed = await rpc(http, "ListTaskPushNotificationConfigs", {"taskId": task["id"]}, ALICE)
    assert [c["id"] for c in listed["result"]["configs"]] == ["c1", made["result"]["id"]]
    ref = {"taskId": task["id"], "id": "c1"}
    assert (await rpc(http, "DeleteTaskPushNotificationConfig", ref, ALICE))["result"] == {}
    assert (await rpc(http, "DeleteTaskPushNotificationConfig", ref, ALICE))["result"] == {}
    gone = await rpc(http, "GetTaskPushNotificationConfig", ref, ALICE)
    assert gone["error"]["code"] == -32001


async def test_the_rest_routes_serve_the_same_configs(http: httpx.AsyncClient) -> None:
    task = await task_of(http)
    base = f"/tasks/{task['id']}/pushNotificationConfigs"
    created = await http.post(base, json={"id": "r1", "url": HOOK}, headers=ALICE)
    assert created.status_code == 200, created.text
    assert created.json() == {"id": "r1", "taskId": task["id"], "url": HOOK}
    assert (await http.get(f"{base}/r1", headers=ALICE)).json()["url"] == HOOK
    listed = (await http.get(base, headers=ALICE)).json()
    assert [c["id"] for c in listed["configs"]] == ["r1"]
    assert (await http.delete(f"{base}/r1", headers=ALICE)).status_code == 200
    assert (await http.get(f"{base}/r1", headers=ALICE)).status_code == 404
    refused = await http.post(base, json={"url": "https://10.0.0.1/"}, headers=ALICE)
    assert refused.status_code == 400


async def test_a_caller_sees_and_edits_only_the_configs_of_its_own_tasks(
    http: httpx.AsyncClient,
) -> None:
    task = await task_of(http, ALICE, id="mine", url=HOOK)
    ref = {"taskId": task["id"], "id": "mine"}
    for method, params in (
        ("GetTaskPushNotificationConfig", ref),
        ("ListTaskPushNotificationConfigs", {"taskId": task["id"]}),
        ("DeleteTaskPushNotificationConfig", ref),
        ("CreateTaskPushNotificationConfig", {"taskId": task["id"], "url": HOOK}),
        ("ListPushDeliveries", {"taskId": task["id"]}),
    ):
        answer = await rpc(http, method, params, BOB)
        assert answer["error"]["code"] == -32001, (method, answer)
    rest = await http.get(f"/tasks/{task['id']}/pushNotificationConfigs", headers=BOB)
    assert rest.status_code == 404
    still = await rpc(http, "ListTaskPushNotificationConfigs", {"taskId": task["id"]}, ALICE)
    assert [c["id"] for c in still["result"]["configs"]] == ["mine"]


@pytest.mark.parametrize(
    ("config", "says"),
    [
        ({"url": "https://10.0.0.1/h"}, "not a public address"),
        ({"url": "https://localhost/h"}, "loopback"),
        ({"url": "ftp://example.com/h"}, "https://"),
        ({"url": "http://example.com/h"}, "allowlist"),
        ({"url": "https://a.example/", "token": "two\nlines"}, "token"),
        ({"url": "https://a.example/", "authentication": {}}, "scheme"),
        ({"url": "https://a.example/", "id": "a b"}, "id"),
        ({"token": "t"}, "url"),
    ],
)
async def test_a_bad_config_is_invalid_params(
    http: httpx.AsyncClient, config: Json, says: str
) -> None:
    task = await task_of(http)
    params = {"taskId": task["id"], **config}
    answer = await rpc(http, "CreateTaskPushNotificationConfig", params, ALICE)
    assert answer["error"]["code"] == -32602
    assert says in answer["error"]["message"]


async def test_a_refused_config_on_send_message_runs_nothing(http: httpx.AsyncClient) -> None:
    message = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": "hi"}]}
    config = {"taskPushNotificationConfig": {"url": "https://169.254.169.254/"}}
    answer = await rpc(http, "SendMessage", {"message": message, "configuration": config}, ALICE)
    assert answer["error"]["code"] == -32602
    listed = await rpc(http, "ListTasks", {}, ALICE)
    assert listed["result"]["tasks"] == []


async def test_without_push_the_methods_answer_not_supported() -> None:
    app = create_app(EchoAgent(), echo_card(URL + "/"), MemoryTaskStore())
    transport = httpx.ASGITransport(app=app)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=transport, base_url=URL, headers=V1) as http,
    ):
        card = (await http.get("/.well-known/agent-card.json")).json()
        assert not card["capabilities"].get("pushNotifications")
        answer = await rpc(http, "CreateTaskPushNotificationConfig", {"taskId": "t"}, {})
        assert answer["error"]["code"] == -32003
        rest = await http.get("/tasks/t/pushNotificationConfigs")
        assert rest.status_code == 400


async def test_a_0_3_client_sets_gets_lists_and_deletes_in_its_shapes(
    http: httpx.AsyncClient,
) -> None:
    task = await task_of(http)

    async def v03(method: str, params: Json) -> Json:
        body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
        answer: Json = (
            await http.post("/", json=body, headers={**ALICE, "A2A-Version": ""})
        ).json()
        return answer

    config = {
        "id": "old",
        "url": HOOK,
        "authentication": {"schemes": ["Bearer"], "credentials": "c"},
    }
    made = await v03(
        "tasks/pushNotificationConfig/set", {"taskId": task["id"], "pushNotificationConfig": config}
    )
    assert made["result"] == {"taskId": task["id"], "pushNotificationConfig": config}
    one = await v03("tasks/pushNotificationConfig/get", {"id": task["id"]})
    assert one["result"] == made["result"]
    by_id = {"id": task["id"], "pushNotificationConfigId": "old"}
    assert (await v03("tasks/pushNotificationConfig/get", by_id))["result"] == made["result"]
    listed = await v03("tasks/pushNotificationConfig/list", {"id": task["id"]})
    assert listed["result"] == [made["result"]]
    assert (await v03("tasks/pushNotificationConfig/delete", by_id))["result"] is None
    assert (await v03("tasks/pushNotificationConfig/list", {"id": task["id"]}))["result"] == []
