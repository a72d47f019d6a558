"""Stock SDK clients, with their default 5 s read timeout, through an operator's long wait.

Real triage → billing → human agents and a gateway in front of triage; each client asks for a
refund over billing's limit, which waits for an operator; the operator approves with the CLI
`WAIT` seconds after the escalation arrived. Nothing reaches a waiting client meanwhile but
the server's keep-alives (a comment line on a stream, a space before a blocking answer), so
a client that outlives a wait of more than twice its read timeout outlives any: each gap
between two bytes is the keep-alive interval, whatever the wait's length.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from a2a.client import Client, ClientConfig, create_client
from a2a.types.a2a_pb2 import (
    GetTaskRequest,
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
from google.protobuf import json_format

from a2a_handoff import AgentClient
from a2a_handoff.client.transport import Http11Transport
from a2a_handoff.protocol.models import Message as OurMessage
from a2a_handoff.protocol.models import Part as OurPart
from a2a_handoff.protocol.models import Role as OurRole
from a2a_handoff.protocol.models import Task as OurTask
from tests.integration.handoff_support import wait_for
from tests.integration.test_interop03 import CLIENT, PYTHON03
from tests.orchestrator.test_gateway import ALICE, BOB, gateway_process
from tests.support import AgentProcess, Cli, wire_trust

pytestmark = pytest.mark.anyio

WAIT = 60.0
"""Seconds an operator takes to decide: a minute, twelve times the SDKs' 5 s read timeout."""


def refund(order: int) -> str:
    return f"I was charged twice, I want a refund of $750 for order {order}"


@dataclass
class Desk:
    triage: AgentProcess
    billing: AgentProcess
    human: AgentProcess
    gateway: AgentProcess
    tmp: Path


@pytest.fixture(scope="module")
def desk(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Desk]:
    assert PYTHON03.exists()
    tmp = tmp_path_factory.mktemp("long-waits")

    def agent(name: str, *extra: str) -> AgentProcess:
        process = AgentProcess(
            name, f"sqlite:///{tmp / name}.db", extra=("--recovery-interval", "0.3", *extra)
        )
        process.log_path = tmp / f"{name}.log"
        return process

    human = agent("human")
    billing = agent("billing", f"--route=human={human.url}")
    triage = agent("triage", f"--route=billing={billing.url}")
    wire_trust([human, billing, triage])
    gateway = gateway_process(tmp, triage.url)
    started = [human, billing, triage, gateway]
    try:
        for process in started:
            process.start()
        yield Desk(triage, billing, human, gateway, tmp)
    finally:
        for process in reversed(started):
            process.stop()


def stock_http(key: str = "") -> httpx.AsyncClient:
    """httpx as the SDK makes it: every default (a 5 s read timeout); a key if one is needed."""
    return httpx.AsyncClient(headers={"X-API-Key": key} if key else None)


async def client_of(url: str, http: httpx.AsyncClient, binding: str, streaming: bool) -> Client:
    config = ClientConfig(
        streaming=streaming, httpx_client=http, supported_protocol_bindings=[binding]
    )
    return await create_client(url, config)


def user_message(text: str) -> Message:
    return Message(message_id=f"m-{uuid.uuid4()}", role=Role.ROLE_USER, parts=[Part(text=text)])


def last_task(task: Task | None, events: list[StreamResponse]) -> Task:
    """The task as a client's events left it (the first a Task, the rest its updates)."""
    for event in events:
        if event.HasField("task"):
            task = event.task
        elif event.HasField("status_update"):
            assert task is not None
            task.status.CopyFrom(event.status_update.status)
        elif event.HasField("artifact_update"):
            assert task is not None
            task.artifacts.append(event.artifact_update.artifact)
    assert task is not None, events
    return task


