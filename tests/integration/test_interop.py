"""Interoperability: the official A2A python client (`a2a-sdk`) against a real echo agent.

Every test talks to `python -m servers echo` through the SDK only — card resolution, transport
choice, request encoding and response parsing are all the SDK's — so a reply the SDK cannot
parse, or a state it does not expect, fails here. Tests marked with `binding` run over both
JSON-RPC and HTTP+JSON (the SDK's REST transport). The 0.3 client is `test_interop03.py`.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from a2a.client import A2ACardResolver, Client, ClientConfig, create_client
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    GetExtendedAgentCardRequest,
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
from a2a.utils.errors import JSON_RPC_ERROR_CODE_MAP, TaskNotCancelableError
from google.protobuf import json_format

from a2a_handoff.protocol.extension import HANDOFF_EXTENSION_URI as URI
from tests.integration.handoff_support import REFUND, Agents, result, running
from tests.support import AgentProcess

pytestmark = pytest.mark.anyio

TERMINAL = {
    TaskState.TASK_STATE_COMPLETED,
    TaskState.TASK_STATE_FAILED,
    TaskState.TASK_STATE_CANCELED,
    TaskState.TASK_STATE_REJECTED,
}


BINDINGS = pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON"])


@asynccontextmanager
async def connect(
    agent: AgentProcess, *, streaming: bool, polling: bool = False, binding: str = "JSONRPC"
) -> AsyncIterator[Client]:
    """An SDK client resolved from the agent's URL (its card), with a generous HTTP timeout,
    speaking `binding`."""
    async with httpx.AsyncClient(timeout=30.0) as http:
        config = ClientConfig(
            streaming=streaming,
            polling=polling,
            httpx_client=http,
            supported_protocol_bindings=[binding],
        )
        client = await create_client(agent.url, config)
        try:
            yield client
        finally:
            await client.close()


def user_message(text: str, *, task_id: str = "", context_id: str = "") -> Message:
    return Message(
        message_id=f"m-{uuid.uuid4()}",
        role=Role.ROLE_USER,
        parts=[Part(text=text)],
        task_id=task_id,
        context_id=context_id,
    )


async def send(
    client: Client, message: Message, config: SendMessageConfiguration | None = None
) -> list[StreamResponse]:
    request = SendMessageRequest(message=message)
    if config is not None:
        request.configuration.CopyFrom(config)
    return [event async for event in client.send_message(request)]


async def send_for_task(client: Client, text: str, **ids: str) -> Task:
    """A non-streaming send; the SDK yields exactly one event, the Task."""
    events = await send(client, user_message(text, **ids))
    assert len(events) == 1
    assert events[0].HasField("task"), events[0]
    return events[0].task


def artifact_texts(task: Task) -> list[str]:
    return [part.text for artifact in task.artifacts for part in artifact.parts]


def history_texts(task: Task) -> list[tuple[int, str]]:
    return [(m.role, part.text) for m in task.history for part in m.parts]


def event_state(event: StreamResponse) -> int | None:
    if event.HasField("task"):
        return event.task.status.state
    if event.HasField("status_update"):
        return event.status_update.status.state
    return None


async def wait_terminal(client: Client, task_id: str) -> Task:
    """Poll GetTask until the task is terminal (at most 15 s)."""
    with anyio.fail_after(15):
        while True:
            task = await client.get_task(GetTaskRequest(id=task_id))
            if task.status.state in TERMINAL:
                return task
            await anyio.sleep(0.2)


# -- agent card -------------------------------------------------------------------------


async def test_sdk_resolves_and_parses_the_agent_card(echo_agent: AgentProcess) -> None:
    async with httpx.AsyncClient(timeout=10.0) as http:
        card = await A2ACardResolver(http, echo_agent.url).get_agent_card()
    assert card.name == "echo"
    assert card.capabilities.streaming is True
    assert card.capabilities.push_notifications is True  # the example agents push by default
    assert [s.id for s in card.skills] == ["echo"]
    assert len(card.supported_interfaces) == 2
    interface, rest = card.supported_interfaces
    assert interface.protocol_binding == "JSONRPC"
    assert interface.url == echo_agent.url
    assert interface.protocol_version == "1.0"
    assert rest.protocol_binding == "HTTP+JSON"
    assert rest.url == echo_agent.url.rstrip("/")
    assert rest.protocol_version == "1.0"

    # The SDK's own entry point, with its default config and its own HTTP client.
    client = await create_client(echo_agent.url, ClientConfig(streaming=False))
    try:
        task = await send_for_task(client, "card ok")
    finally:
        await client.close()
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert artifact_texts(task) == ["card ok"]


# -- 1. blocking send -------------------------------------------------------------------


@BINDINGS
async def test_blocking_send_completes_with_the_echo(
    echo_agent: AgentProcess, binding: str
) -> None:
    async with connect(echo_agent, streaming=False, binding=binding) as client:
        message = user_message("hello")
        events = await send(client, message)
        assert len(events) == 1
        task = events[0].task
        assert task.id
        assert task.context_id
        assert task.status.state == TaskState.TASK_STATE_COMPLETED
        assert artifact_texts(task) == ["hello"]
        assert task.history[0].message_id == message.message_id
        assert task.history[0].context_id == task.context_id
        assert history_texts(task)[0] == (Role.ROLE_USER, "hello")

        fetched = await client.get_task(GetTaskRequest(id=task.id))
        assert fetched.id == task.id
        assert fetched.context_id == task.context_id
        assert fetched.status.state == TaskState.TASK_STATE_COMPLETED
        assert artifact_texts(fetched) == ["hello"]


# -- 2. non-blocking send ---------------------------------------------------------------


@pytest.mark.parametrize("how", ["client-polling", "return-immediately"])
async def test_non_blocking_send_returns_at_once_then_completes(
    echo_agent: AgentProcess, how: str
) -> None:
    polling = how == "client-polling"
    config = None if polling else SendMessageConfiguration(return_immediately=True)
    async with connect(echo_agent, streaming=False, polling=polling) as client:
        started = time.monotonic()
        events = await send(client, user_message("sleep:2"), config)
        elapsed = time.monotonic() - started
        assert len(events) == 1
        task = events[0].task
        assert task.status.state in {TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING}
        assert elapsed < 1.5, f"returnImmediately took {elapsed:.2f} s"
        assert task.context_id
        assert not task.artifacts

        done = await wait_terminal(client, task.id)
        assert done.status.state == TaskState.TASK_STATE_COMPLETED
        assert done.context_id == task.context_id
        assert artifact_texts(done) == ["slept 2 s"]


# -- 3. streaming send ------------------------------------------------------------------


@BINDINGS
async def test_streaming_send_yields_task_then_updates_then_completed(
    echo_agent: AgentProcess,
    binding: str,
) -> None:
    async with connect(echo_agent, streaming=True, binding=binding) as client:
        events = await send(client, user_message("sleep:1"))

    assert len(events) >= 3, events
    first = events[0]
    assert first.HasField("task"), first
    task_id, context_id = first.task.id, first.task.context_id
    assert task_id
    assert context_id
    assert first.task.status.state not in TERMINAL

    updates = [e for e in events[1:] if e.HasField("status_update")]
    artifacts = [e.artifact_update for e in events[1:] if e.HasField("artifact_update")]
    for update in updates:
        assert update.status_update.task_id == task_id
        assert update.status_update.context_id == context_id
    working = [u for u in updates if u.status_update.status.state == TaskState.TASK_STATE_WORKING]
    assert working, "no WORKING status update in the stream"
    progress = [p.text for u in working for p in u.status_update.status.message.parts]
    assert "slept 1 of 1 s" in progress

    assert [p.text for a in artifacts for p in a.artifact.parts] == ["slept 1 s"]
    assert all(a.task_id == task_id for a in artifacts)

    last = events[-1]
    assert last.HasField("status_update"), last
    assert last.status_update.status.state == TaskState.TASK_STATE_COMPLETED
    # Nothing after the terminal event, and no terminal state before it.
    assert all(event_state(e) not in TERMINAL for e in events[:-1])


# -- 4. get with history ----------------------------------------------------------------


async def test_get_task_trims_history_to_history_length(echo_agent: AgentProcess) -> None:
    async with connect(echo_agent, streaming=False) as client:
        asked = await send_for_task(client, "ask: Name?")
        assert asked.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        answered = await send_for_task(client, "Ada", task_id=asked.id, context_id=asked.context_id)
        assert answered.status.state == TaskState.TASK_STATE_COMPLETED

        full = await client.get_task(GetTaskRequest(id=asked.id))
        assert history_texts(full) == [
            (Role.ROLE_USER, "ask: Name?"),
            (Role.ROLE_AGENT, "Name?"),
            (Role.ROLE_USER, "Ada"),
            (Role.ROLE_AGENT, "Thanks, you said: Ada"),
        ]

        one = await client.get_task(GetTaskRequest(id=asked.id, history_length=1))
        assert len(one.history) == 1
        assert one.history[0] == full.history[-1]
        assert one.status.state == TaskState.TASK_STATE_COMPLETED
        assert artifact_texts(one) == artifact_texts(full) == ["Ada"]

        two = await client.get_task(GetTaskRequest(id=asked.id, history_length=2))
        assert list(two.history) == list(full.history[-2:])

        none = await client.get_task(GetTaskRequest(id=asked.id, history_length=0))
        assert len(none.history) == 0
        assert none.status.state == TaskState.TASK_STATE_COMPLETED


# -- 5. list tasks ----------------------------------------------------------------------


@BINDINGS
async def test_list_tasks_filters_by_context_and_pages(
    echo_agent: AgentProcess, binding: str
) -> None:
    async with connect(echo_agent, streaming=False, binding=binding) as client:
        first = await send_for_task(client, "one")
        second = await send_for_task(client, "two", context_id=first.context_id)
        other = await send_for_task(client, "three")
        assert second.context_id == first.context_id
        assert second.id != first.id
        assert other.context_id != first.context_id
        for task in (first, second, other):
            assert task.status.state == TaskState.TASK_STATE_COMPLETED

        in_context = await client.list_tasks(ListTasksRequest(context_id=first.context_id))
        assert {t.id for t in in_context.tasks} == {first.id, second.id}
        assert len(in_context.tasks) == 2
        assert in_context.total_size == 2
        assert not in_context.next_page_token
        assert all(t.context_id == first.context_id for t in in_context.tasks)

        with_artifacts = await client.list_tasks(
            ListTasksRequest(context_id=other.context_id, include_artifacts=True)
        )
        assert [t.id for t in with_artifacts.tasks] == [other.id]
        assert artifact_texts(with_artifacts.tasks[0]) == ["three"]

        seen: list[str] = []
        token = ""
        for _ in range(10):
            page = await client.list_tasks(ListTasksRequest(page_size=1, page_token=token))
            assert len(page.tasks) == 1
            assert page.total_size == 3
            assert page.page_size == 1
            seen.append(page.tasks[0].id)
            token = page.next_page_token
            if not token:
                break
        assert sorted(seen) == sorted([first.id, second.id, other.id])


# -- 6. cancel --------------------------------------------------------------------------


@BINDINGS
async def test_cancel_running_task_then_cancel_again_is_32002(
    echo_agent: AgentProcess, binding: str
) -> None:
    async with connect(echo_agent, streaming=False, polling=True, binding=binding) as client:
        started = await send_for_task(client, "sleep:30")
        assert started.status.state not in TERMINAL

        canceled = await client.cancel_task(CancelTaskRequest(id=started.id))
        assert canceled.id == started.id
        assert canceled.context_id == started.context_id
        assert canceled.status.state == TaskState.TASK_STATE_CANCELED

        fetched = await client.get_task(GetTaskRequest(id=started.id))
        assert fetched.status.state == TaskState.TASK_STATE_CANCELED
        assert not fetched.artifacts

        with pytest.raises(TaskNotCancelableError) as raised:
            await client.cancel_task(CancelTaskRequest(id=started.id))
        assert JSON_RPC_ERROR_CODE_MAP[type(raised.value)] == -32002

        still = await client.get_task(GetTaskRequest(id=started.id))
        assert still.status.state == TaskState.TASK_STATE_CANCELED


# -- 7. subscribe -----------------------------------------------------------------------


@BINDINGS
async def test_subscribe_to_running_task_starts_with_task_and_ends_completed(
    echo_agent: AgentProcess,
    binding: str,
) -> None:
    async with connect(echo_agent, streaming=False, polling=True, binding=binding) as poller:
        started = await send_for_task(poller, "sleep:2")
        assert started.status.state not in TERMINAL

    async with connect(echo_agent, streaming=True, binding=binding) as client:
        events = [e async for e in client.subscribe(SubscribeToTaskRequest(id=started.id))]

    assert len(events) >= 2, events
    first = events[0]
    assert first.HasField("task"), first
    assert first.task.id == started.id
    assert first.task.context_id == started.context_id
    assert first.task.status.state not in TERMINAL

    last = events[-1]
    assert last.HasField("status_update"), last
    assert last.status_update.task_id == started.id
    assert last.status_update.status.state == TaskState.TASK_STATE_COMPLETED
    assert all(event_state(e) not in TERMINAL for e in events[:-1])

    texts = [
        p.text
        for e in events
        if e.HasField("artifact_update")
        for p in e.artifact_update.artifact.parts
    ]
    assert texts == ["slept 2 s"]


# -- 8. input required round trip ------------------------------------------------------


async def test_input_required_round_trip_blocking(echo_agent: AgentProcess) -> None:
    async with connect(echo_agent, streaming=False) as client:
        question = user_message("ask: Name?")
        asked = await send(client, question)
        assert len(asked) == 1
        task = asked[0].task
        assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        assert [p.text for p in task.status.message.parts] == ["Name?"]
        assert task.status.message.role == Role.ROLE_AGENT

        answer = user_message("Ada", task_id=task.id, context_id=task.context_id)
        answered = await send(client, answer)
        assert len(answered) == 1
        done = answered[0].task
        assert done.id == task.id
        assert done.context_id == task.context_id
        assert done.status.state == TaskState.TASK_STATE_COMPLETED
        assert artifact_texts(done) == ["Ada"]

        fetched = await client.get_task(GetTaskRequest(id=task.id))
    users = [m for m in fetched.history if m.role == Role.ROLE_USER]
    assert [m.message_id for m in users] == [question.message_id, answer.message_id]
    assert [p.text for m in users for p in m.parts] == ["ask: Name?", "Ada"]
    assert all(m.task_id == task.id for m in fetched.history)


async def test_input_required_round_trip_streaming(echo_agent: AgentProcess) -> None:
    async with connect(echo_agent, streaming=True) as client:
        question = user_message("ask: Name?")
        asked = await send(client, question)
        assert asked[0].HasField("task"), asked[0]
        task_id, context_id = asked[0].task.id, asked[0].task.context_id
        # The stream ends when the task waits for input.
        assert event_state(asked[-1]) == TaskState.TASK_STATE_INPUT_REQUIRED

        answer = user_message("Ada", task_id=task_id, context_id=context_id)
        answered = await send(client, answer)
        assert answered, "no events for the follow-up"
        ids = {
            e.task.id if e.HasField("task") else e.status_update.task_id
            for e in answered
            if e.HasField("task") or e.HasField("status_update")
        }
        assert ids == {task_id}
        assert event_state(answered[-1]) == TaskState.TASK_STATE_COMPLETED

        fetched = await client.get_task(GetTaskRequest(id=task_id))
    assert fetched.status.state == TaskState.TASK_STATE_COMPLETED
    assert artifact_texts(fetched) == ["Ada"]
    users = [m for m in fetched.history if m.role == Role.ROLE_USER]
    assert [m.message_id for m in users] == [question.message_id, answer.message_id]


# -- 9. a handed-off task, and a direct reply ---------------------------------------------


@pytest.fixture(scope="module")
def handoff_agents(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Agents]:
    """Triage → billing / logistics, shared by the bindings' handoff tests."""
    with running(tmp_path_factory.mktemp("interop-handoff")) as agents:
        yield agents


