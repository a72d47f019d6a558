"""Interoperability over gRPC: the official A2A python client (`a2a-sdk`, its gRPC transport)
against real agents started with `--grpc-port`.

The client resolves the agent's card over HTTP and picks the card's `GRPC` interface (a bare
`host:port`); everything after that — encoding, the status codes and their `ErrorInfo`
mapped back to the SDK's errors — is the SDK's. Where a test needs what the SDK's client does
not expose (metadata, the raw status), it calls the SDK's generated stub on a plain channel.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import grpc
import grpc.aio
import httpx
import pytest
from a2a.client import A2ACardResolver, Client, ClientConfig, create_client
from a2a.types import a2a_pb2_grpc
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTasksRequest,
    SendMessageConfiguration,
    SendMessageRequest,
    SubscribeToTaskRequest,
    TaskPushNotificationConfig,
    TaskState,
)
from a2a.utils.errors import TaskNotCancelableError, TaskNotFoundError, UnsupportedOperationError
from google.protobuf import json_format
from google.rpc import error_details_pb2, status_pb2

from a2a_handoff.protocol.extension import HANDOFF_EXTENSION_URI as URI
from tests.integration.handoff_support import REFUND, Agents, make_agents
from tests.integration.test_interop import (
    TERMINAL,
    artifact_texts,
    event_state,
    history_texts,
    send,
    send_for_task,
    user_message,
    wait_terminal,
)
from tests.support import AgentProcess, free_port

pytestmark = pytest.mark.anyio


def grpc_agent(name: str, store: str, *extra: str) -> AgentProcess:
    """An agent process serving gRPC on a port of its own (`agent.grpc`)."""
    agent = AgentProcess(name, store, extra=extra)
    port = free_port()
    agent.extra = (*agent.extra, f"--grpc-port={port}")
    agent.grpc = f"127.0.0.1:{port}"  # type: ignore[attr-defined]
    return agent


@pytest.fixture(scope="module")
def echo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AgentProcess]:
    """The echo agent over HTTP and gRPC; webhooks on loopback admitted (push configs)."""
    tmp = tmp_path_factory.mktemp("grpc-echo")
    agent = grpc_agent("echo", f"sqlite:///{tmp / 'echo.db'}", "--push-allow=127.0.0.1")
    agent.log_path = tmp / "echo.log"
    agent.start()
    try:
        yield agent
    finally:
        agent.stop()


@asynccontextmanager
async def connect(agent: AgentProcess, *, streaming: bool, polling: bool = False) -> Any:
    """An SDK client resolved from the agent's card, speaking gRPC."""
    async with httpx.AsyncClient(timeout=30.0) as http:
        config = ClientConfig(
            streaming=streaming,
            polling=polling,
            httpx_client=http,
            supported_protocol_bindings=["GRPC"],
            grpc_channel_factory=grpc.aio.insecure_channel,
        )
        client: Client = await create_client(agent.url, config)
        try:
            yield client
        finally:
            await client.close()


@asynccontextmanager
async def stub(agent: AgentProcess) -> AsyncIterator[a2a_pb2_grpc.A2AServiceStub]:
    """The SDK's generated stub on a plain channel to the agent's gRPC port."""
    async with grpc.aio.insecure_channel(agent.grpc) as channel:  # type: ignore[attr-defined]
        yield a2a_pb2_grpc.A2AServiceStub(channel)


def error_info(error: grpc.aio.AioRpcError) -> error_details_pb2.ErrorInfo:
    """The `ErrorInfo` in the status details of a failed call."""
    for key, value in error.trailing_metadata() or ():
        if key == "grpc-status-details-bin":
            status = status_pb2.Status.FromString(value)
            assert status.code == error.code().value[0]
            assert status.message == error.details()
            info = error_details_pb2.ErrorInfo()
            assert status.details[0].Unpack(info)
            return info
    raise AssertionError(f"no status details in {error!r}")


# -- the card, and the operations -------------------------------------------------------


async def test_the_card_lists_grpc_as_a_bare_address_after_the_http_bindings(
    echo: AgentProcess,
) -> None:
    async with httpx.AsyncClient(timeout=10.0) as http:
        card = await A2ACardResolver(http, echo.url).get_agent_card()
    bindings = [(i.protocol_binding, i.url) for i in card.supported_interfaces]
    assert bindings == [
        ("JSONRPC", echo.url),
        ("HTTP+JSON", echo.url.rstrip("/")),
        ("GRPC", echo.grpc),  # type: ignore[attr-defined]
    ]
    assert card.supported_interfaces[2].protocol_version == "1.0"


