"""The model: one streamed chat completion over any OpenAI-compatible endpoint.

The official `openai` client (`pip install '.[llm]'` in the a2a-handoff clone), imported when a
model is first built. No retries (`max_retries=0`: a model call is not idempotent, and a dead
endpoint must fail at once, not after minutes), a connect timeout, a timeout between two
chunks, and a deadline for the whole call: a model never holds a task forever. Whatever goes
wrong — refused, timed out, an HTTP error, an answer that is not a chat completion — is a
`ModelError` naming the endpoint.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from a2a_handoff.errors import ModelError

BASE_URL_ENV = "OPENAI_BASE_URL"
API_KEY_ENV = "OPENAI_API_KEY"
MODEL_ENV = "OPENAI_MODEL"
LOCAL_KEY = "unused"  # local servers (Ollama, vLLM, llama.cpp) take any key

OnToken = Callable[[str], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A tool the model asked for: its call id, name and arguments (JSON text, unparsed)."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True, slots=True)
class Turn:
    """What the model answered: its text, and the tools it called (empty: it is done)."""

    text: str
    tool_calls: tuple[ToolCall, ...] = ()

    def message(self) -> dict[str, Any]:
        """The assistant's message as it goes back into the chat."""
        message: dict[str, Any] = {"role": "assistant", "content": self.text or None}
        if self.tool_calls:
            message["tool_calls"] = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments},
                }
                for c in self.tool_calls
            ]
        return message


@dataclass(slots=True)
class Model:
    """A chat model at an OpenAI-compatible endpoint.

    `name`, `base_url` and `api_key` default to $OPENAI_MODEL, $OPENAI_BASE_URL and
    $OPENAI_API_KEY (a local endpoint needs no key). `timeout`: seconds the whole call may
    take; `read_timeout`: seconds between two chunks; `connect_timeout`: to connect.
    """

    name: str | None = None
    base_url: str | None = None
    api_key: str | None = None
    timeout: float = 120.0
    read_timeout: float = 60.0
    connect_timeout: float = 5.0
    temperature: float | None = None
    _client: Any = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self.name = self.name or os.environ.get(MODEL_ENV)
        self.base_url = self.base_url or os.environ.get(BASE_URL_ENV)
        self.api_key = self.api_key or os.environ.get(API_KEY_ENV)
        if not self.name:
            raise ModelError(f"no model named: pass model=… or set ${MODEL_ENV}")

    @property
    def where(self) -> str:
        return self.base_url or "the OpenAI API"

    def client(self) -> Any:
        if self._client is None:
            try:
                import openai
            except ImportError:  # pragma: no cover - the extra is installed in development
                raise ModelError(
                    "language-model agents need the openai package: pip install '.[llm]' in the"
                    " a2a-handoff clone"
                ) from None
            key = self.api_key or (LOCAL_KEY if self.base_url else None)
            if key is None:
                raise ModelError(f"no API key for {self.where}: set ${API_KEY_ENV}")
            self._client = openai.AsyncOpenAI(
                api_key=key,
                base_url=self.base_url,
                max_retries=0,
                timeout=openai.Timeout(
                    self.read_timeout, connect=self.connect_timeout, pool=self.connect_timeout
                ),
            )
        return self._client

    async def complete(
        self,
        messages: Sequence[dict[str, Any]],
        tools: Sequence[dict[str, Any]],
        on_token: OnToken,
    ) -> Turn:
        """One streamed completion: each piece of text goes to `on_token` as it comes."""
        try:
            async with asyncio.timeout(self.timeout):
                return await self._complete(messages, tools, on_token)
        except ModelError:
            raise
        except TimeoutError:
            raise ModelError(
                f"the model at {self.where} did not finish within {self.timeout:g} s"
            ) from None
        except Exception as exc:
            raise ModelError(f"the model at {self.where} failed: {_describe(exc)}") from None

    async def _complete(
        self,
        messages: Sequence[dict[str, Any]],
        tools: Sequence[dict[str, Any]],
        on_token: OnToken,
    ) -> Turn:
        options: dict[str, Any] = {}
        if tools:
            options["tools"] = list(tools)
        if self.temperature is not None:
            options["temperature"] = self.temperature
        stream = await self.client().chat.completions.create(
            model=self.name, messages=list(messages), stream=True, **options
        )
        text: list[str] = []
        calls: dict[int, dict[str, Any]] = {}
        chunks = 0
        async for chunk in stream:
            chunks += 1
            choices = getattr(chunk, "choices", None)
            if not isinstance(choices, list):
                raise ModelError(f"the model at {self.where} answered a chunk without choices")
            for choice in choices:
                delta = choice.delta
                if delta is None:
                    continue
                if isinstance(delta.content, str) and delta.content:
                    text.append(delta.content)
                    await on_token(delta.content)
                for piece in delta.tool_calls or []:
                    call = calls.setdefault(piece.index, {"id": "", "name": "", "arguments": ""})
                    call["id"] = piece.id or call["id"]
                    if piece.function is not None:
                        call["name"] += piece.function.name or ""
                        call["arguments"] += piece.function.arguments or ""
        if not chunks:
            raise ModelError(f"the model at {self.where} answered an empty stream")
        tool_calls = tuple(
            ToolCall(c["id"] or f"call_{i}", c["name"], c["arguments"] or "{}")
            for i, c in sorted(calls.items())
        )
        if any(not c.name for c in tool_calls):
            raise ModelError(f"the model at {self.where} called a tool without a name")
        return Turn("".join(text), tool_calls)

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None


def _describe(exc: Exception) -> str:
    """A short, safe description of what the client raised (no request bodies, no keys)."""
    status = getattr(exc, "status_code", None)
    if status is not None:
        return f"HTTP {status}"
    if isinstance(exc, json.JSONDecodeError | ValueError):
        return f"the answer is not a chat completion ({type(exc).__name__})"
    name = type(exc).__name__
    if name in ("APIConnectionError", "ConnectError"):
        return "connection refused or lost"
    if name == "APITimeoutError":
        return "timed out"
    return f"{name}: {str(exc)[:200]}"