@BINDINGS
async def test_a_handed_off_task_and_its_successor(handoff_agents: Agents, binding: str) -> None:
    agents = handoff_agents
    async with connect(agents.triage, streaming=False, binding=binding) as client:
        source = await send_for_task(client, REFUND)
    # No extension activated: TRANSFERRED is shown as COMPLETED, the pointer in metadata.
    assert source.status.state == TaskState.TASK_STATE_COMPLETED
    ext = json_format.MessageToDict(source.metadata)[URI]
    assert ext["state"] == "TRANSFERRED"
    pointer = ext["transfer"]
    assert pointer["agentName"] == "billing"
    async with connect(agents.billing, streaming=False, binding=binding) as client:
        successor = await client.get_task(GetTaskRequest(id=pointer["taskId"]))
        assert successor.context_id == source.context_id
        assert successor.status.state == TaskState.TASK_STATE_COMPLETED
        refund = json_format.MessageToDict(successor.artifacts[0].parts[0].data)
        assert refund["orderId"] == "12345"
        listed = await client.list_tasks(ListTasksRequest(context_id=source.context_id))
        assert [t.id for t in listed.tasks] == [successor.id]


@BINDINGS
async def test_a_client_without_the_extension_sees_one_state_everywhere(
    handoff_agents: Agents, binding: str
) -> None:
    """GetTask, ListTasks (and its status filter) and a follow-up all speak of the handed-off
    task as COMPLETED; a follow-up is answered with where the conversation went."""
    agents = handoff_agents
    async with connect(agents.triage, streaming=False, binding=binding) as client:
        source = await send_for_task(client, REFUND)
        pointer = json_format.MessageToDict(source.metadata)[URI]["transfer"]
        fetched = await client.get_task(GetTaskRequest(id=source.id))
        assert fetched.status.state == TaskState.TASK_STATE_COMPLETED
        completed = await client.list_tasks(
            ListTasksRequest(context_id=source.context_id, status=TaskState.TASK_STATE_COMPLETED)
        )
        assert [(t.id, t.status.state) for t in completed.tasks] == [
            (source.id, TaskState.TASK_STATE_COMPLETED)
        ]
        assert completed.total_size == 1
        working = await client.list_tasks(
            ListTasksRequest(context_id=source.context_id, status=TaskState.TASK_STATE_WORKING)
        )
        assert list(working.tasks) == []
        for streaming in (False, True):
            async with connect(agents.triage, streaming=streaming, binding=binding) as follow:
                events = await send(
                    follow,
                    user_message(
                        "and one more thing", task_id=source.id, context_id=source.context_id
                    ),
                )
            assert len(events) == 1, events
            assert events[0].HasField("message"), events
            reply = events[0].message
            assert reply.role == Role.ROLE_AGENT
            assert reply.context_id == source.context_id
            assert list(reply.reference_task_ids) == [source.id]
            text = reply.parts[0].text
            assert "is complete" in text
            assert "TRANSFERRED" not in text
            assert pointer["agentUrl"] in text
            assert pointer["taskId"] in text
            moved = json_format.MessageToDict(reply.metadata)[URI]
            assert moved == {"state": "TRANSFERRED", "transfer": pointer}
        with pytest.raises(TaskNotCancelableError) as refused:
            await client.cancel_task(CancelTaskRequest(id=source.id))
        assert "COMPLETED" in str(refused.value)
        assert "TRANSFERRED" not in str(refused.value)
    # A client that asked for the extension is shown TRANSFERRED, and filters on it.
    listed = result(
        agents.triage.rpc("ListTasks", {"contextId": source.context_id}, **{"A2A-Extensions": URI})
    )
    assert [t["status"]["state"] for t in listed["tasks"]] == ["TASK_STATE_TRANSFERRED"]
    for state, count in (("TASK_STATE_TRANSFERRED", 1), ("TASK_STATE_COMPLETED", 0)):
        params = {"contextId": source.context_id, "status": state}
        listed = result(agents.triage.rpc("ListTasks", params, **{"A2A-Extensions": URI}))
        assert listed["totalSize"] == count, (state, listed)
    follow_up = {
        "message": {
            "messageId": f"m-{uuid.uuid4()}",
            "role": "ROLE_USER",
            "parts": [{"text": "more"}],
            "taskId": source.id,
        }
    }
    refused_ext: Any = agents.triage.rpc("SendMessage", follow_up, **{"A2A-Extensions": URI})
    assert refused_ext["error"]["code"] == -32004
    assert "TRANSFERRED" in refused_ext["error"]["message"]


