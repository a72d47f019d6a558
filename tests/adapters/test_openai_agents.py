"""The Agents SDK adapter served in process (memory store), the real SDK against the
scripted chat-completions server: guardrails, questions, local handoffs, the run context."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from agents import (
    Agent,
    GuardrailFunctionOutput,
    OpenAIChatCompletionsModel,
    RunContextWrapper,
    function_tool,
    input_guardrail,
    output_guardrail,
)
from openai import AsyncOpenAI

from a2a_handoff import MemoryTaskStore
from a2a_handoff.adapters.openai_agents import A2ARunContext, ask_user, from_agents_sdk
from tests.a2a_handoff.server.test_methods import Client, serve
from tests.llm.chat_server import Call, ChatServer, Say

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def chat() -> Iterator[ChatServer]:
    server = ChatServer().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
async def clients() -> AsyncIterator[list[AsyncOpenAI]]:
    """The test's model clients, closed on its event loop."""
    made: list[AsyncOpenAI] = []
    yield made
    for client in made:
        await client.close()


def model(chat: ChatServer, path: str, clients: list[AsyncOpenAI]) -> OpenAIChatCompletionsModel:
    client = AsyncOpenAI(base_url=chat.url(path), api_key="unused", max_retries=0)
    clients.append(client)
    return OpenAIChatCompletionsModel("scripted", client)


async def served(agent: Agent[Any], **options: Any) -> AsyncIterator[Client]:
    async for client in serve(from_agents_sdk(agent, **options), MemoryTaskStore()):
        yield client


def state(reply: dict[str, Any]) -> str:
    return str(reply["result"]["task"]["status"]["state"])


def said(reply: dict[str, Any]) -> str:
    return str(reply["result"]["task"]["status"]["message"]["parts"][0]["text"])


@input_guardrail
async def no_card_numbers(
    ctx: RunContextWrapper[Any], agent: Agent[Any], text: Any
) -> GuardrailFunctionOutput:
    return GuardrailFunctionOutput(None, tripwire_triggered="4111" in str(text))


@output_guardrail
async def no_promises(
    ctx: RunContextWrapper[Any], agent: Agent[Any], output: Any
) -> GuardrailFunctionOutput:
    return GuardrailFunctionOutput(None, tripwire_triggered="guarantee" in str(output))


async def test_guardrail_trips_reject_or_fail_the_task_naming_the_guardrail(
    chat: ChatServer, clients: list[AsyncOpenAI]
) -> None:
    agent = Agent(
        name="desk",
        model=model(chat, "guarded", clients),
        input_guardrails=[no_card_numbers],
        output_guardrails=[no_promises],
    )
    chat.script("guarded", Say("Sure."), Say("I guarantee a refund."))
    async for client in served(agent):
        rejected = await client.send("my card is 4111 1111 1111 1111")
        assert state(rejected) == "TASK_STATE_REJECTED"
        assert said(rejected) == "input guardrail no_card_numbers tripped"
        failed = await client.send("will I get my money?")
        assert state(failed) == "TASK_STATE_FAILED"
        assert said(failed) == "output guardrail no_promises tripped"


async def test_a_tool_s_question_and_a_final_question_wait_for_the_user(
    chat: ChatServer, clients: list[AsyncOpenAI]
) -> None:
    seen: list[A2ARunContext] = []

    @function_tool
    async def find_order(ctx: RunContextWrapper[A2ARunContext], order_id: str) -> str:
        """Find an order."""
        seen.append(ctx.context)
        if not order_id:
            ask_user("Which order do you mean?")
        return f"order {order_id}: delivered"

    agent = Agent(name="desk", model=model(chat, "asks", clients), tools=[find_order])
    chat.script(
        "asks",
        Call("find_order", {"order_id": ""}),
        Call("find_order", {"order_id": "12345"}),
        Say("Order 12345 was delivered. Anything else?"),
    )
    async for client in served(agent):
        first = await client.send("where is my order")
        assert state(first) == "TASK_STATE_INPUT_REQUIRED"
        assert said(first) == "Which order do you mean?"
        task = first["result"]["task"]
        second = await client.send("12345", task_id=task["id"], context_id=task["contextId"])
        assert state(second) == "TASK_STATE_INPUT_REQUIRED"  # the final text asks
        assert said(second) == "Order 12345 was delivered. Anything else?"
    # The follow-up continued the stored conversation: the question, then the answer.
    asked = chat.requests["asks"][1]["messages"]
    assert [m["content"] for m in asked if m["role"] in ("user", "assistant")][-3:] == [
        "where is my order",
        "Which order do you mean?",
        "12345",
    ]
    context = seen[-1]
    assert context.task.task_id == task["id"]
    assert context.transfer_context == {}
    assert context.handed_over_by is None


async def test_a_handoff_to_a_local_agent_stays_in_the_process(
    chat: ChatServer, clients: list[AsyncOpenAI]
) -> None:
    faq = Agent(name="faq", model=model(chat, "faq", clients), instructions="Answer questions.")
    desk = Agent(name="desk", model=model(chat, "desk", clients), handoffs=[faq])
    chat.script("desk", Call("transfer_to_faq", {}))
    chat.script("faq", Say("We open at nine."))
    async for client in served(desk):
        reply = await client.send("when do you open")
        assert state(reply) == "TASK_STATE_COMPLETED"
        assert said(reply) == "We open at nine."
        assert "metadata" not in reply["result"]["task"] or "transfer" not in str(
            reply["result"]["task"]["metadata"]
        )


async def test_max_turns_pass_through_and_fail_the_task(
    chat: ChatServer, clients: list[AsyncOpenAI]
) -> None:
    @function_tool
    async def spin() -> str:
        """Spin."""
        return "again"

    agent = Agent(name="desk", model=model(chat, "spins", clients), tools=[spin])
    chat.script("spins", *[Call("spin", {})] * 3)
    async for client in served(agent, max_turns=2):
        reply = await client.send("go")
        assert state(reply) == "TASK_STATE_FAILED"
        assert said(reply) == "the agent did not finish within 2 turns"