async def test_blocking_send_get_and_history(echo: AgentProcess) -> None:
    async with connect(echo, streaming=False) as client:
        asked = await send_for_task(client, "ask: Name?")
        assert asked.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        assert [p.text for p in asked.status.message.parts] == ["Name?"]
        done = await send_for_task(client, "Ada", task_id=asked.id, context_id=asked.context_id)
        assert done.id == asked.id
        assert done.status.state == TaskState.TASK_STATE_COMPLETED
        assert artifact_texts(done) == ["Ada"]

        full = await client.get_task(GetTaskRequest(id=asked.id))
        assert [text for _, text in history_texts(full)] == [
            "ask: Name?",
            "Name?",
            "Ada",
            "Thanks, you said: Ada",
        ]
        one = await client.get_task(GetTaskRequest(id=asked.id, history_length=1))
        assert list(one.history) == [full.history[-1]]
        none = await client.get_task(GetTaskRequest(id=asked.id, history_length=0))
        assert len(none.history) == 0


async def test_return_immediately_then_poll(echo: AgentProcess) -> None:
    async with connect(echo, streaming=False) as client:
        config = SendMessageConfiguration(return_immediately=True)
        events = await send(client, user_message("sleep:1"), config)
        assert events[0].task.status.state not in TERMINAL
        done = await wait_terminal(client, events[0].task.id)
    assert artifact_texts(done) == ["slept 1 s"]


async def test_a_direct_reply_is_a_message(echo: AgentProcess) -> None:
    async with connect(echo, streaming=False) as client:
        events = await send(client, user_message("reply: hi there"))
    assert len(events) == 1
    assert events[0].HasField("message"), events[0]
    assert [p.text for p in events[0].message.parts] == ["hi there"]


async def test_streaming_send_ends_with_the_terminal_event(echo: AgentProcess) -> None:
    async with connect(echo, streaming=True) as client:
        events = await send(client, user_message("sleep:1"))
    assert events[0].HasField("task"), events[0]
    task_id = events[0].task.id
    updates = [e.status_update for e in events if e.HasField("status_update")]
    assert all(u.task_id == task_id for u in updates)
    texts = [
        p.text
        for e in events
        if e.HasField("artifact_update")
        for p in e.artifact_update.artifact.parts
    ]
    assert texts == ["slept 1 s"]
    assert event_state(events[-1]) == TaskState.TASK_STATE_COMPLETED
    assert all(event_state(e) not in TERMINAL for e in events[:-1])


async def test_subscribe_starts_with_the_task_and_ends_completed(echo: AgentProcess) -> None:
    async with connect(echo, streaming=False, polling=True) as client:
        started = await send_for_task(client, "sleep:2")
    async with connect(echo, streaming=True) as client:
        events = [e async for e in client.subscribe(SubscribeToTaskRequest(id=started.id))]
        assert events[0].task.id == started.id
        assert event_state(events[-1]) == TaskState.TASK_STATE_COMPLETED
        # A terminal task has no updates: UNIMPLEMENTED, UnsupportedOperation.
        with pytest.raises(UnsupportedOperationError):
            [e async for e in client.subscribe(SubscribeToTaskRequest(id=started.id))]


async def test_list_tasks_filters_and_pages(echo: AgentProcess) -> None:
    async with connect(echo, streaming=False) as client:
        first = await send_for_task(client, "one")
        second = await send_for_task(client, "two", context_id=first.context_id)
        listed = await client.list_tasks(ListTasksRequest(context_id=first.context_id))
        assert {t.id for t in listed.tasks} == {first.id, second.id}
        assert listed.total_size == 2
        assert not listed.next_page_token
        assert not any(t.artifacts for t in listed.tasks)
        with_artifacts = await client.list_tasks(
            ListTasksRequest(context_id=first.context_id, include_artifacts=True)
        )
        assert sorted(artifact_texts(t)[0] for t in with_artifacts.tasks) == ["one", "two"]
        seen, token = [], ""
        for _ in range(4):
            page = await client.list_tasks(
                ListTasksRequest(context_id=first.context_id, page_size=1, page_token=token)
            )
            assert page.page_size == 1
            seen += [t.id for t in page.tasks]
            token = page.next_page_token
            if not token:
                break
        assert sorted(seen) == sorted([first.id, second.id])


