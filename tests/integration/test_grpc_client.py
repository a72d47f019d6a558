"""Our client over gRPC: `AgentClient` calling an agent whose card offers gRPC alone.

The agent is the real echo agent, a process serving HTTP and gRPC (`--grpc-port`). The
client reads a card that is the echo agent's own with its gRPC interface alone (served by a
mock HTTP transport that answers nothing else: a JSON-RPC call would fail), so every call
below goes over gRPC to the real process.
"""

from __future__ import annotations

import json
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest

from a2a_handoff.client import AgentClient, RetryPolicy
from a2a_handoff.client.replicas import never_arrived
from a2a_handoff.errors import (
    AuthenticationError,
    RemoteError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnavailableError,
)
from a2a_handoff.protocol.models import Message, Role, Task
from a2a_handoff.protocol.states import TaskState
from tests.support import AgentProcess, free_port

pytestmark = pytest.mark.anyio

CARD_URL = "http://echo.test:9/"  # the card's address: only the card is read there


@pytest.fixture(scope="module")
def echo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AgentProcess]:
    tmp = tmp_path_factory.mktemp("grpc-client")
    port = free_port()
    agent = AgentProcess("echo", f"sqlite:///{tmp / 'echo.db'}", extra=(f"--grpc-port={port}",))
    agent.grpc = f"127.0.0.1:{port}"  # type: ignore[attr-defined]
    agent.log_path = tmp / "echo.log"
    agent.start()
    try:
        yield agent
    finally:
        agent.stop()


def grpc_only_card(agent: AgentProcess, address: str | None = None) -> bytes:
    """The agent's own card, offering its gRPC interface (or `address`) alone."""
    card = httpx.get(agent.url + ".well-known/agent-card.json", timeout=10.0).json()
    grpc = address or agent.grpc  # type: ignore[attr-defined]
    card["supportedInterfaces"] = [{"url": grpc, "protocolBinding": "GRPC"}]
    card.pop("signatures", None)
    return json.dumps(card).encode()


def card_only(card: bytes) -> httpx.MockTransport:
    """HTTP that serves the card and nothing else (a JSON-RPC call gets a 404)."""

    def answer(request: httpx.Request) -> httpx.Response:
        if request.method == "GET" and request.url.path == "/.well-known/agent-card.json":
            return httpx.Response(200, content=card, headers={"content-type": "application/json"})
        return httpx.Response(404)

    return httpx.MockTransport(answer)


@asynccontextmanager
async def reading(
    card: bytes, at: str = CARD_URL, credentials: dict[str, str] | None = None
) -> AsyncIterator[AgentClient]:
    """A client that has read `card` at `at`."""
    http = httpx.AsyncClient(transport=card_only(card), timeout=10.0)
    retry = RetryPolicy(attempts=2, wait=False)
    agent = AgentClient(http, retry=retry, credentials=credentials)
    try:
        await agent.card(at)
        yield agent
    finally:
        await agent.aclose()


@pytest.fixture
async def client(echo: AgentProcess) -> AsyncIterator[AgentClient]:
    async with reading(grpc_only_card(echo)) as agent:
        card = await agent.card(CARD_URL)
        assert [i.protocol_binding for i in card.supported_interfaces] == ["GRPC"]
        yield agent


def message(text: str, **ids: Any) -> Message:
    return Message(message_id=str(uuid.uuid4()), role=Role.USER, parts=[{"text": text}], **ids)


def artifact_texts(task: Task) -> list[str]:
    return [p.text for a in task.artifacts or [] for p in a.parts if p.text]


async def test_send_and_get_go_over_grpc(client: AgentClient) -> None:
    sent = await client.send(CARD_URL, message("hello over gRPC"))
    assert isinstance(sent, Task)
    assert sent.status.state is TaskState.COMPLETED
    assert artifact_texts(sent) == ["hello over gRPC"]
    read = await client.get_task(CARD_URL, sent.id, history_length=5)
    assert read.id == sent.id
    assert read.status.state is TaskState.COMPLETED
    assert [m.parts[0].text for m in read.history or []][:1] == ["hello over gRPC"]
    assert client.grpc is not None  # the transport was made for it


async def test_a_repeated_message_id_returns_the_same_task(client: AgentClient) -> None:
    once = message("only once")
    first = await client.send(CARD_URL, once)
    again = await client.send(CARD_URL, once)
    assert isinstance(first, Task)
    assert isinstance(again, Task)
    assert again.id == first.id