@BINDINGS
async def test_a_direct_reply_is_one_message(echo_agent: AgentProcess, binding: str) -> None:
    for streaming in (False, True):
        async with connect(echo_agent, streaming=streaming, binding=binding) as client:
            events = await send(client, user_message("reply: just this"))
        assert len(events) == 1
        assert events[0].HasField("message"), events[0]
        assert [p.text for p in events[0].message.parts] == ["just this"]
        assert events[0].message.role == Role.ROLE_AGENT


# -- card signatures: the SDK's verifier, keys from the agent's JWKS ------------------------


def _sdk_verifier(jwks: dict[str, object], jku: str) -> object:
    """The official SDK's card verifier, its keys from our JWKS; a `jku` other than the one
    we read the keys from, or a missing kid, is refused (the SDK leaves both to us)."""
    import jwt
    from a2a.utils.signing import create_signature_verifier

    keys = {str(k["kid"]): k for k in jwks["keys"]}  # type: ignore[attr-defined]

    def key_provider(kid: str | None, url: str | None) -> jwt.PyJWK:
        if kid is None or url != jku or kid not in keys:
            raise jwt.PyJWTError(f"no trusted key {kid!r} at {url!r}")
        return jwt.PyJWK(keys[kid])

    return create_signature_verifier(key_provider, algorithms=["EdDSA"])


