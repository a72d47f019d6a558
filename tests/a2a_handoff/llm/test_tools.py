"""Function tools: schemas from type hints, arguments checked, the held-back declaration."""

from __future__ import annotations

from typing import Literal

import pytest

from a2a_handoff.agent import TaskContext
from a2a_handoff.llm import function_tool, tool
from a2a_handoff.llm.tools import ToolArgumentsError


async def lookup(order_id: str, carrier: Literal["ups", "dhl"] = "ups", limit: int = 3) -> str:
    """Look an order up.

    More text the model does not need."""
    return f"{order_id}/{carrier}/{limit}"


def test_the_schema_comes_from_the_type_hints_and_the_docstring() -> None:
    spec = function_tool(lookup).spec()["function"]
    assert spec["name"] == "lookup"
    assert spec["description"] == "Look an order up."
    parameters = spec["parameters"]
    assert parameters["required"] == ["order_id"]
    assert parameters["properties"]["carrier"]["enum"] == ["ups", "dhl"]
    assert parameters["properties"]["limit"]["type"] == "integer"
    assert parameters["additionalProperties"] is False


def test_bad_arguments_are_told_not_run() -> None:
    lookup_tool = function_tool(lookup)
    assert lookup_tool.parse('{"order_id": "1", "limit": "2"}')["limit"] == 2
    with pytest.raises(ToolArgumentsError, match="carrier"):
        lookup_tool.parse('{"order_id": "1", "carrier": "fedex"}')
    with pytest.raises(ToolArgumentsError, match="not JSON"):
        lookup_tool.parse("{order")
    with pytest.raises(ToolArgumentsError, match="extra: Extra inputs are not permitted"):
        lookup_tool.parse('{"order_id": "1", "extra": 1}')


def test_the_context_is_given_not_shown_and_amounts_are_actions() -> None:
    @tool(amount="amount")
    async def refund(ctx: TaskContext, order_id: str, amount: float) -> str:
        return "done"

    assert refund.context_param == "ctx"
    assert set(refund.spec()["function"]["parameters"]["properties"]) == {"order_id", "amount"}
    action = refund.action(refund.parse('{"order_id": "7", "amount": 900}'))
    assert action.amount == 900.0
    assert action.params == {"order_id": "7", "amount": 900.0}
    assert refund.guarded


def test_only_async_functions_are_tools() -> None:
    def sync(x: int) -> int:
        return x

    with pytest.raises(TypeError, match="async"):
        function_tool(sync)  # type: ignore[arg-type]
