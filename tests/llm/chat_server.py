"""A real chat-completions server on 127.0.0.1 with scripted answers, for the LLM tests.

It speaks the OpenAI wire (`POST /<agent>/v1/chat/completions`, `stream: true` answered as SSE
chunks, tool calls as deltas); each agent under test has its own base URL
(`server.url("triage")`) and its own queue of answers, and every request is recorded. Not a
mock of our code: the agents reach it over HTTP with the official `openai` client.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections import defaultdict, deque
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from tests.support import free_port


@dataclass
class Say:
    """Answer with text, streamed in `chunks`; after the first chunk, wait for `hold`."""

    text: str
    chunks: int = 1
    hold: threading.Event | None = None


@dataclass
class Call:
    """Answer with a tool call."""

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)


@dataclass
class Garbage:
    """Answer 200 with an event stream that is not chat-completion chunks."""


@dataclass
class Hang:
    """Hold the request until `release` is set (or 30 s), then answer nothing."""

    release: threading.Event


Answer = Say | Call | Garbage | Hang


def _chunk(delta: dict[str, Any], finish: str | None = None) -> str:
    body = {
        "id": "chatcmpl-test",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": "scripted",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return f"data: {json.dumps(body)}\n\n"


class ChatServer:
    """The server, its scripts and what it was asked."""

    def __init__(self) -> None:
        self.port = free_port()
        self.scripts: dict[str, deque[Answer]] = defaultdict(deque)
        self.requests: dict[str, list[dict[str, Any]]] = defaultdict(list)
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    def url(self, agent: str) -> str:
        return f"http://127.0.0.1:{self.port}/{agent}/v1"

    def script(self, agent: str, *answers: Answer) -> None:
        self.scripts[agent].extend(answers)

    async def _completions(self, request: Request) -> Response:
        agent = request.path_params["agent"]
        body = await request.json()
        self.requests[agent].append(body)
        queue = self.scripts[agent]
        if not queue:
            return JSONResponse({"error": {"message": f"no answer scripted for {agent}"}}, 500)
        answer = queue.popleft()
        if isinstance(answer, Hang):
            await asyncio.to_thread(answer.release.wait, 30)
            return Response(status_code=204)
        return StreamingResponse(self._stream(answer), media_type="text/event-stream")

    async def _stream(self, answer: Answer) -> Any:
        if isinstance(answer, Garbage):
            yield "data: {this is not json\n\n"
            return
        yield _chunk({"role": "assistant", "content": ""})
        if isinstance(answer, Say):
            size = max(1, -(-len(answer.text) // answer.chunks))
            for i in range(0, len(answer.text), size):
                yield _chunk({"content": answer.text[i : i + size]})
                if answer.hold is not None and i == 0:
                    await asyncio.to_thread(answer.hold.wait, 20)
            yield _chunk({}, "stop")
        elif isinstance(answer, Call):
            arguments = json.dumps(answer.arguments)
            head = {
                "index": 0,
                "id": f"call_{answer.name}",
                "type": "function",
                "function": {"name": answer.name, "arguments": ""},
            }
            yield _chunk({"tool_calls": [head]})
            half = len(arguments) // 2  # the arguments arrive in two pieces, as they do
            for piece in (arguments[:half], arguments[half:]):
                yield _chunk({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]})
            yield _chunk({}, "tool_calls")
        yield "data: [DONE]\n\n"

    def start(self) -> ChatServer:
        app = Starlette(
            routes=[Route("/{agent}/v1/chat/completions", self._completions, methods=["POST"])]
        )
        config = uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline:
                raise TimeoutError("the chat server did not start")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(10)