async def test_the_sdk_verifies_the_signed_card_with_the_published_jwks(
    echo_agent: AgentProcess,
) -> None:
    async with httpx.AsyncClient(timeout=30.0) as http:
        jwks = (await http.get(echo_agent.url + ".well-known/jwks.json")).json()
        jku = echo_agent.url + ".well-known/jwks.json"
        verifier = _sdk_verifier(jwks, jku)
        card = await A2ACardResolver(http, echo_agent.url).get_agent_card(
            signature_verifier=verifier  # type: ignore[arg-type]
        )
        assert card.name == "echo"
        assert len(card.signatures) == len(jwks["keys"]) >= 1
        # The same card with a changed member no longer verifies with the SDK either.
        raw = (await http.get(echo_agent.url + ".well-known/agent-card.json")).json()
    from a2a.client.card_resolver import parse_agent_card
    from a2a.utils.signing import InvalidSignaturesError

    raw["description"] = "an impostor"
    with pytest.raises(InvalidSignaturesError):
        verifier(parse_agent_card(raw))  # type: ignore[operator]


# -- the authenticated extended card ------------------------------------------------------


@BINDINGS
async def test_the_extended_card_goes_to_an_authenticated_caller_only(
    tmp_path: Path, binding: str
) -> None:
    keys = tmp_path / "keys"
    keys.write_text("alice=alice-key-0123456789\n")
    keys.chmod(0o600)
    agent = AgentProcess(
        "echo", f"sqlite:///{tmp_path / 'echo.db'}", extra=("--auth-keys", str(keys))
    )
    agent.log_path = tmp_path / "echo.log"
    agent.start()
    try:
        async with httpx.AsyncClient(timeout=10.0) as http:
            public = await A2ACardResolver(http, agent.url).get_agent_card()
        assert public.capabilities.extended_agent_card is True
        assert [s.id for s in public.skills] == ["echo"]
        headers = {"X-API-Key": "alice-key-0123456789"}
        async with httpx.AsyncClient(timeout=10.0, headers=headers) as http:
            config = ClientConfig(httpx_client=http, supported_protocol_bindings=[binding])
            client = await create_client(agent.url, config)
            try:
                extended = await client.get_extended_agent_card(GetExtendedAgentCardRequest())
            finally:
                await client.close()
        assert extended.name == "echo"
        assert [s.id for s in extended.skills] == ["echo", "ask", "sleep", "reply", "tokens"]
        async with httpx.AsyncClient(timeout=10.0) as http:
            rpc = await http.post(
                agent.url,
                json={"jsonrpc": "2.0", "id": 1, "method": "GetExtendedAgentCard", "params": {}},
                headers={"A2A-Version": "1.0"},
            )
            rest = await http.get(agent.url + "extendedAgentCard", headers={"A2A-Version": "1.0"})
        assert rpc.status_code == rest.status_code == 401  # no key: no extended card
        assert "ask" not in rpc.text
        assert "ask" not in rest.text
    finally:
        agent.stop()
