"""What the framework-level adapter tests share: a LangChain chat model and an Agents SDK model
answering from a script, in process (the model is outside what is tested: the graph or agent,
the adapter and the framework are real; served agents use the chat-completions server of
tests/llm, which streams only — `ScriptedSdkModel` is for a plain, non-streamed `Runner.run`),
and a task context whose port records what the handler emits, hands off and delegates."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from agents import ModelResponse, Usage
from agents.models.interface import Model
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)
from pydantic import Field

from a2a_handoff import TaskContext
from a2a_handoff.agent import Route
from a2a_handoff.delegated import Delegated
from a2a_handoff.outcomes import Handoff
from a2a_handoff.protocol.models import Message, Part, Role, Task, TaskStatus
from a2a_handoff.protocol.states import TaskState
from tests.ports import RecordingPort


class ScriptedChat(BaseChatModel):
    """Answers each call with the next message of `replies`; `seen` keeps what it was given."""

    replies: list[AIMessage]
    seen: list[list[BaseMessage]] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.seen.append(list(messages))
        return ChatResult(generations=[ChatGeneration(message=self.replies.pop(0))])

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedChat:  # type: ignore[override]
        return self


def says(text: str) -> AIMessage:
    return AIMessage(content=text)


def calls(name: str, **args: Any) -> AIMessage:
    return AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": f"call-{name}"}])


class ScriptedSdkModel(Model):
    """An Agents SDK model answering each call with the next reply: text, or a tool call
    (name, arguments); `seen` keeps each call's input items."""

    def __init__(self, *replies: str | tuple[str, dict[str, Any]]) -> None:
        self.replies = list(replies)
        self.seen: list[Any] = []

    async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
        self.seen.append(kwargs.get("input", args[1] if len(args) > 1 else None))
        reply = self.replies.pop(0)
        n = len(self.seen)
        if isinstance(reply, str):
            text = ResponseOutputText(type="output_text", text=reply, annotations=[])
            item: Any = ResponseOutputMessage(
                id=f"msg_{n}", type="message", role="assistant", status="completed", content=[text]
            )
        else:
            name, arguments = reply
            item = ResponseFunctionToolCall(
                type="function_call",
                call_id=f"call_{n}",
                name=name,
                arguments=json.dumps(arguments),
                id=f"fc_{n}",
                status="completed",
            )
        return ModelResponse(output=[item], usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("ScriptedSdkModel answers a plain Runner.run")


@dataclass
class DelegatingPort(RecordingPort):
    """A `RecordingPort` whose delegations are answered with `answer` and recorded."""

    answer: str = "done"
    delegations: list[Handoff] = field(default_factory=list)

    async def delegate(self, step: str, request: Handoff, within: float) -> Delegated:
        self.delegations.append(request)
        return Delegated(request.target, TaskState.COMPLETED, self.answer, task_id="sub-1")


def user_task(
    *texts: str, routes: Sequence[str] = ("billing",), port: RecordingPort | None = None
) -> TaskContext:
    """A task the user started with `texts` (the last is this step's message)."""
    history = [
        Message(message_id=f"m{i}", role=Role.USER, parts=[Part(text=t)])
        for i, t in enumerate(texts)
    ]
    return task_of(history, routes, port)


def task_of(
    history: list[Message], routes: Sequence[str], port: RecordingPort | None = None
) -> TaskContext:
    task = Task(
        id="t1", context_id="c1", status=TaskStatus(state=TaskState.WORKING), history=history
    )
    port = port or RecordingPort()
    port.routes = {r: Route(r, "http://127.0.0.1:1/", None, None) for r in routes}
    return TaskContext(history[-1], task, port)
