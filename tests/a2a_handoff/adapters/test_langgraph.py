"""The LangGraph adapter with real graphs — `MessagesState` graphs, prebuilt
`create_react_agent` agents, compiled graphs — on a scripted chat model, run in process
(`LangGraphAgent.handle` on a task whose port records handoffs and delegations)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from langchain_core.messages import HumanMessage, SystemMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import create_react_agent
from langgraph.types import Command
from typing_extensions import TypedDict

from a2a_handoff import Completed, Handoff
from a2a_handoff.adapters.langgraph import ask_tool, from_langgraph, handoff_tool
from tests.a2a_handoff.adapters.scripted import (
    DelegatingPort,
    ScriptedChat,
    calls,
    says,
    task_of,
    user_task,
)
from tests.a2a_handoff.llm.test_chat import _handoff

pytestmark = [
    pytest.mark.anyio,
    # The prebuilt agent users have today (`langchain.agents.create_agent` is its successor).
    pytest.mark.filterwarnings("ignore:create_react_agent has been moved"),
]


def chat_graph(model: ScriptedChat) -> StateGraph[Any]:
    """A `MessagesState` graph: one node calling the model."""

    async def respond(state: MessagesState) -> dict[str, Any]:
        return {"messages": [await model.ainvoke(state["messages"])]}

    builder = StateGraph(MessagesState)
    builder.add_node("respond", respond)
    builder.add_edge(START, "respond")
    builder.add_edge("respond", END)
    return builder


async def test_a_messages_state_graph_answers_with_its_last_ai_message() -> None:
    model = ScriptedChat(replies=[says("We open at nine.")])
    agent = from_langgraph(chat_graph(model), checkpoints=InMemorySaver())
    outcome = await agent.handle(user_task("when do you open?"))
    assert outcome == Completed("We open at nine.")


async def test_a_prebuilt_react_agent_answers_after_its_tools() -> None:
    async def order_status(order_id: str) -> str:
        """Look an order up."""
        return f"order {order_id}: delivered"

    model = ScriptedChat(
        replies=[calls("order_status", order_id="12345"), says("Order 12345 was delivered.")]
    )
    graph = create_react_agent(model, [order_status])
    outcome = await from_langgraph(graph, checkpoints=InMemorySaver()).handle(
        user_task("where is order 12345?")
    )
    assert outcome == Completed("Order 12345 was delivered.")
    assert model.seen[1][-1].content == "order 12345: delivered"


async def test_a_prebuilt_react_agent_hands_off_with_its_handoff_tool() -> None:
    model = ScriptedChat(
        replies=[
            calls(
                "transfer_to_billing",
                reason="refund",
                summary="Charged twice on order 12345",
                entities={"orderId": "12345"},
            )
        ]
    )
    graph = create_react_agent(model, [handoff_tool("billing")])
    outcome = await from_langgraph(graph, checkpoints=InMemorySaver()).handle(
        user_task("I was charged twice, refund please")
    )
    assert isinstance(outcome, Handoff)
    assert outcome.target == "billing"
    assert outcome.context == {
        "reason": "refund",
        "summary": "Charged twice on order 12345",
        "entities": {"orderId": "12345"},
    }
    assert len(model.seen) == 1  # the handoff is direct: the model is not called again
    assert "billing" not in graph.builder.nodes  # the user's graph is left as it was


class Desk(TypedDict, total=False):
    text: str
    summary: str
    answer: str


def desk_graph() -> StateGraph[Any]:
    async def desk(state: Desk) -> Command[Any]:
        return Command(goto="billing", update={"summary": f"Refund: {state.get('text')}"})

    builder = StateGraph(Desk)
    builder.add_node("desk", desk)
    builder.add_edge(START, "desk")
    return builder


@pytest.mark.parametrize("compiled", [True, False])
async def test_a_graph_compiled_or_not_hands_off_and_is_left_unchanged(compiled: bool) -> None:
    builder = desk_graph()
    graph: Any = builder.compile(checkpointer=InMemorySaver()) if compiled else builder
    outcome = await from_langgraph(graph, checkpoints=None if compiled else InMemorySaver()).handle(
        user_task("refund order 7")
    )
    assert isinstance(outcome, Handoff)
    assert (outcome.target, outcome.context) == ("billing", {"summary": "Refund: refund order 7"})
    assert list(builder.nodes) == ["desk"]  # no node was added to the user's graph
    assert not builder.compiled or compiled


async def test_a_graph_receiving_a_handoff_sees_the_user_s_turn() -> None:
    model = ScriptedChat(replies=[says("Refund of $20 noted.")])
    agent = from_langgraph(chat_graph(model), checkpoints=InMemorySaver())
    received = _handoff({"intent": "refund", "summary": "Refund on order 12345"})
    outcome = await agent.handle(task_of([received], ()))
    assert outcome == Completed("Refund of $20 noted.")
    (given,) = model.seen
    assert isinstance(given[0], SystemMessage)
    assert "handed over to you by triage" in str(given[0].content)
    assert isinstance(given[-1], HumanMessage)  # a user turn, not only the system note
    assert given[-1].content == "Refund on order 12345"


async def test_a_prebuilt_react_agent_asks_another_agent_and_answers_with_it() -> None:
    port = DelegatingPort(answer="Refund of $49.99 approved for order 12345.")
    model = ScriptedChat(
        replies=[
            calls("ask_billing", request="Refund order 12345", context={"orderId": "12345"}),
            says("Billing approved your refund of $49.99."),
        ]
    )
    graph = create_react_agent(model, [ask_tool("billing", required=("refunds",))])
    outcome = await from_langgraph(graph, checkpoints=InMemorySaver()).handle(
        user_task("refund order 12345", port=port)
    )
    assert outcome == Completed("Billing approved your refund of $49.99.")
    (asked,) = port.delegations
    assert (asked.target, asked.required) == ("billing", ("refunds",))
    assert asked.context == {"orderId": "12345", "summary": "Refund order 12345"}
    told = json.loads(str(model.seen[1][-1].content))
    assert told == {"state": "COMPLETED", "text": "Refund of $49.99 approved for order 12345."}