async def test_cancel_then_cancel_again(echo: AgentProcess) -> None:
    async with connect(echo, streaming=False, polling=True) as client:
        started = await send_for_task(client, "sleep:30")
        canceled = await client.cancel_task(CancelTaskRequest(id=started.id))
        assert canceled.status.state == TaskState.TASK_STATE_CANCELED
        with pytest.raises(TaskNotCancelableError):
            await client.cancel_task(CancelTaskRequest(id=started.id))
        with pytest.raises(TaskNotFoundError):
            await client.get_task(GetTaskRequest(id=f"absent-{uuid.uuid4()}"))


async def test_errors_carry_the_specification_status_and_their_error_info(
    echo: AgentProcess,
) -> None:
    async with stub(echo) as a2a:
        with pytest.raises(grpc.aio.AioRpcError) as absent:
            await a2a.GetTask(GetTaskRequest(id="absent"), metadata=[("a2a-version", "1.0")])
        assert absent.value.code() == grpc.StatusCode.NOT_FOUND
        info = error_info(absent.value)
        assert (info.reason, info.domain) == ("TASK_NOT_FOUND", "a2a-protocol.org")

        with pytest.raises(grpc.aio.AioRpcError) as old:
            await a2a.GetTask(GetTaskRequest(id="absent"), metadata=[("a2a-version", "0.3")])
        assert old.value.code() == grpc.StatusCode.UNIMPLEMENTED
        assert error_info(old.value).reason == "VERSION_NOT_SUPPORTED"

        with pytest.raises(grpc.aio.AioRpcError) as invalid:
            await a2a.SendMessage(SendMessageRequest())  # no message
        assert invalid.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "message" in (invalid.value.details() or "")

        # Over the agent's body limit (1 MiB), refused before it is read.
        large = SendMessageRequest(message=user_message("x" * (1 << 20)))
        with pytest.raises(grpc.aio.AioRpcError) as too_large:
            await a2a.SendMessage(large)
        assert too_large.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED


async def test_push_config_methods(echo: AgentProcess) -> None:
    async with connect(echo, streaming=False, polling=True) as client:
        task = await send_for_task(client, "sleep:5")
        config = TaskPushNotificationConfig(
            task_id=task.id, id="hook", url="http://127.0.0.1:9/hook", token="t0"
        )
        made = await client.create_task_push_notification_config(config)
        assert (made.task_id, made.id, made.url) == (task.id, "hook", config.url)
        got = await client.get_task_push_notification_config(
            GetTaskPushNotificationConfigRequest(task_id=task.id, id="hook")
        )
        assert got.url == config.url
        listed = await client.list_task_push_notification_configs(
            ListTaskPushNotificationConfigsRequest(task_id=task.id)
        )
        assert [c.id for c in listed.configs] == ["hook"]
        await client.delete_task_push_notification_config(
            DeleteTaskPushNotificationConfigRequest(task_id=task.id, id="hook")
        )
        with pytest.raises(TaskNotFoundError):
            await client.get_task_push_notification_config(
                GetTaskPushNotificationConfigRequest(task_id=task.id, id="hook")
            )
        await client.cancel_task(CancelTaskRequest(id=task.id))


async def test_the_extended_card_is_the_one_served_over_http(echo: AgentProcess) -> None:
    async with stub(echo) as a2a:
        card = await a2a.GetExtendedAgentCard(GetExtendedAgentCardRequest())
    over_http: Any = echo.rpc("GetExtendedAgentCard", {})["result"]
    assert json_format.MessageToDict(card)["skills"] == over_http["skills"]
    assert [s.id for s in card.skills] == ["echo", "ask", "sleep", "reply", "tokens"]


# -- API keys ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AgentProcess]:
    """The echo agent under API-key auth: alice and bob."""
    tmp = tmp_path_factory.mktemp("grpc-auth")
    keys = tmp / "keys"
    keys.write_text("alice=alice-key-0123456789\nbob=bob-key-0123456789\n")
    os.chmod(keys, 0o600)
    agent = grpc_agent("echo", f"sqlite:///{tmp / 'echo.db'}", f"--auth-keys={keys}")
    agent.log_path = tmp / "echo.log"
    agent.start()
    try:
        yield agent
    finally:
        agent.stop()


