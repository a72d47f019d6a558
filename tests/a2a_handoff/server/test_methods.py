"""The server's behaviour, in process (ASGI transport); streams are tested on real servers."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import httpx
import pytest

from a2a_handoff import (
    HANDOFF_EXTENSION_URI,
    Completed,
    InputRequired,
    MemoryTaskStore,
    Outcome,
    SqliteTaskStore,
    TaskContext,
    TaskStore,
    TrustConfig,
    create_app,
)
from a2a_handoff.protocol.models import StreamResponse, TaskStatus, utc_now
from a2a_handoff.protocol.states import TaskState
from a2a_handoff.runtime.orphans import RESTART_REASON
from a2a_handoff.stores.base import Commit, TaskRecord
from a2a_handoff.trust.keys import KeyFile
from servers.echo import EchoAgent, echo_card
from tests.a2a_handoff.stores.test_behaviour import new_task

pytestmark = pytest.mark.anyio
URL = "http://agent.test/"


class Client:
    """A JSON-RPC caller over an in-process transport."""

    def __init__(self, http: httpx.AsyncClient) -> None:
        self.http = http

    async def call(self, method: str, params: dict[str, Any], **headers: str) -> dict[str, Any]:
        response = await self.http.post(
            URL,
            json={"jsonrpc": "2.0", "id": "1", "method": method, "params": params},
            headers={"A2A-Version": "1.0", **headers},
        )
        assert response.status_code == 200, response.text
        body: dict[str, Any] = response.json()
        return body

    async def send(
        self,
        text: str,
        *,
        message_id: str | None = None,
        task_id: str | None = None,
        context_id: str | None = None,
        **config: Any,
    ) -> dict[str, Any]:
        message: dict[str, Any] = {
            "messageId": message_id or str(uuid.uuid4()),
            "role": "ROLE_USER",
            "parts": [{"text": text}],
        }
        if task_id:
            message["taskId"] = task_id
        if context_id:
            message["contextId"] = context_id
        params: dict[str, Any] = {"message": message}
        if config:
            params["configuration"] = config
        return await self.call("SendMessage", params)

    async def task(self, task_id: str, **params: Any) -> dict[str, Any]:
        body = await self.call("GetTask", {"id": task_id, **params})
        result: dict[str, Any] = body["result"]
        return result


async def serve(agent: Any, store: TaskStore, **options: Any) -> AsyncIterator[Client]:
    app = create_app(agent, echo_card(URL), store, **options)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=URL) as http,
    ):
        yield Client(http)


@pytest.fixture
async def echo() -> AsyncIterator[Client]:
    async for client in serve(EchoAgent(), MemoryTaskStore()):
        yield client


async def test_blocking_send_returns_the_completed_task(echo: Client) -> None:
    task = (await echo.send("hello"))["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert task["artifacts"][0]["parts"] == [{"text": "hello"}]
    assert task["history"][0]["parts"] == [{"text": "hello"}]
    assert task["history"][0]["taskId"] == task["id"]


async def test_return_immediately_answers_before_the_work_is_done(echo: Client) -> None:
    task = (await echo.send("sleep:0.3", returnImmediately=True))["result"]["task"]
    assert task["status"]["state"] in ("TASK_STATE_SUBMITTED", "TASK_STATE_WORKING")
    await asyncio.sleep(0.6)
    assert (await echo.task(task["id"]))["status"]["state"] == "TASK_STATE_COMPLETED"


async def test_history_length_keeps_the_latest_messages(echo: Client) -> None:
    task = (await echo.send("ask: name?"))["result"]["task"]
    await echo.send("Ada", task_id=task["id"])
    full = await echo.task(task["id"])
    assert len(full["history"]) == 4  # question, answer, and the two agent messages
    last = await echo.task(task["id"], historyLength=1)
    assert last["history"] == full["history"][-1:]
    assert "history" not in await echo.task(task["id"], historyLength=0)


async def test_follow_up_to_input_required_keeps_task_and_context(echo: Client) -> None:
    first = (await echo.send("ask: What is your name?"))["result"]["task"]
    assert first["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert first["status"]["message"]["parts"] == [{"text": "What is your name?"}]
    done = (await echo.send("Ada", task_id=first["id"]))["result"]["task"]
    assert done["id"] == first["id"]
    assert done["contextId"] == first["contextId"]
    assert done["status"]["state"] == "TASK_STATE_COMPLETED"
    users = [m for m in done["history"] if m["role"] == "ROLE_USER"]
    assert [m["parts"][0]["text"] for m in users] == ["ask: What is your name?", "Ada"]
    assert all(m["contextId"] == first["contextId"] for m in done["history"])


async def test_follow_up_with_another_context_is_refused(echo: Client) -> None:
    first = (await echo.send("ask: name?"))["result"]["task"]
    reply = await echo.send("Ada", task_id=first["id"], context_id="elsewhere")
    assert reply["error"]["code"] == -32602
    assert "contextId" in reply["error"]["message"]
    assert (await echo.task(first["id"]))["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"


async def test_message_to_a_terminal_task_is_refused(echo: Client) -> None:
    task = (await echo.send("hello"))["result"]["task"]
    reply = await echo.send("again", task_id=task["id"])
    assert reply["error"]["code"] == -32004


async def test_new_task_in_a_given_context(echo: Client) -> None:
    task = (await echo.send("hello", context_id="conv-1"))["result"]["task"]
    assert task["contextId"] == "conv-1"


class Recorder:
    """Counts handler runs; optionally blocks until released, raises, or records cancels."""

    def __init__(self, *, block: bool = False, error: Exception | None = None) -> None:
        self.runs = 0
        self.started = asyncio.Event()  # a handler ran (it starts once its task committed)
        self.cancelled = False
        self.error = error
        self.release = asyncio.Event()
        if not block:
            self.release.set()

    async def handle(self, ctx: TaskContext) -> Outcome | None:
        self.runs += 1
        self.started.set()
        if self.error is not None:
            raise self.error
        try:
            await self.release.wait()
        except asyncio.CancelledError:
            self.cancelled = True
            raise
        await ctx.artifact(text=ctx.text)
        return Completed()


async def test_handler_exception_fails_the_task_with_its_message() -> None:
    agent = Recorder(error=RuntimeError("the model is down"))
    async for client in serve(agent, MemoryTaskStore()):
        task = (await client.send("hi"))["result"]["task"]
        assert task["status"]["state"] == "TASK_STATE_FAILED"
        assert task["status"]["message"]["parts"] == [{"text": "RuntimeError: the model is down"}]


async def test_a_handler_bug_reaches_the_caller_as_one_clear_line() -> None:
    # A KeyError's own message is only the key: `failed: 'missing'` told nobody anything.
    for error, said in (
        (KeyError("missing"), "KeyError: 'missing'"),
        (ValueError("first line\n  detail\n  more"), "ValueError: first line"),
        (RuntimeError(), "RuntimeError"),
    ):
        async for client in serve(Recorder(error=error), MemoryTaskStore()):
            task = (await client.send("hi"))["result"]["task"]
            assert task["status"]["state"] == "TASK_STATE_FAILED"
            assert task["status"]["message"]["parts"] == [{"text": said}]


async def test_cancel_stops_the_running_handler() -> None:
    agent = Recorder(block=True)
    async for client in serve(agent, MemoryTaskStore()):
        task = (await client.send("hi", returnImmediately=True))["result"]["task"]
        await asyncio.sleep(0.05)
        canceled = (await client.call("CancelTask", {"id": task["id"]}))["result"]
        assert canceled["status"]["state"] == "TASK_STATE_CANCELED"
        assert agent.cancelled
        again = await client.call("CancelTask", {"id": task["id"]})
        assert again["error"]["code"] == -32002


async def test_cancel_of_a_task_waiting_for_input(echo: Client) -> None:
    task = (await echo.send("ask: name?"))["result"]["task"]
    canceled = (await echo.call("CancelTask", {"id": task["id"]}))["result"]
    assert canceled["status"]["state"] == "TASK_STATE_CANCELED"


async def test_repeated_message_ids_run_the_handler_once() -> None:
    agent = Recorder(block=True)
    async for client in serve(agent, MemoryTaskStore()):
        sends = [client.send("hi", message_id="m-1") for _ in range(50)]
        pending = asyncio.gather(*sends)
        await asyncio.sleep(0.1)
        agent.release.set()
        replies = await pending
        assert {r["result"]["task"]["id"] for r in replies} == {replies[0]["result"]["task"]["id"]}
        assert agent.runs == 1
        listed = await client.call("ListTasks", {})
        assert listed["result"]["totalSize"] == 1


async def test_a_message_id_is_scoped_to_its_context(echo: Client) -> None:
    a = (await echo.send("hi", message_id="same", context_id="c1"))["result"]["task"]
    b = (await echo.send("hi", message_id="same", context_id="c2"))["result"]["task"]
    assert a["id"] != b["id"]


async def test_list_tasks_pages_and_filters(echo: Client) -> None:
    for _ in range(3):
        await echo.send("x", context_id="c-list")
    await echo.send("other")
    page = (await echo.call("ListTasks", {"contextId": "c-list", "pageSize": 2}))["result"]
    assert page["totalSize"] == 3
    assert page["pageSize"] == 2
    assert len(page["tasks"]) == 2
    assert "artifacts" not in page["tasks"][0]
    rest = await echo.call(
        "ListTasks", {"contextId": "c-list", "pageSize": 2, "pageToken": page["nextPageToken"]}
    )
    assert len(rest["result"]["tasks"]) == 1
    assert rest["result"]["nextPageToken"] == ""
    done = await echo.call(
        "ListTasks", {"status": "TASK_STATE_COMPLETED", "includeArtifacts": True}
    )
    assert done["result"]["totalSize"] == 4
    assert all("artifacts" in t for t in done["result"]["tasks"])


async def test_tasks_left_running_are_failed_at_start(tmp_path: Path) -> None:
    store = SqliteTaskStore(tmp_path / "crashed.db")
    await store.open()
    orphan = new_task()
    orphan = orphan.model_copy(update={"status": TaskStatus(state=TaskState.WORKING)})
    now = utc_now()
    await store.commit(Commit(TaskRecord(orphan, "", 1, now, now), [StreamResponse(task=orphan)]))
    await store.aclose()
    keys = KeyFile(tmp_path / "echo.keys.json", create=True)  # the file was used keyless
    async for client in serve(  # an agent that does not say it resumes its tasks
        Recorder(), SqliteTaskStore(tmp_path / "crashed.db"), trust=TrustConfig(identity=keys)
    ):
        task = await client.task(orphan.id)
        assert task["status"]["state"] == "TASK_STATE_FAILED"
        assert task["status"]["message"]["parts"] == [{"text": RESTART_REASON}]


async def test_tasks_survive_a_restart_on_sqlite(tmp_path: Path) -> None:
    async for client in serve(EchoAgent(), SqliteTaskStore(tmp_path / "a.db")):
        task = (await client.send("keep me"))["result"]["task"]
    async for client in serve(EchoAgent(), SqliteTaskStore(tmp_path / "a.db")):
        again = await client.task(task["id"])
        assert again == task


@pytest.mark.parametrize("proxy", [None, "HTTP_PROXY", "ALL_PROXY"])
async def test_agent_calls_go_through_httpx_when_the_environment_names_a_proxy(
    proxy: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    if proxy is not None:
        monkeypatch.setenv(proxy, "http://127.0.0.1:3128")
    app = create_app(EchoAgent(), echo_card(URL), MemoryTaskStore())
    client = app.state.a2a.client
    try:
        assert (client.direct is None) == (proxy is not None)
    finally:
        await client.aclose()


async def test_agent_card_is_cacheable_and_declares_the_handoff_extension(echo: Client) -> None:
    response = await echo.http.get("/.well-known/agent-card.json")
    assert response.status_code == 200
    card = response.json()
    uris = [e["uri"] for e in card["capabilities"]["extensions"]]
    assert HANDOFF_EXTENSION_URI in uris
    assert card["supportedInterfaces"][0] == {
        "url": URL,
        "protocolBinding": "JSONRPC",
        "protocolVersion": "1.0",
    }
    assert "max-age" in response.headers["cache-control"]
    assert response.headers["last-modified"].endswith("GMT")
    etag = response.headers["etag"]
    cached = await echo.http.get("/.well-known/agent-card.json", headers={"If-None-Match": etag})
    assert cached.status_code == 304
    assert cached.content == b""


async def test_extensions_header_echoes_only_supported_extensions(echo: Client) -> None:
    response = await echo.http.post(
        URL,
        json={"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}},
        headers={
            "A2A-Version": "1.0",
            "A2A-Extensions": f"urn:unknown:ext, {HANDOFF_EXTENSION_URI}",
        },
    )
    assert response.headers["a2a-extensions"] == HANDOFF_EXTENSION_URI
    assert response.headers["a2a-version"] == "1.0"
    plain = await echo.http.post(
        URL,
        json={"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}},
        headers={"A2A-Version": "1.0"},
    )
    assert "a2a-extensions" not in plain.headers


async def test_health_reports_the_store(echo: Client) -> None:
    response = await echo.http.get("/health")
    assert response.status_code == 200
    assert response.json()["store"] == "ok"
    assert response.json()["stalePendingHandoffs"] == 0


class Asker:
    async def handle(self, ctx: TaskContext) -> Outcome | None:
        return InputRequired("why?")


async def test_a_follow_up_while_working_is_refused_as_busy() -> None:
    agent = Recorder(block=True)
    async for client in serve(agent, MemoryTaskStore()):
        task = (await client.send("hi", returnImmediately=True))["result"]["task"]
        reply = await client.send("more", task_id=task["id"])
        assert reply["error"]["code"] == -32104
        assert "busy" in reply["error"]["message"]
        assert "still working" in reply["error"]["message"]
        agent.release.set()
        history = (await client.task(task["id"]))["history"]
        assert [m["parts"][0]["text"] for m in history if m["role"] == "ROLE_USER"] == ["hi"]


class Confused:
    async def handle(self, ctx: TaskContext) -> Any:
        return "not an outcome"


async def test_a_handler_returning_no_outcome_fails_the_task_and_answers() -> None:
    # regression: the request used to hang, the task stuck WORKING
    async for client in serve(Confused(), MemoryTaskStore()):
        task = (await asyncio.wait_for(client.send("hi"), 5))["result"]["task"]
        assert task["status"]["state"] == "TASK_STATE_FAILED"
        assert "not an outcome" in task["status"]["message"]["parts"][0]["text"]


async def test_a_follow_up_returning_immediately_shows_the_resumed_task(echo: Client) -> None:
    # regression: the answer used to be the task as it was before the follow-up
    task = (await echo.send("ask: name?"))["result"]["task"]
    resumed = (await echo.send("Ada", task_id=task["id"], returnImmediately=True))["result"]
    assert resumed["task"]["status"]["state"] != "TASK_STATE_INPUT_REQUIRED"
    texts = [m["parts"][0]["text"] for m in resumed["task"]["history"]]
    assert "Ada" in texts


async def test_a_replayed_handoff_is_a_duplicate_while_its_task_still_runs() -> None:
    # regression: the key stayed "processing" (-32102) until the successor task ended
    from a2a_handoff.handoff.envelope import TargetRef
    from a2a_handoff.protocol.extension import HANDOFF_EXTENSION_URI as URI
    from tests.integration.test_handoff import envelope
    from tests.trust_support import Signer

    agent = Recorder(block=True)
    tests = Signer()
    env = envelope(target=TargetRef(agent="echo", url=URL))
    params = {
        "message": {
            "messageId": f"handoff-{env.idempotency_key}",
            "role": "ROLE_USER",
            "parts": [{"text": "x"}],
            "contextId": env.context_id,
            "metadata": tests.metadata(env),
        },
        "configuration": {"returnImmediately": True},
    }
    async for client in serve(
        agent, MemoryTaskStore(), trust=TrustConfig(trusted=[tests.trusted()])
    ):
        first = (await client.call("SendMessage", params))["result"]["task"]
        again = (await client.call("SendMessage", params))["result"]["task"]
        assert again["id"] == first["id"]
        assert again["metadata"][URI]["duplicate"] is True
        await asyncio.wait_for(agent.started.wait(), 5)
        assert agent.runs == 1
        agent.release.set()


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
async def test_list_tasks_filters_by_status_timestamp_after(tmp_path: Path, backend: str) -> None:
    store = MemoryTaskStore() if backend == "memory" else SqliteTaskStore(tmp_path / "t.db")
    async for echo in serve(EchoAgent(), store):
        await check_status_timestamp_after(echo)


async def check_status_timestamp_after(echo: Client) -> None:
    older = [(await echo.send(f"old {i}"))["result"]["task"]["id"] for i in range(3)]
    await asyncio.sleep(0.01)
    cut = (await echo.task(older[-1]))["status"]["timestamp"]
    await asyncio.sleep(0.01)
    newer = [(await echo.send(f"new {i}"))["result"]["task"]["id"] for i in range(2)]
    listed = await echo.call("ListTasks", {"statusTimestampAfter": cut})
    assert sorted(t["id"] for t in listed["result"]["tasks"]) == sorted(newer)
    assert listed["result"]["totalSize"] == 2
    # Any ISO-8601 form of the same moment filters the same way (here: +02:00, no Z).
    moment = datetime.fromisoformat(cut.replace("Z", "+00:00")).astimezone(
        timezone(timedelta(hours=2))
    )
    again = await echo.call("ListTasks", {"statusTimestampAfter": moment.isoformat()})
    assert sorted(t["id"] for t in again["result"]["tasks"]) == sorted(newer)
    bad = await echo.call("ListTasks", {"statusTimestampAfter": "yesterday"})
    assert bad["error"]["code"] == -32602
    assert "statusTimestampAfter" in bad["error"]["message"]
