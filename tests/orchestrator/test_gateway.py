"""The gateway (`python -m orchestrator serve`) with plain A2A clients: the official 1.x SDK
over JSON-RPC and HTTP+JSON, and a stock 0.3 client, against real triage → billing agents.

The clients know nothing of handoffs: billing's question arrives as INPUT_REQUIRED on the
client's own task at the gateway, the answer goes on that task, and the refund arrives there.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from a2a.client import A2ACardResolver, Client, ClientConfig, create_client
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    Task,
    TaskState,
)
from a2a.utils.errors import TaskNotFoundError
from google.protobuf import json_format

from a2a_handoff.failpoints import ENV_VAR as FAILPOINT
from tests.integration.handoff_support import Agents, make_agents, result, wait_for
from tests.integration.test_interop03 import PYTHON03, client03, last_task
from tests.support import AgentProcess

pytestmark = pytest.mark.anyio

ASK = "I was charged twice for my order, I want a refund"
ALICE, BOB = "alice-key-0123456789", "bob-key-0123456789"


@dataclass
class World:
    agents: Agents
    gateway: AgentProcess


def gateway_process(tmp: Path, entry: str, *extra: str) -> AgentProcess:
    keys = tmp / "gateway-keys"
    keys.write_text(f"alice={ALICE}\nbob={BOB}\n")
    keys.chmod(0o600)
    gateway = AgentProcess(
        "serve",
        f"sqlite:///{tmp / 'gateway.db'}",
        extra=("--entry", entry, "--auth-keys", str(keys), *extra),
        module="orchestrator",
    )
    gateway.log_path = tmp / "gateway.log"
    return gateway


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    tmp = tmp_path_factory.mktemp("gateway")
    agents = make_agents(tmp)
    gateway = gateway_process(tmp, agents.triage.url)
    started = [*agents.all(), gateway]
    try:
        for process in started:
            process.start()
        yield World(agents, gateway)
    finally:
        for process in reversed(started):
            process.stop()


@asynccontextmanager
async def connect(
    gateway: AgentProcess, key: str, binding: str = "JSONRPC", streaming: bool = False
) -> AsyncIterator[Client]:
    """A plain 1.x SDK client: resolved from the gateway's URL, no extension asked for."""
    async with httpx.AsyncClient(timeout=60.0, headers={"X-API-Key": key}) as http:
        config = ClientConfig(
            streaming=streaming, httpx_client=http, supported_protocol_bindings=[binding]
        )
        client = await create_client(gateway.url, config)
        try:
            yield client
        finally:
            await client.close()


def user_message(text: str, task: Task | None = None, context_id: str = "") -> Message:
    return Message(
        message_id=f"m-{uuid.uuid4()}",
        role=Role.ROLE_USER,
        parts=[Part(text=text)],
        task_id=task.id if task else "",
        context_id=task.context_id if task else context_id,
    )


async def send(
    client: Client, message: Message, config: SendMessageConfiguration | None = None
) -> tuple[Task, list[StreamResponse]]:
    """Send; the task as the last event left it (GetTask after a stream), and the events."""
    request = SendMessageRequest(message=message)
    if config is not None:
        request.configuration.CopyFrom(config)
    events = [event async for event in client.send_message(request)]
    last = events[-1]
    if last.HasField("task"):
        return last.task, events
    task_id = last.status_update.task_id or last.artifact_update.task_id
    return await client.get_task(GetTaskRequest(id=task_id)), events


def status_text(task: Task) -> str:
    return " ".join(part.text for part in task.status.message.parts)


def refund_of(task: Task) -> dict[str, Any]:
    [artifact] = task.artifacts
    assert artifact.name == "refund"
    data: dict[str, Any] = json_format.MessageToDict(artifact.parts[0].data)
    return data


