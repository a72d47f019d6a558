"""The Agents SDK adapter served in process (memory store), the real SDK against the
scripted chat-completions server: guardrails, questions, local handoffs, the run context of a
handed-over task, and the history a remote handoff carries."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from agents import (
    Agent,
    GuardrailFunctionOutput,
    HandoffInputData,
    OpenAIChatCompletionsModel,
    RunContextWrapper,
    function_tool,
    input_guardrail,
    output_guardrail,
)
from openai import AsyncOpenAI

from a2a_handoff import Completed, Handoff, MemoryTaskStore, TaskContext
from a2a_handoff.adapters._sdk_tools import HandedOver, Step, transfer_tool
from a2a_handoff.adapters.openai_agents import (
    A2ARunContext,
    ask_user,
    from_agents_sdk,
    remote_agent,
)
from a2a_handoff.agent import Route
from a2a_handoff.contracts.contract import load_contract
from a2a_handoff.llm.chat import HISTORY_KEY
from a2a_handoff.llm.transfer import HandoffTool, Transfer, tool_spec
from a2a_handoff.protocol.models import Message, Part, Role, Task, TaskStatus
from a2a_handoff.protocol.states import TaskState
from tests.a2a_handoff.llm.test_chat import _handoff
from tests.a2a_handoff.server.test_methods import Client, serve
from tests.llm.chat_server import Call, ChatServer, Say
from tests.ports import RecordingPort
from tests.support import ROOT

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


def _received_ctx(attempts: list[Handoff]) -> TaskContext:
    """A task billing received from triage (the stored handoff message first), then the
    user's follow-up; handing off is recorded in `attempts` and taken."""
    history = [
        _handoff({"intent": "refund", "summary": "Refund on order 12345"}),
        Message(message_id="m2", role=Role.USER, parts=[Part(text="it was $20")]),
    ]
    task = Task(
        id="t1", context_id="c1", status=TaskStatus(state=TaskState.WORKING), history=history
    )

    return TaskContext(history[-1], task, RecordingPort(attempts=attempts))


async def test_the_receiving_side_reads_the_transfer_context_in_the_run_context(
    chat: ChatServer, clients: list[AsyncOpenAI]
) -> None:
    seen: list[A2ARunContext] = []

    @function_tool
    async def note(ctx: RunContextWrapper[A2ARunContext]) -> str:
        """Read the case."""
        seen.append(ctx.context)
        return "noted"

    agent = Agent(name="billing", model=model(chat, "receives", clients), tools=[note])
    chat.script("receives", Call("note", {}), Say("Refund of $20 noted."))
    outcome = await from_agents_sdk(agent).handle(_received_ctx([]))
    assert outcome == Completed("Refund of $20 noted.")
    (context,) = seen
    assert context.transfer_context == {"intent": "refund", "summary": "Refund on order 12345"}
    assert context.handed_over_by == "triage"
    said = chat.requests["receives"][0]["messages"]
    assert any("handed over to you by triage" in (m["content"] or "") for m in said)


def _contract_tool(strategy: str) -> HandoffTool:
    contract = load_contract(ROOT / "contracts" / "triage-to-billing.yaml")
    payload = contract.payload.model_copy(update={"history_strategy": strategy})
    contract = contract.model_copy(update={"payload": payload})
    route = Route("billing", "http://127.0.0.1:1/", None, contract)
    return HandoffTool(Transfer("billing", ("refunds",)), route, tool_spec("t", "d", {}))


def users_only(data: HandoffInputData) -> HandoffInputData:
    history = data.input_history
    assert not isinstance(history, str)
    kept = tuple(m for m in history if isinstance(m, dict) and m.get("role") == "user")
    return data.clone(input_history=kept)


@pytest.mark.parametrize(
    ("strategy", "filter_", "carried"),
    [
        ("full", None, ["user", "assistant", "user"]),
        ("full", users_only, ["user", "user"]),  # the SDK's filter chooses what travels…
        ("summary", users_only, []),  # …within what the edge's contract lets travel
    ],
)
async def test_an_input_filter_chooses_the_history_within_the_contract_s_strategy(
    strategy: str, filter_: Any, carried: list[str]
) -> None:
    attempts: list[Handoff] = []
    step = Step(_received_ctx(attempts), [], 3)
    step.chat += [
        {"role": "user", "content": "refund please"},
        {"role": "assistant", "content": "Which order?"},
        {"role": "user", "content": "12345"},
    ]
    tool = transfer_tool(
        _contract_tool(strategy), step, remote_agent("billing", input_filter=filter_)
    )
    with pytest.raises(HandedOver):
        await tool.on_invoke_tool(None, '{"intent": "refund", "summary": "Refund on 12345"}')  # type: ignore[arg-type]
    (decision,) = attempts
    assert decision.required == ("refunds",)
    assert [t["role"] for t in decision.context.get(HISTORY_KEY, [])] == carried
