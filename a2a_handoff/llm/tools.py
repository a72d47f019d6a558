"""Function tools: plain async Python functions a model may call.

A function's type hints become the tool's JSON schema (through a pydantic model built from
its signature), its docstring the description. Arguments are validated before it runs; what
it returns goes back to the model as text (JSON for anything but a string); what it raises
goes back as the tool's error, for the model to read. A parameter annotated `TaskContext`
is the step's context, given by the agent and not shown to the model.

A tool that changes the world for good is declared so — `@tool(irreversible=True)`, or
`@tool(amount="amount")` naming the argument holding its amount — and is held back for an
operator's approval exactly as `ctx.escalation.guard` holds an action.
"""

from __future__ import annotations

import inspect
import json
import typing
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, create_model

from a2a_handoff.agent import TaskContext
from a2a_handoff.escalation import Action

__all__ = ["FunctionTool", "ToolArgumentsError", "function_tool", "tool"]

ToolFunction = Callable[..., Awaitable[Any]]


class ToolArgumentsError(ValueError):
    """The model's arguments for a tool are not JSON or do not fit its schema."""


def json_object(raw: str) -> dict[str, Any]:
    """A tool call's arguments as the model sent them: a JSON object (else said to it)."""
    try:
        data = json.loads(raw or "{}")
    except ValueError:
        raise ToolArgumentsError(f"the arguments are not JSON: {raw[:200]!r}") from None
    if not isinstance(data, dict):
        raise ToolArgumentsError("the arguments must be a JSON object")
    return data


@dataclass(frozen=True, slots=True)
class FunctionTool:
    """An async function offered to the model as a tool."""

    name: str
    description: str
    fn: ToolFunction
    arguments: type[BaseModel]
    context_param: str | None = None  # the parameter that takes the TaskContext
    irreversible: bool = False
    amount: str | None = None  # the argument holding the action's amount

    def spec(self) -> dict[str, Any]:
        """The tool as the chat-completions API declares it."""
        schema = self.arguments.model_json_schema()
        schema.pop("title", None)
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": schema},
        }

    def parse(self, raw: str) -> dict[str, Any]:
        """The model's arguments, validated (ToolArgumentsError: said to the model)."""
        data = json_object(raw)
        try:
            model = self.arguments.model_validate(data)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or '(arguments)'}: {e['msg']}"
                for e in exc.errors()
            )
            raise ToolArgumentsError(problems) from None
        return {name: getattr(model, name) for name in type(model).model_fields}

    def action(self, arguments: Mapping[str, Any]) -> Action:
        """The call as an action the escalation policy may hold back."""
        amount = arguments.get(self.amount) if self.amount else None
        params = json.loads(json.dumps(dict(arguments), default=str))
        shown = ", ".join(f"{k}={v!r}" for k, v in params.items())
        return Action(
            self.name,
            params=params,
            irreversible=self.irreversible,
            amount=float(amount) if isinstance(amount, int | float) else None,
            description=f"{self.name}({shown})",
        )

    @property
    def guarded(self) -> bool:
        return self.irreversible or self.amount is not None

    async def __call__(self, ctx: TaskContext, arguments: Mapping[str, Any]) -> str:
        """Run it; its result as the text the model reads."""
        kwargs = dict(arguments)
        if self.context_param:
            kwargs[self.context_param] = ctx
        result = await self.fn(**kwargs)
        if isinstance(result, str):
            return result
        if isinstance(result, BaseModel):
            return result.model_dump_json()
        return json.dumps(result, default=str)


def function_tool(
    fn: ToolFunction | FunctionTool,
    *,
    name: str | None = None,
    description: str | None = None,
    irreversible: bool = False,
    amount: str | None = None,
) -> FunctionTool:
    """`fn` as a tool: its schema from its type hints, its description from its docstring."""
    if isinstance(fn, FunctionTool):
        return fn
    if not inspect.iscoroutinefunction(fn):
        raise TypeError(f"{getattr(fn, '__name__', fn)!r}: a tool must be an async function")
    hints = typing.get_type_hints(fn)
    fields: dict[str, Any] = {}
    context_param = None
    for param in inspect.signature(fn).parameters.values():
        hint = hints.get(param.name, Any)
        if hint is TaskContext:
            context_param = param.name
            continue
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise TypeError(f"{fn.__name__}: a tool takes named parameters only")
        default = ... if param.default is param.empty else param.default
        fields[param.name] = (hint, default)
    if amount is not None and amount not in fields:
        raise TypeError(f"{fn.__name__}: amount={amount!r} names no parameter")
    arguments = create_model(
        f"{fn.__name__}_arguments", __config__=ConfigDict(extra="forbid"), **fields
    )
    doc = inspect.getdoc(fn) or ""
    return FunctionTool(
        name=name or fn.__name__,
        description=description or doc.split("\n\n")[0].strip() or fn.__name__,
        fn=fn,
        arguments=arguments,
        context_param=context_param,
        irreversible=irreversible,
        amount=amount,
    )


def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    irreversible: bool = False,
    amount: str | None = None,
) -> Callable[[ToolFunction], FunctionTool]:
    """Declare a function tool: `@tool(irreversible=True)` or `@tool(amount="amount")` hold
    its calls back for approval under the agent's escalation policy."""

    def declare(fn: ToolFunction) -> FunctionTool:
        return function_tool(
            fn, name=name, description=description, irreversible=irreversible, amount=amount
        )

    return declare