async def test_api_keys_in_metadata_name_the_principal_who_owns_the_task(
    guarded: AgentProcess,
) -> None:
    alice = [("x-api-key", "alice-key-0123456789")]
    bob = [("authorization", "Bearer bob-key-0123456789")]
    request = SendMessageRequest(message=user_message("mine"))
    async with stub(guarded) as a2a:
        with pytest.raises(grpc.aio.AioRpcError) as anonymous:
            await a2a.SendMessage(request)
        assert anonymous.value.code() == grpc.StatusCode.UNAUTHENTICATED
        with pytest.raises(grpc.aio.AioRpcError) as wrong:
            await a2a.SendMessage(request, metadata=[("x-api-key", "nope")])
        assert wrong.value.code() == grpc.StatusCode.UNAUTHENTICATED

        sent = await a2a.SendMessage(request, metadata=alice)
        task_id = sent.task.id
        assert sent.task.status.state == TaskState.TASK_STATE_COMPLETED
        assert (await a2a.GetTask(GetTaskRequest(id=task_id), metadata=alice)).id == task_id
        # Bob (a bearer token) does not see alice's task: not found, as if absent.
        with pytest.raises(grpc.aio.AioRpcError) as hidden:
            await a2a.GetTask(GetTaskRequest(id=task_id), metadata=bob)
        assert hidden.value.code() == grpc.StatusCode.NOT_FOUND
        listed = await a2a.ListTasks(ListTasksRequest(), metadata=bob)
        assert task_id not in [t.id for t in listed.tasks]
    # And over HTTP, alice's task is the same task.
    fetched = guarded.rpc("GetTask", {"id": task_id}, **{"X-API-Key": "alice-key-0123456789"})
    assert fetched["result"]["id"] == task_id  # type: ignore[index]


# -- a refund handed off, triage → billing ----------------------------------------------


@pytest.fixture(scope="module")
def handoff(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Agents]:
    agents = make_agents(tmp_path_factory.mktemp("grpc-handoff"))
    for agent in (agents.triage, agents.billing):
        port = free_port()
        agent.extra = (*agent.extra, f"--grpc-port={port}")
        agent.grpc = f"127.0.0.1:{port}"  # type: ignore[attr-defined]
    for agent in agents.all():
        agent.start()
    try:
        yield agents
    finally:
        agents.stop()


async def test_a_refund_through_triage_to_billing(handoff: Agents) -> None:
    async with connect(handoff.triage, streaming=False) as client:
        source = await send_for_task(client, REFUND)
    # The proto's TaskState has no TRANSFERRED: COMPLETED, the pointer in the metadata.
    assert source.status.state == TaskState.TASK_STATE_COMPLETED
    ext = json_format.MessageToDict(source.metadata)[URI]
    assert ext["state"] == "TRANSFERRED"
    pointer = ext["transfer"]
    assert pointer["agentName"] == "billing"
    async with connect(handoff.billing, streaming=False) as client:
        successor = await client.get_task(GetTaskRequest(id=pointer["taskId"]))
    assert successor.context_id == source.context_id
    assert successor.status.state == TaskState.TASK_STATE_COMPLETED
    refund = json_format.MessageToDict(successor.artifacts[0].parts[0].data)
    assert refund["orderId"] == "12345"


async def test_an_extension_client_sees_completed_and_the_transferred_pointer(
    handoff: Agents,
) -> None:
    """Activated in the metadata (and echoed back), the handoff extension cannot change the
    enum: the state is COMPLETED, the metadata says TRANSFERRED; a follow-up to the task is
    refused (UNIMPLEMENTED) rather than answered with where the conversation went."""
    extension = [("a2a-extensions", URI)]
    async with stub(handoff.triage) as a2a:
        call = a2a.SendMessage(SendMessageRequest(message=user_message(REFUND)), metadata=extension)
        sent = await call
        assert dict(await call.initial_metadata())["a2a-extensions"] == URI
        source = sent.task
        assert source.status.state == TaskState.TASK_STATE_COMPLETED
        assert json_format.MessageToDict(source.metadata)[URI]["state"] == "TRANSFERRED"
        fetched = await a2a.GetTask(GetTaskRequest(id=source.id), metadata=extension)
        assert fetched.status.state == TaskState.TASK_STATE_COMPLETED
        follow_up = user_message("and?", task_id=source.id, context_id=source.context_id)
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await a2a.SendMessage(SendMessageRequest(message=follow_up), metadata=extension)
        assert refused.value.code() == grpc.StatusCode.UNIMPLEMENTED
        # Without the extension, the follow-up is told where the conversation went.
        told = await a2a.SendMessage(SendMessageRequest(message=follow_up))
        assert told.HasField("message")
        moved = json_format.MessageToDict(told.message.metadata)[URI]
        assert moved["transfer"]["agentName"] == "billing"