@pytest.mark.parametrize(("binding", "streaming"), [("JSONRPC", False), ("HTTP+JSON", True)])
async def test_a_plain_client_asks_for_a_refund_answers_billing_and_gets_it(
    world: World, binding: str, streaming: bool
) -> None:
    async with connect(world.gateway, ALICE, binding, streaming) as client:
        asked, events = await send(client, user_message(ASK))
        assert asked.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        assert "Which order" in status_text(asked)  # billing's question, on the client's task
        if streaming:
            said = [status_text(e.status_update) for e in events if e.HasField("status_update")]
            assert any(s.startswith("Transferred to billing") for s in said), said
        done, events = await send(client, user_message("order 12345", asked))
        assert (done.id, done.context_id) == (asked.id, asked.context_id)
        assert done.status.state == TaskState.TASK_STATE_COMPLETED
        assert refund_of(done)["orderId"] == "12345"
        if streaming:
            assert any(e.HasField("artifact_update") for e in events)
        fetched = await client.get_task(GetTaskRequest(id=done.id))
        users = [m.parts[0].text for m in fetched.history if m.role == Role.ROLE_USER]
        assert users == [ASK, "order 12345"]
        listed = await client.list_tasks(ListTasksRequest(context_id=done.context_id))
        assert [t.id for t in listed.tasks] == [done.id]
        completed = await client.list_tasks(
            ListTasksRequest(context_id=done.context_id, status=TaskState.TASK_STATE_COMPLETED)
        )
        assert [t.id for t in completed.tasks] == [done.id]
        # A new task in the same context: a new request in the same conversation at the
        # agents, routed afresh by triage.
        where = f"where is my package? order 555 ({uuid.uuid4()})"
        parcel, _ = await send(client, user_message(where, context_id=done.context_id))
        assert parcel.id != done.id
        assert parcel.context_id == done.context_id
        assert parcel.status.state == TaskState.TASK_STATE_COMPLETED
    triage = world.agents.triage
    [at_triage] = [
        t
        for t in result(triage.rpc("ListTasks", {"historyLength": 5}))["tasks"]
        if any(p.get("text") == where for m in t.get("history", []) for p in m["parts"])
    ]
    same = result(triage.rpc("ListTasks", {"contextId": at_triage["contextId"]}))
    assert same["totalSize"] == 2  # the refund request and this one


def test_a_stock_0_3_client_gets_its_refund_through_the_gateway(world: World) -> None:
    assert PYTHON03.exists()
    [sent] = client03(world.gateway, ("send", ASK), how="connect", api_key=BOB)
    asked = last_task(sent)
    assert asked["status"]["state"] == "input-required"
    question = asked["status"]["message"]["parts"][0]["text"]
    assert "Which order" in question
    [answered] = client03(
        world.gateway, ("answer", [asked["id"], "order 12345"]), how="connect", api_key=BOB
    )
    done = last_task(answered)
    assert done["id"] == asked["id"]
    assert done["status"]["state"] == "completed"
    assert done["artifacts"][0]["parts"][0]["data"]["orderId"] == "12345"


async def test_the_card_says_what_the_gateway_fronts(world: World) -> None:
    async with httpx.AsyncClient(timeout=10.0) as http:
        card = await A2ACardResolver(http, world.gateway.url).get_agent_card()
    assert card.name == "gateway"
    assert "triage" in card.description
    assert world.agents.triage.url in card.description
    skills = [skill.id for skill in card.skills]
    assert "conversation" in skills
    assert len(skills) > 1  # triage's own skills, as it offers them


async def test_a_subscriber_follows_the_client_task_across_the_handoff(world: World) -> None:
    config = SendMessageConfiguration(return_immediately=True)
    async with connect(world.gateway, ALICE) as client:
        started, _ = await send(client, user_message(ASK), config)
    async with connect(world.gateway, ALICE, streaming=True) as client:
        seen: list[StreamResponse] = []
        last = started
        with anyio.fail_after(30):
            async for event in client.subscribe(SubscribeToTaskRequest(id=started.id)):
                seen.append(event)
                if event.HasField("task"):
                    last = event.task
                elif event.HasField("status_update"):
                    assert event.status_update.task_id == started.id
                    last.status.CopyFrom(event.status_update.status)
                if last.status.state == TaskState.TASK_STATE_INPUT_REQUIRED:
                    break
        assert seen[0].HasField("task")  # the current task first, then its updates
        assert "Which order" in status_text(last)
        canceled = await client.cancel_task(CancelTaskRequest(id=started.id))
        assert canceled.status.state == TaskState.TASK_STATE_CANCELED