def client03(url: str, command: str, text: str, key: str = "", how: str = "connect") -> Any:
    """The stock 0.3 client (httpx's default timeouts) running one command; what it parsed.
    `how="connect"`: made by `ClientFactory.connect(url)` (the gateway); "": from the card at
    `/.well-known/agent.json` (an agent's 0.3 card)."""
    env = {**os.environ, "CLIENT03_API_KEY": key, "CLIENT03_DEFAULTS": "1"}
    done = subprocess.run(
        [str(PYTHON03), str(CLIENT), url, json.dumps([[command, text]]), how],
        capture_output=True,
        text=True,
        timeout=WAIT + 90,
        check=False,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def operator_approves(desk: Desk, orders: list[int]) -> list[dict[str, Any]]:
    """Waits for the escalation of each order, then approves them all `WAIT` seconds after
    the last arrived (a duration the test is about, not a synchronisation)."""
    operator = Cli(desk.tmp / f"operator-{uuid.uuid4()}.json")

    def waiting() -> list[dict[str, Any]] | None:
        code, items = operator.events("inbox", "--agent", desk.human.url)
        assert code == 0
        found = [i for o in orders for i in items if f"order {o}" in i["whatIsNeeded"]]
        return found if len(found) == len(orders) else None

    items: list[dict[str, Any]] = wait_for(waiting, timeout=60)
    time.sleep(WAIT)
    for item in items:
        code, out = operator.run("approve", item["taskId"], "checked", "--agent", desk.human.url)
        assert code == 0, out
    return items


def refunded_order(task: Task) -> str:
    assert task.status.state == TaskState.TASK_STATE_COMPLETED, task.status
    [artifact] = task.artifacts
    data: dict[str, Any] = json_format.MessageToDict(artifact.parts[0].data)
    assert data["status"] == "refunded"
    return str(data["orderId"])


def refunded_order03(task: dict[str, Any]) -> str:
    assert task["status"]["state"] == "completed", task
    return str(task["artifacts"][0]["parts"][0]["data"]["orderId"])


@pytest.mark.timeout(WAIT + 150)
async def test_stock_clients_wait_for_the_operator_at_the_gateway(desk: Desk) -> None:
    """Blocking sends, streams and a subscription of both SDKs, through the gateway."""
    url = desk.gateway.url
    results: dict[str, Any] = {}

    async def blocking(binding: str, order: int) -> None:
        async with stock_http(ALICE) as http:
            client = await client_of(url, http, binding, streaming=False)
            request = SendMessageRequest(message=user_message(refund(order)))
            events = [e async for e in client.send_message(request)]
            results[f"blocking {binding}"] = (order, last_task(None, events))

    async def streaming(binding: str, order: int) -> None:
        async with stock_http(ALICE) as http:
            client = await client_of(url, http, binding, streaming=True)
            request = SendMessageRequest(message=user_message(refund(order)))
            events = [e async for e in client.send_message(request)]
            task = last_task(None, events)
            # The stream's last state is the task's: the same as GetTask says.
            fetched = await client.get_task(GetTaskRequest(id=task.id))
            assert fetched.status.state == task.status.state
            results[f"stream {binding}"] = (order, fetched)

    async def subscribed(binding: str, order: int) -> None:
        async with stock_http(ALICE) as http:
            sender = await client_of(url, http, binding, streaming=False)
            request = SendMessageRequest(
                message=user_message(refund(order)),
                configuration=SendMessageConfiguration(return_immediately=True),
            )
            [sent] = [e async for e in sender.send_message(request)]
            client = await client_of(url, http, binding, streaming=True)
            events = [e async for e in client.subscribe(SubscribeToTaskRequest(id=sent.task.id))]
            assert last_task(None, events).status.state == TaskState.TASK_STATE_COMPLETED
            fetched = await client.get_task(GetTaskRequest(id=sent.task.id))
            results[f"subscribe {binding}"] = (order, fetched)

    async def ours(order: int) -> None:
        # Our own client, as agents make it (over our HTTP/1.1 transport): it reads the
        # spaces before a held answer's JSON as JSON does. Its read timeout bounds the whole
        # of a blocking answer, so it is given more than the wait.
        transport = Http11Transport()
        async with httpx.AsyncClient(timeout=WAIT + 60, transport=transport) as http:
            client = AgentClient(http, direct=transport, credentials={url: ALICE})
            text = OurPart(text=refund(order))
            message = OurMessage(message_id=f"m-{uuid.uuid4()}", role=OurRole.USER, parts=[text])
            task = await client.send(url, message)
            assert isinstance(task, OurTask), task
            [artifact] = task.artifacts or []
            results["ours"] = (order, artifact.parts[0].data)

    def old(command: str, order: int) -> None:
        out = client03(url, command, refund(order), key=BOB)  # (a client's waits are capped)
        assert isinstance(out, list), out  # a client error is an object
        last = out[-1][0] if isinstance(out[-1], list) else out[-1]
        results[f"0.3 {command}"] = (order, last)

    orders = list(range(5001, 5011))
    with anyio.fail_after(WAIT + 90):
        async with anyio.create_task_group() as group:
            group.start_soon(blocking, "JSONRPC", orders[0])
            group.start_soon(blocking, "HTTP+JSON", orders[1])
            group.start_soon(streaming, "JSONRPC", orders[2])
            group.start_soon(streaming, "HTTP+JSON", orders[3])
            group.start_soon(subscribed, "JSONRPC", orders[4])
            group.start_soon(subscribed, "HTTP+JSON", orders[5])
            for command, order in zip(
                ["send", "stream", "send_resubscribe"], orders[6:9], strict=True
            ):
                group.start_soon(anyio.to_thread.run_sync, old, command, order)
            group.start_soon(ours, orders[9])
            await anyio.to_thread.run_sync(operator_approves, desk, orders)
    assert len(results) == len(orders), results
    for name, (order, task) in results.items():
        if name == "ours":
            assert task == {"orderId": str(order), "amount": 750.0, "status": "refunded"}
        elif name.startswith("0.3"):
            assert task.get("type") == "Task", (name, task)
            assert refunded_order03(task) == str(order), name
        else:
            assert task.id, name  # the task id is known
            assert refunded_order(task) == str(order), name


@pytest.mark.timeout(WAIT + 120)
async def test_stock_clients_subscribed_to_the_operators_task_wait_for_the_decision(
    desk: Desk,
) -> None:
    """At the agents: the escalation waits INPUT_REQUIRED at the human agent until the
    operator answers; subscribers of both SDKs stay on it throughout."""
    order = 6001
    async with stock_http() as http:
        client = await client_of(desk.billing.url, http, "JSONRPC", streaming=False)
        request = SendMessageRequest(message=user_message(refund(order)))
        [sent] = [e async for e in client.send_message(request)]
    operator = Cli(desk.tmp / "operator-agents.json")

    def escalation() -> dict[str, Any] | None:
        code, items = operator.events("inbox", "--agent", desk.human.url)
        assert code == 0
        return next((i for i in items if i["sourceTaskId"] == sent.task.id), None)

    item: dict[str, Any] = wait_for(escalation, timeout=30)
    results: dict[str, Any] = {}

    async def subscriber(binding: str) -> None:
        async with stock_http() as http:
            client = await client_of(desk.human.url, http, binding, streaming=True)
            events = [e async for e in client.subscribe(SubscribeToTaskRequest(id=item["taskId"]))]
            results[binding] = last_task(None, events)

    def old() -> None:
        results["0.3"] = client03(desk.human.url, "resubscribe", item["taskId"], how="")

    def approve_later() -> None:
        time.sleep(WAIT)
        code, out = operator.run("approve", item["taskId"], "checked", "--agent", desk.human.url)
        assert code == 0, out

    with anyio.fail_after(WAIT + 60):
        async with anyio.create_task_group() as group:
            group.start_soon(subscriber, "JSONRPC")
            group.start_soon(subscriber, "HTTP+JSON")
            group.start_soon(anyio.to_thread.run_sync, old)
            await anyio.to_thread.run_sync(approve_later)
    for binding in ("JSONRPC", "HTTP+JSON"):
        # A client without the handoff extension sees the return handoff as COMPLETED.
        assert results[binding].id == item["taskId"]
        assert results[binding].status.state == TaskState.TASK_STATE_COMPLETED, binding
    old_events = results["0.3"]
    assert isinstance(old_events, list), old_events
    last = old_events[-1][0] if isinstance(old_events[-1], list) else old_events[-1]
    assert last["status"]["state"] == "completed", old_events