async def test_list_tasks_over_grpc(client: AgentClient) -> None:
    sent = await client.send(CARD_URL, message("listed"))
    assert isinstance(sent, Task)
    page = await client.list_tasks(CARD_URL, contextId=sent.context_id)
    assert [t["id"] for t in page["tasks"]] == [sent.id]


async def test_stream_over_grpc_ends_with_the_task_done(client: AgentClient) -> None:
    items = [item async for _seq, item in client.stream(CARD_URL, message("tokens: a b c"))]
    states = [i.status_update.status.state for i in items if i.status_update is not None]
    assert states[-1] is TaskState.COMPLETED
    chunks = [p.text for i in items if i.artifact_update for p in i.artifact_update.artifact.parts]
    assert "".join(c or "" for c in chunks).split() == ["a", "b", "c"]


async def test_subscribe_over_grpc_follows_the_task_to_its_end(client: AgentClient) -> None:
    sent = await client.send(CARD_URL, message("sleep:1"), return_immediately=True)
    assert isinstance(sent, Task)
    events = [item async for _seq, item in client.subscribe(CARD_URL, sent.id)]
    last = events[-1]
    state = last.status_update.status.state if last.status_update else last.task.status.state  # type: ignore[union-attr]
    assert state is TaskState.COMPLETED


async def test_cancel_over_grpc_and_the_errors_as_their_codes(client: AgentClient) -> None:
    asked = await client.send(CARD_URL, message("ask: Name?"))
    assert isinstance(asked, Task)
    assert asked.status.state is TaskState.INPUT_REQUIRED
    canceled = await client.cancel(CARD_URL, asked.id)
    assert canceled.status.state is TaskState.CANCELED
    with pytest.raises(RemoteError) as again:
        await client.cancel(CARD_URL, asked.id)
    assert again.value.code == TaskNotCancelableError.code
    assert again.value.data[0]["reason"] == "TASK_NOT_CANCELABLE"
    with pytest.raises(RemoteError) as missing:
        await client.get_task(CARD_URL, str(uuid.uuid4()))
    assert missing.value.code == TaskNotFoundError.code


async def test_a_grpc_address_nothing_listens_on_is_never_reached(echo: AgentProcess) -> None:
    async with reading(grpc_only_card(echo, f"127.0.0.1:{free_port()}")) as client:
        with pytest.raises(UnavailableError) as refused:
            await client.send(CARD_URL, message("nobody"))
    assert "cannot reach" in str(refused.value)
    assert never_arrived(refused.value)  # safe to send elsewhere: nothing left


async def test_without_the_grpc_extra_the_call_says_what_to_install(
    echo: AgentProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "grpc", None)  # `import grpc` fails, as without the extra
    monkeypatch.delitem(sys.modules, "a2a_handoff.client.grpc_transport", raising=False)
    async with reading(grpc_only_card(echo)) as client:
        with pytest.raises(UnavailableError) as missing:
            await client.send(CARD_URL, message("no grpcio"))
    assert "pip install '.[grpc]'" in str(missing.value)
    assert echo.grpc in str(missing.value)  # type: ignore[attr-defined]


KEY = "alice-key-0123456789"


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AgentProcess]:
    """The echo agent under API-key auth (alice), over HTTP and gRPC."""
    tmp = tmp_path_factory.mktemp("grpc-client-auth")
    keys = tmp / "keys"
    keys.write_text(f"alice={KEY}\n")
    keys.chmod(0o600)
    port = free_port()
    agent = AgentProcess(
        "echo",
        f"sqlite:///{tmp / 'echo.db'}",
        extra=(f"--grpc-port={port}", f"--auth-keys={keys}"),
    )
    agent.grpc = f"127.0.0.1:{port}"  # type: ignore[attr-defined]
    agent.log_path = tmp / "echo.log"
    agent.start()
    try:
        yield agent
    finally:
        agent.stop()


async def test_the_agent_s_key_goes_in_the_metadata_to_its_own_host_only(
    guarded: AgentProcess,
) -> None:
    card = grpc_only_card(guarded)
    same_host = "http://127.0.0.1:9/"  # the card's address (only read through the mock)
    async with reading(card, same_host, {same_host: KEY}) as client:
        sent = await client.send(same_host, message("with alice's key"))
        assert isinstance(sent, Task)
        assert sent.status.state is TaskState.COMPLETED
        assert (await client.get_task(same_host, sent.id)).id == sent.id  # alice's own
    # A card read at another host naming 127.0.0.1 for gRPC: the key is not sent there.
    async with reading(card, CARD_URL, {CARD_URL: KEY}) as client:
        with pytest.raises(RemoteError) as refused:
            await client.send(CARD_URL, message("without"))
    assert refused.value.code == AuthenticationError.code