async def test_each_client_sees_only_its_own_tasks_and_conversations(world: World) -> None:
    async with connect(world.gateway, ALICE) as alice:
        asked, _ = await send(alice, user_message(ASK))
        assert asked.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    async with connect(world.gateway, BOB) as bob:
        with pytest.raises(TaskNotFoundError):
            await bob.get_task(GetTaskRequest(id=asked.id))
        listed = await bob.list_tasks(ListTasksRequest(context_id=asked.context_id))
        assert list(listed.tasks) == []
        # Bob in Alice's context id: a conversation of his own, never an answer to hers.
        await send(bob, user_message("order 12345", context_id=asked.context_id))
    async with connect(world.gateway, ALICE) as alice:
        again = await alice.get_task(GetTaskRequest(id=asked.id))
        assert again.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        canceled = await alice.cancel_task(CancelTaskRequest(id=asked.id))
        assert canceled.status.state == TaskState.TASK_STATE_CANCELED
    async with httpx.AsyncClient() as http:
        anonymous = await http.get(world.gateway.url + "tasks", headers={"A2A-Version": "1.0"})
    assert anonymous.status_code == 401


async def test_killed_mid_conversation_the_gateway_loses_nothing_and_sends_nothing_twice(
    tmp_path: Path,
) -> None:
    agents = make_agents(tmp_path)
    gateway = gateway_process(tmp_path, agents.triage.url)
    for process in agents.all():
        process.start()
    try:
        gateway.start()
        async with connect(gateway, ALICE) as client:
            asked, _ = await send(client, user_message(ASK))
        assert asked.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        gateway.kill()  # kill -9 while the task waits for the client
        gateway.env = {FAILPOINT: "gateway.after_send"}  # and again once billing took the answer
        gateway.start()
        answer = user_message("order 12345", asked)
        config = SendMessageConfiguration(return_immediately=True)
        async with connect(gateway, ALICE) as client:
            with contextlib.suppress(Exception):  # the gateway may die before it answers
                await send(client, answer, config)
        assert gateway.proc is not None
        assert gateway.proc.wait(20) == 137  # the failpoint: exited like kill -9
        gateway.env = {}
        gateway.start()
        async with connect(gateway, ALICE) as client:
            task = await client.get_task(GetTaskRequest(id=asked.id))
            if task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED:
                await send(client, answer, config)  # never taken: the client sends it again
            with anyio.fail_after(30):
                while task.status.state != TaskState.TASK_STATE_COMPLETED:
                    await anyio.sleep(0.1)
                    task = await client.get_task(GetTaskRequest(id=asked.id))
        assert refund_of(task)["orderId"] == "12345"
        users = [m.parts[0].text for m in task.history if m.role == Role.ROLE_USER]
        assert users == [ASK, "order 12345"]
        # Billing got the answer once, in one task: the gateway sent the same message again.
        listed = wait_for(lambda: result(agents.billing.rpc("ListTasks", {"historyLength": 50})))
        [successor] = listed["tasks"]
        texts = [
            p.get("text")
            for m in successor["history"]
            if m["role"] == "ROLE_USER"
            for p in m["parts"]
            if "text" in p
        ]
        assert texts.count("order 12345") == 1, texts
        assert successor["status"]["state"] == "TASK_STATE_COMPLETED"
        assert len(result(agents.triage.rpc("ListTasks", {}))["tasks"]) == 1
        assert gateway.log_path is not None
        assert "failpoint gateway.after_send: exiting" in gateway.log_path.read_text()
    finally:
        gateway.stop()
        agents.stop()