# -- a quiet minute ---------------------------------------------------------------------

QUIET = 65.0
"""Seconds a subscriber waits with nothing sent to it: past a minute."""


@pytest.mark.timeout(QUIET + 60)
async def test_a_stock_client_waits_out_a_quiet_minute_on_a_stream(echo: AgentProcess) -> None:
    """The SDK's client on a channel with every gRPC default, subscribed to a task waiting
    for input: nothing comes for over a minute (the server's pings keep the connection), then
    the answer arrives and the stream ends as over SSE, after the terminal event."""
    async with connect(echo, streaming=False) as client:
        asked = await send_for_task(client, "ask: Name?")
    assert asked.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    events: list[Any] = []
    async with connect(echo, streaming=True) as client, anyio.create_task_group() as group:

        async def follow() -> None:
            async for event in client.subscribe(SubscribeToTaskRequest(id=asked.id)):
                events.append(event)

        group.start_soon(follow)
        await anyio.sleep(QUIET)
        assert [e.task.id for e in events] == [asked.id]  # the task, then nothing
        async with connect(echo, streaming=False) as answering:
            answer = user_message("Ada", task_id=asked.id, context_id=asked.context_id)
            await send(answering, answer)
    assert event_state(events[-1]) == TaskState.TASK_STATE_COMPLETED
    assert all(event_state(e) not in TERMINAL for e in events[:-1])


async def test_a_stream_the_client_drops_gives_its_place_back(echo: AgentProcess) -> None:
    """A subscriber that goes away mid-stream: its stream is closed and its slot among the
    agent's open streams given back (`a2a_open_streams`), as for an SSE client."""
    async with connect(echo, streaming=False, polling=True) as client:
        started = await send_for_task(client, "sleep:5")
    async with httpx.AsyncClient(timeout=10.0) as http:

        async def open_streams() -> str:
            text = (await http.get(echo.url + "metrics")).text
            return next(line for line in text.splitlines() if line.startswith("a2a_open_streams"))

        async with stub(echo) as a2a:
            call = a2a.SubscribeToTask(SubscribeToTaskRequest(id=started.id))
            first = await call.read()
            assert first.task.id == started.id
            assert await open_streams() == "a2a_open_streams 1.0"
            call.cancel()
        shown = ""
        for _ in range(100):  # up to 5 s
            shown = await open_streams()
            if shown == "a2a_open_streams 0.0":
                break
            await anyio.sleep(0.05)
        assert shown == "a2a_open_streams 0.0"


async def test_a_requests_tenant_scopes_its_tasks_over_grpc(guarded: AgentProcess) -> None:
    alice = [("x-api-key", "alice-key-0123456789")]
    message = user_message("ask: which?")
    async with stub(guarded) as a2a:
        acme = await a2a.SendMessage(
            SendMessageRequest(message=message, tenant="acme"), metadata=alice
        )
        globex = await a2a.SendMessage(
            SendMessageRequest(message=message, tenant="globex"), metadata=alice
        )
        assert acme.task.id != globex.task.id  # one messageId, a task per tenant
        get = GetTaskRequest(id=acme.task.id, tenant="acme")
        assert (await a2a.GetTask(get, metadata=alice)).id == acme.task.id
        for other in ("globex", ""):
            with pytest.raises(grpc.aio.AioRpcError) as hidden:
                await a2a.GetTask(GetTaskRequest(id=acme.task.id, tenant=other), metadata=alice)
            assert hidden.value.code() == grpc.StatusCode.NOT_FOUND
            with pytest.raises(grpc.aio.AioRpcError) as kept:
                await a2a.CancelTask(
                    CancelTaskRequest(id=acme.task.id, tenant=other), metadata=alice
                )
            assert kept.value.code() == grpc.StatusCode.NOT_FOUND
        listed = await a2a.ListTasks(ListTasksRequest(tenant="globex"), metadata=alice)
        assert [t.id for t in listed.tasks] == [globex.task.id]
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await a2a.ListTasks(ListTasksRequest(tenant="a/b"), metadata=alice)
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    # Over JSON-RPC, the same tenant reaches the same task.
    fetched = guarded.rpc(
        "GetTask", {"id": acme.task.id, "tenant": "acme"}, **{"X-API-Key": "alice-key-0123456789"}
    )
    assert fetched["result"]["id"] == acme.task.id  # type: ignore[index]
