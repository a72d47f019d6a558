"""What a transfer tool's call hands over: the model's arguments as the transfer context,
and the earlier turns when the edge's contract lets them travel (`full`, `last_k`)."""

from __future__ import annotations

import pytest

from a2a_handoff.agent import Route, TaskContext
from a2a_handoff.contracts.contract import load_contract
from a2a_handoff.llm import LLMAgent, Model
from a2a_handoff.llm.chat import HISTORY_KEY
from a2a_handoff.llm.llm_agent import _HANDED_OVER, Transfer, _HandoffTool, _Step
from a2a_handoff.llm.model import ToolCall
from a2a_handoff.outcomes import Handoff
from a2a_handoff.protocol.models import Message, Part, Role, Task, TaskStatus
from a2a_handoff.protocol.states import TaskState
from tests.ports import RecordingPort
from tests.support import ROOT

pytestmark = pytest.mark.anyio

CHAT = [
    {"role": "system", "content": "rules"},
    {"role": "user", "content": "I was charged twice for order 12345"},
    {"role": "assistant", "content": "Let me hand you to billing."},
]


def _ctx(attempts: list[Handoff], refusal: str | None = None) -> TaskContext:
    message = Message(message_id="m1", role=Role.USER, parts=[Part(text="hi")])
    task = Task(id="t1", context_id="c1", status=TaskStatus(state=TaskState.WORKING))

    return TaskContext(message, task, RecordingPort(refused=refusal, attempts=attempts))


def _tool(strategy: str | None) -> _HandoffTool:
    contract = load_contract(ROOT / "contracts" / "triage-to-billing.yaml")
    if strategy is not None:
        payload = contract.payload.model_copy(update={"history_strategy": strategy})
        contract = contract.model_copy(update={"payload": payload})
    route = Route("billing", "http://127.0.0.1:1/", None, contract)
    return _HandoffTool(Transfer("billing", ("refunds",)), route, {})


@pytest.mark.parametrize(
    ("strategy", "turns"), [("summary", 0), ("full", 2), ("last_k", 2), ("pointer", 0)]
)
async def test_the_contract_s_history_strategy_decides_what_travels(
    strategy: str, turns: int
) -> None:
    attempts: list[Handoff] = []
    agent = LLMAgent("triage", Model("scripted", "http://127.0.0.1:1/v1"))
    step = _Step(_ctx(attempts), list(CHAT))
    call = ToolCall("c1", "transfer_to_billing", '{"intent": "refund", "summary": "Refund"}')
    assert await agent._transfer(step, _tool(strategy), call) is _HANDED_OVER
    (decision,) = attempts
    assert decision.target == "billing"
    assert decision.required == ("refunds",)
    assert decision.context["intent"] == "refund"
    carried = decision.context.get(HISTORY_KEY, [])
    assert len(carried) == turns
    if turns:
        assert carried[0] == CHAT[1]


async def test_a_refusal_is_the_tool_s_result_and_counted() -> None:
    attempts: list[Handoff] = []
    agent = LLMAgent("triage", Model("scripted", "http://127.0.0.1:1/v1"))
    step = _Step(_ctx(attempts, refusal="billing rejected the handoff: busy"), list(CHAT))
    call = ToolCall("c1", "transfer_to_billing", "{not json")
    said = await agent._transfer(step, _tool(None), call)
    assert isinstance(said, str)
    assert said.startswith("refused: bad arguments: the arguments are not JSON")
    assert attempts == []  # nothing was attempted with arguments that are not JSON
    call = ToolCall("c2", "transfer_to_billing", '{"intent": "refund", "summary": "Refund"}')
    said = await agent._transfer(step, _tool(None), call)
    assert said == (
        "refused: billing rejected the handoff: busy. Choose again: correct the arguments,"
        " pick another tool, or answer."
    )
    assert step.refusals == 2
