"""The agent's service without any HTTP: opened and closed in order, and answering the A2A
operations with domain values (a task as its caller sees it, a Message, a stream of events,
a typed error) — what every face encodes for itself."""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from a2a_handoff import HANDOFF_EXTENSION_URI, MemoryTaskStore
from a2a_handoff.errors import TaskNotFoundError, TooManyStreamsError
from a2a_handoff.protocol.models import (
    GetTaskRequest,
    Message,
    SendMessageRequest,
    SubscribeToTaskRequest,
)
from a2a_handoff.protocol.states import TaskState
from a2a_handoff.server import AgentService, Caller, LimitsConfig, TaskView
from servers.echo import EchoAgent, echo_card

pytestmark = pytest.mark.anyio

URL = "http://agent.test/"
ALICE = Caller("alice")


def send(text: str, **configuration: Any) -> SendMessageRequest:
    message = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": text}]}
    params: dict[str, Any] = {"message": message}
    if configuration:
        params["configuration"] = configuration
    return SendMessageRequest.model_validate(params)


class RecordingStore(MemoryTaskStore):
    """A memory store that notes when it is opened and closed."""

    def __init__(self, said: list[str]) -> None:
        super().__init__()
        self.said = said

    async def open(self) -> None:
        self.said.append("store opened")
        await super().open()

    async def aclose(self) -> None:
        self.said.append("store closed")
        await super().aclose()


async def test_the_service_opens_its_parts_in_order_and_closes_them_in_reverse() -> None:
    said: list[str] = []
    service = AgentService(EchoAgent(), echo_card(URL), RecordingStore(said))

    @contextlib.asynccontextmanager
    async def face() -> AsyncIterator[None]:
        # A face runs once everything else has started: the outbox delivers by then.
        said.append(f"face in, outbox running: {service.manager.handoffs.outbox._periodic}")
        yield
        said.append("face out")

    service.while_serving(face)
    async with service as opened:
        assert opened is service
        with pytest.raises(RuntimeError, match="open already"):
            service.while_serving(face)
        with pytest.raises(RuntimeError, match="open already"):
            await service.__aenter__()
    assert said[0] == "store opened"
    assert said[1].startswith("face in, outbox running: <Task")
    assert said[2:] == ["face out", "store closed"]


async def test_operations_answer_domain_values() -> None:
    async with AgentService(EchoAgent(), echo_card(URL), MemoryTaskStore()) as service:
        done = await service.send_message(send("hello"), ALICE)
        assert isinstance(done, TaskView)
        assert done.task.status.state is TaskState.COMPLETED
        assert json.loads(done.json()) == done.task.dump()
        # A task that takes longer than any keep-alive interval is awaited whole.
        slow = await service.send_message(send("sleep:0.3"), ALICE)
        assert isinstance(slow, TaskView)
        assert slow.task.status.state is TaskState.COMPLETED
        reply = await service.send_message(send("reply: hi"), ALICE)
        assert isinstance(reply, Message)
        assert reply.parts[0].text == "hi"
        found = await service.get_task(GetTaskRequest(id=done.task.id), ALICE)
        assert found.task.id == done.task.id
        with pytest.raises(TaskNotFoundError):  # another caller's task is not there for Bob
            await service.get_task(GetTaskRequest(id=done.task.id), Caller("bob"))


async def test_a_blocking_send_comes_in_two_steps() -> None:
    async with AgentService(EchoAgent(), echo_card(URL), MemoryTaskStore()) as service:
        sent = await service.sending(send("sleep:0.2"), ALICE)
        assert sent.ready is not None
        assert not sent.ready.done()
        view = await sent.result()
        assert sent.ready.done()
        assert isinstance(view, TaskView)
        assert view.task.status.state is TaskState.COMPLETED
        at_once = await service.sending(send("sleep:0.2", returnImmediately=True), ALICE)
        assert at_once.ready is None
        early = await at_once.result()
        assert isinstance(early, TaskView)
        assert early.task.status.state in (TaskState.SUBMITTED, TaskState.WORKING)


async def test_a_stream_holds_its_slot_until_it_is_closed() -> None:
    limits = LimitsConfig(max_streams=1)
    async with AgentService(
        EchoAgent(), echo_card(URL), MemoryTaskStore(), limits=limits
    ) as service:
        stream = await service.send_streaming_message(send("tokens: a b"), ALICE)
        with pytest.raises(TooManyStreamsError):  # its slot is taken while it is open
            await service.send_streaming_message(send("hello"), ALICE)
        items = [item async for _, item in stream]
        await stream.aclose()
        assert items[0].task is not None
        last = items[-1].status_update
        assert last is not None
        assert last.status.state is TaskState.COMPLETED
        assert service.streams.open == 0
        # The slot is free again: a subscription to a task that waits takes it.
        asked = await service.send_message(send("ask: name?"), ALICE)
        assert isinstance(asked, TaskView)
        request = SubscribeToTaskRequest(id=asked.task.id)
        watching = Caller("alice", frozenset({HANDOFF_EXTENSION_URI}))
        subscription = await service.subscribe_to_task(request, watching)
        _seq, head = await anext(subscription)
        assert head.task is not None
        assert head.task.status.state is TaskState.INPUT_REQUIRED
        await subscription.aclose()
        assert service.streams.open == 0
