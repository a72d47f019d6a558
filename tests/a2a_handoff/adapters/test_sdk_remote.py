"""Remote agents of an Agents SDK agent, the real SDK against the scripted chat-completions
server: remote is explicit, the SDK's handoff options hold for remote handoffs, an agent with
remote handoffs and ask tools runs under a plain `Runner.run`, ask tools delegate when served,
and the user's own run context passes through."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from agents import Agent, OpenAIChatCompletionsModel, RunContextWrapper, Runner, function_tool
from openai import AsyncOpenAI
from pydantic import BaseModel

from a2a_handoff import Completed, InputRequired
from a2a_handoff.adapters.openai_agents import (
    A2ARunContext,
    a2a_context,
    ask_agent,
    from_agents_sdk,
    remote_agent,
    remote_result,
)
from tests.a2a_handoff.adapters.scripted import (
    DelegatingPort,
    ScriptedSdkModel,
    task_of,
    user_task,
)
from tests.a2a_handoff.llm.test_chat import _handoff
from tests.llm.chat_server import Call, ChatServer, Say
from tests.ports import RecordingPort

pytestmark = pytest.mark.anyio

REFUND = {"reason": "refund", "summary": "Refund order 12345", "entities": {"orderId": "12345"}}


@pytest.fixture(scope="module")
def chat() -> Iterator[ChatServer]:
    server = ChatServer().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
async def clients() -> AsyncIterator[list[AsyncOpenAI]]:
    made: list[AsyncOpenAI] = []
    yield made
    for client in made:
        await client.close()


def model(chat: ChatServer, path: str, clients: list[AsyncOpenAI]) -> OpenAIChatCompletionsModel:
    client = AsyncOpenAI(base_url=chat.url(path), api_key="unused", max_retries=0)
    clients.append(client)
    return OpenAIChatCompletionsModel("scripted", client)


def tools_offered(request: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {t["function"]["name"]: t["function"] for t in request.get("tools", [])}


def tool_results(request: dict[str, Any]) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "tool"]


class RefundInput(BaseModel):
    order_id: str
    amount: float


async def test_a_remote_handoff_honours_the_sdk_s_handoff_options(
    chat: ChatServer, clients: list[AsyncOpenAI]
) -> None:
    chosen: list[tuple[Any, RefundInput]] = []

    async def record(ctx: RunContextWrapper[Any], given: RefundInput) -> None:
        chosen.append((ctx.context, given))

    billing = remote_agent(
        "billing",
        tool_name_override="escalate_refund",
        input_type=RefundInput,
        on_handoff=record,
    )
    desk = Agent(name="desk", model=model(chat, "options", clients), handoffs=[billing])
    bad = Agent(name="desk", model=model(chat, "bad-options", clients), handoffs=[billing])
    chat.script(
        "bad-options",
        Call("escalate_refund", {"order_id": "12345", "amount": "lots"}),  # invalid: refused
        Say("Which amount?"),
    )
    refusing = RecordingPort()
    assert await from_agents_sdk(bad).handle(user_task("refund", port=refusing)) == InputRequired(
        "Which amount?"
    )
    assert tool_results(chat.requests["bad-options"][1])[0].startswith("refused: bad arguments")
    assert (chosen, refusing.attempts) == ([], [])
    chat.script("options", Call("escalate_refund", {"order_id": "12345", "amount": 20}))
    port = RecordingPort()
    outcome = await from_agents_sdk(desk).handle(user_task("refund $20", port=port))
    assert outcome is None  # handed over: the task is TRANSFERRED
    (first,) = chat.requests["options"]
    offered = tools_offered(first)
    assert "transfer_to_billing" not in offered
    assert offered["escalate_refund"]["parameters"]["required"] == ["order_id", "amount"]
    ((context, given),) = chosen  # on_handoff ran once, for the valid call, with its input
    assert given == RefundInput(order_id="12345", amount=20)
    assert isinstance(context, A2ARunContext)
    (handed,) = port.attempts
    assert handed.target == "billing"
    assert handed.context["order_id"] == "12345"
    assert handed.context["amount"] == 20


async def test_a_local_agent_named_like_a_route_stays_local(
    chat: ChatServer, clients: list[AsyncOpenAI]
) -> None:
    local = Agent(name="billing", model=model(chat, "local-billing", clients))
    desk = Agent(name="desk", model=model(chat, "local-desk", clients), handoffs=[local])
    chat.script("local-desk", Call("transfer_to_billing", {}))
    chat.script("local-billing", Say("Local billing here: refunded."))
    port = RecordingPort()
    outcome = await from_agents_sdk(desk).handle(user_task("refund please", port=port))
    assert outcome == Completed("Local billing here: refunded.")
    assert port.attempts == []  # nothing was handed to the route "billing"


async def test_an_agent_with_remote_agents_runs_under_a_plain_runner() -> None:
    called: list[str] = []
    scripted = ScriptedSdkModel(
        ("ask_logistics", {"reason": "where", "summary": "Where is order 12345?"}),
        ("transfer_to_billing", REFUND),
    )
    desk = Agent(
        name="desk",
        model=scripted,
        tools=[ask_agent("logistics")],
        handoffs=[remote_agent("billing", on_handoff=lambda _: called.append("billing"))],
    )
    result = await Runner.run(desk, "refund order 12345")
    assert result.final_output == remote_result("billing")
    assert result.last_agent.name == "billing"
    assert called == ["billing"]
    (said,) = [i["output"] for i in scripted.seen[1] if i.get("type") == "function_call_output"]
    assert said.startswith("not asked: logistics is a remote agent")


async def test_an_ask_tool_delegates_when_served_and_the_model_reads_the_answer(
    chat: ChatServer, clients: list[AsyncOpenAI]
) -> None:
    desk = Agent(
        name="desk",
        model=model(chat, "asks", clients),
        tools=[ask_agent("billing", required=["refunds"])],
    )
    chat.script("asks", Call("ask_billing", REFUND), Say("Billing approved your refund."))
    port = DelegatingPort(answer="Refund of $20 approved for order 12345.")
    outcome = await from_agents_sdk(desk).handle(user_task("refund order 12345", port=port))
    assert outcome == Completed("Billing approved your refund.")
    (asked,) = port.delegations
    assert (asked.target, asked.required) == ("billing", ("refunds",))
    assert asked.context["summary"] == "Refund order 12345"
    assert asked.context["entities"] == {"orderId": "12345"}
    told = json.loads(tool_results(chat.requests["asks"][1])[0])
    assert told == {"state": "COMPLETED", "text": "Refund of $20 approved for order 12345."}
    assert (
        "the conversation stays with you"
        in tools_offered(chat.requests["asks"][0])["ask_billing"]["description"]
    )


@dataclass
class Shop:
    name: str
    task_id: str = ""


@pytest.mark.parametrize("made", [False, True])
async def test_the_user_s_own_run_context_passes_through(
    chat: ChatServer, clients: list[AsyncOpenAI], made: bool
) -> None:
    seen: list[tuple[Any, str]] = []

    @function_tool
    async def look(ctx: RunContextWrapper[Shop]) -> str:
        """Look at the shop."""
        seen.append((ctx.context, a2a_context().task.task_id))
        return "open"

    path = f"context-{made}"
    agent = Agent(name="desk", model=model(chat, path, clients), tools=[look])
    chat.script(path, Call("look", {}), Say("The shop is open."))
    served = (
        from_agents_sdk(agent, context_factory=lambda a2a: Shop("acme", a2a.task.task_id))
        if made
        else from_agents_sdk(agent, context=Shop("acme"))
    )
    assert await served.handle(user_task("is it open?")) == Completed("The shop is open.")
    ((context, task_id),) = seen
    assert context == Shop("acme", "t1" if made else "")
    assert task_id == "t1"


async def test_a_run_receiving_a_handoff_is_given_the_user_s_turn(
    chat: ChatServer, clients: list[AsyncOpenAI]
) -> None:
    agent = Agent(name="billing", model=model(chat, "received", clients))
    chat.script("received", Say("Refund noted."))
    received = _handoff({"intent": "refund", "summary": "Refund on order 12345"})
    assert await from_agents_sdk(agent).handle(task_of([received], ())) == Completed(
        "Refund noted."
    )
    messages = chat.requests["received"][0]["messages"]
    assert messages[-1] == {"role": "user", "content": "Refund on order 12345"}
