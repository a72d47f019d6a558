"""The client for every call from one agent to another (and for the orchestrator).

An `httpx.AsyncClient` is injected. Only idempotent calls are retried — reads, keyed handoff
creates, sends whose message id makes them deduplicated — on transport errors and on HTTP
429, 502, 503 and 504, with exponential backoff and jitter, capped in attempts and in total
time. Downstream JSON-RPC errors are raised as `RemoteError` carrying the target's code and
message: surfaced, never swallowed.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import httpx
from tenacity import (
    AsyncRetrying,
    retry_if_exception,
    stop_after_attempt,
    stop_after_delay,
    wait_exponential_jitter,
    wait_none,
)

from a2a_handoff.errors import HandoffError
from a2a_handoff.models import AgentCard

RETRYABLE_STATUS = frozenset({429, 502, 503, 504})
CARD_PATH = ".well-known/agent-card.json"


class RemoteError(HandoffError):
    """The target answered with a JSON-RPC error; `code` and `message` are the target's."""

    def __init__(self, code: int, message: str, data: Any = None, *, url: str = "") -> None:
        self.code = code
        self.message = message
        self.data = data
        self.url = url
        super().__init__(f"{url or 'agent'} answered {code}: {message}")


class UnavailableError(HandoffError, ConnectionError):
    """The target could not be reached, or answered with an HTTP error, after every retry."""


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    attempts: int = 5
    total_seconds: float = 10.0
    initial_wait: float = 0.05
    max_wait: float = 2.0
    wait: bool = True  # False: retry at once (tests)

    def retrying(self) -> AsyncRetrying:
        return AsyncRetrying(
            stop=stop_after_attempt(self.attempts) | stop_after_delay(self.total_seconds),
            wait=(
                wait_exponential_jitter(initial=self.initial_wait, max=self.max_wait)
                if self.wait
                else wait_none()
            ),
            retry=retry_if_exception(_retryable),
            reraise=True,
        )


class _RetryableStatus(HandoffError):
    def __init__(self, response: httpx.Response) -> None:
        self.status_code = response.status_code
        super().__init__(f"HTTP {response.status_code}")


def _retryable(exc: BaseException) -> bool:
    return isinstance(exc, httpx.TransportError | _RetryableStatus)


class AgentClient:
    """Calls other agents: JSON-RPC with retries for idempotent calls, cached cards."""

    def __init__(
        self,
        http: httpx.AsyncClient,
        *,
        credentials: Mapping[str, str] | None = None,
        retry: RetryPolicy | None = None,
        card_ttl: float = 60.0,
    ) -> None:
        self.http = http
        self.credentials = dict(credentials or {})
        self.retry = retry or RetryPolicy()
        self.card_ttl = card_ttl
        self._cards: dict[str, tuple[float, AgentCard]] = {}

    def _headers(self, url: str, extensions: Iterable[str]) -> dict[str, str]:
        headers = {"A2A-Version": "1.0"}
        uris = ",".join(extensions)
        if uris:
            headers["A2A-Extensions"] = uris
        key = self.credentials.get(url)
        if key:
            headers["X-API-Key"] = key
        return headers

    async def card(self, url: str, *, fresh: bool = False) -> AgentCard:
        """The agent card at `url`, cached for `card_ttl` seconds."""
        cached = self._cards.get(url)
        if cached and not fresh and time.monotonic() - cached[0] < self.card_ttl:
            return cached[1]
        async for attempt in self.retry.retrying():
            with attempt:
                response = await self.http.get(url.rstrip("/") + "/" + CARD_PATH)
                if response.status_code in RETRYABLE_STATUS:
                    raise _RetryableStatus(response)
        if response.status_code != 200:
            raise UnavailableError(f"{url}: agent card answered HTTP {response.status_code}")
        card = AgentCard.model_validate_json(response.content)
        self._cards[url] = (time.monotonic(), card)
        return card

    async def call(
        self,
        url: str,
        method: str,
        params: Mapping[str, Any],
        *,
        extensions: Iterable[str] = (),
        idempotent: bool = False,
    ) -> Any:
        """One JSON-RPC call; the result, or RemoteError / UnavailableError."""
        body = {"jsonrpc": "2.0", "id": str(uuid.uuid4()), "method": method, "params": params}
        headers = self._headers(url, extensions)
        try:
            if idempotent:
                async for attempt in self.retry.retrying():
                    with attempt:
                        response = await self._post(url, body, headers)
            else:
                response = await self._post(url, body, headers)
        except _RetryableStatus as exc:
            raise UnavailableError(f"{url}: HTTP {exc.status_code}") from exc
        except httpx.TransportError as exc:
            raise UnavailableError(f"{url}: {type(exc).__name__}: {exc}") from exc
        return _result(url, response)

    async def _post(
        self, url: str, body: dict[str, Any], headers: dict[str, str]
    ) -> httpx.Response:
        response = await self.http.post(url, json=body, headers=headers)
        if response.status_code in RETRYABLE_STATUS:
            raise _RetryableStatus(response)
        return response

    async def aclose(self) -> None:
        await self.http.aclose()


def _result(url: str, response: httpx.Response) -> Any:
    try:
        payload = response.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise UnavailableError(f"{url}: HTTP {response.status_code}, not JSON") from None
    if not isinstance(payload, dict):
        raise UnavailableError(f"{url}: answered a non-object")
    error = payload.get("error")
    if isinstance(error, dict):
        raise RemoteError(
            int(error.get("code", -32603)),
            str(error.get("message", "")),
            error.get("data"),
            url=url,
        )
    if response.status_code != 200 or "result" not in payload:
        raise UnavailableError(f"{url}: HTTP {response.status_code} without a result")
    return payload["result"]
