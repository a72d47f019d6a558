"""The client for every call from one agent to another, and for the orchestrator.

An `httpx.AsyncClient` is injected (tests pass an ASGI or mock transport). Only idempotent
calls are retried — reads, keyed handoff creates, sends whose message id makes them
deduplicated — on transport errors and on HTTP 429, 502, 503 and 504, with exponential
backoff and jitter, capped in attempts and in total time. Every attempt goes through the
circuit breaker of its endpoint; an open breaker fails fast with CircuitOpenError and is
never retried. A JSON-RPC error from the target is raised as RemoteError with the target's
code and message: surfaced, never swallowed.

Replicas: an agent's address may list several URLs, comma-separated
(`http://a:8101/,http://b:8101/`). A call goes to the replica that answered last and moves to
the next one when a replica is down — its breaker open, or the connection refused, so the
request never reached it — or, for idempotent calls and streams not yet started, on any
transport failure: the message id or idempotency key makes the repeat return the same task,
so failing over never duplicates work.
"""

from __future__ import annotations

import functools
import itertools
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import urlsplit

import httpx
from tenacity import (
    AsyncRetrying,
    retry_if_exception,
    stop_after_attempt,
    stop_after_delay,
    wait_exponential_jitter,
    wait_none,
)

from a2a_handoff.breaker import CircuitBreaker, CircuitOpenError
from a2a_handoff.errors import HandoffError
from a2a_handoff.models import AgentCard, Message, StreamResponse, Task
from a2a_handoff.transport import Http11Transport

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


class _RetryableStatus(HandoffError):
    def __init__(self, status_code: int) -> None:
        self.status_code = status_code
        super().__init__(f"HTTP {status_code}")


def is_transient(exc: BaseException) -> bool:
    """Worth retrying (and a failure for the breaker): the endpoint did not answer well."""
    return isinstance(exc, httpx.TransportError | _RetryableStatus)


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    attempts: int = 5
    total_seconds: float = 10.0
    initial_wait: float = 0.05
    max_wait: float = 2.0
    wait: bool = True  # False: retry at once, for tests

    def retrying(self, spent: float = 0.0) -> AsyncRetrying:
        """Tenacity's loop for one call; `spent`: seconds the call has taken already."""
        return AsyncRetrying(
            stop=stop_after_attempt(self.attempts)
            | stop_after_delay(max(0.0, self.total_seconds - spent)),
            wait=(
                wait_exponential_jitter(
                    initial=self.initial_wait, max=self.max_wait, jitter=self.initial_wait
                )
                if self.wait
                else wait_none()
            ),
            retry=retry_if_exception(is_transient),
            reraise=True,
        )


Event = tuple[int | None, StreamResponse]
"""A stream item and its event sequence number (None when the server sent no id)."""


T = TypeVar("T")


def replicas(address: str) -> list[str]:
    """The URLs an agent address names: one, or several comma-separated replicas."""
    return list(_replicas(address))


@functools.lru_cache(maxsize=1024)
def _replicas(address: str) -> tuple[str, ...]:
    urls = tuple(url.strip() for url in address.split(",") if url.strip())
    return urls or (address,)


def never_arrived(exc: BaseException) -> bool:
    """The request cannot have reached the replica: safe to send elsewhere, whatever it is."""
    if isinstance(exc, CircuitOpenError):
        return True
    return isinstance(exc.__cause__, httpx.ConnectError)


@functools.lru_cache(maxsize=1024)
def endpoint_of(url: str) -> str:
    """The breaker key of a URL: scheme, host and port."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


Answer = tuple[int, bytes]
"""An HTTP answer: its status and its whole body."""


def _result(url: str, answer: Answer) -> Any:
    status, content = answer
    try:
        payload = json.loads(content)
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise UnavailableError(f"{url}: HTTP {status}, not JSON") from None
    if not isinstance(payload, dict):
        raise UnavailableError(f"{url}: answered a non-object")
    error = payload.get("error")
    if isinstance(error, dict):
        raise RemoteError(
            int(error.get("code", -32603)), str(error.get("message", "")), error.get("data"),
            url=url,
        )  # fmt: skip
    if status != 200 or "result" not in payload:
        raise UnavailableError(f"{url}: HTTP {status} without a result")
    return payload["result"]


class AgentClient:
    """Calls agents: JSON-RPC and SSE, retries for idempotent calls, breakers, cached cards.

    `direct`: JSON-RPC calls to plain-http URLs go straight to this transport, past httpx's
    client layer (with `http`'s timeouts); cards and streams still go through `http`.
    """

    def __init__(
        self,
        http: httpx.AsyncClient,
        *,
        direct: Http11Transport | None = None,
        credentials: Mapping[str, str] | None = None,
        retry: RetryPolicy | None = None,
        card_ttl: float = 60.0,
        breaker_threshold: int = 5,
        breaker_cooldown: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
        extensions: Iterable[str] = (),
        api_key: str | None = None,
    ) -> None:
        self.http = http
        self.direct = direct
        self.api_key = api_key
        self.credentials: dict[str, str] = {}
        for address, key in (credentials or {}).items():
            for url in replicas(address):
                self.credentials[url] = key
        self.retry = retry or RetryPolicy()
        self.card_ttl = card_ttl
        self.extensions = tuple(extensions)
        self._breaker_args = (breaker_threshold, breaker_cooldown, clock)
        self._breakers: dict[str, CircuitBreaker] = {}
        self._cards: dict[str, tuple[float, AgentCard]] = {}
        self._preferred: dict[str, str] = {}  # address → the replica that answered last
        self._ids = itertools.count(1)  # JSON-RPC request ids

    # -- plumbing -------------------------------------------------------------------------

    def breaker(self, url: str) -> CircuitBreaker:
        key = endpoint_of(url)
        breaker = self._breakers.get(key)
        if breaker is None:
            threshold, cooldown, clock = self._breaker_args
            breaker = CircuitBreaker(
                key, threshold=threshold, cooldown=cooldown, is_failure=is_transient, clock=clock
            )
            self._breakers[key] = breaker
        return breaker

    def breakers(self) -> dict[str, dict[str, object]]:
        """Every endpoint's breaker state (for /health)."""
        return {key: b.snapshot() for key, b in sorted(self._breakers.items())}

    def _headers(self, url: str, extensions: Iterable[str] = ()) -> dict[str, str]:
        headers = {"A2A-Version": "1.0"}
        uris = ",".join(dict.fromkeys([*self.extensions, *extensions]))
        if uris:
            headers["A2A-Extensions"] = uris
        key = self.credentials.get(url) or self.credentials.get(endpoint_of(url)) or self.api_key
        if key:
            headers["X-API-Key"] = key
        return headers

    async def _attempt(self, url: str, send: Callable[[], Awaitable[Answer]]) -> Answer:
        async with self.breaker(url).guard():
            answer = await send()
            if answer[0] in RETRYABLE_STATUS:
                raise _RetryableStatus(answer[0])
            return answer

    async def _request(
        self, url: str, send: Callable[[], Awaitable[Answer]], *, idempotent: bool
    ) -> Answer:
        started = time.monotonic()
        try:
            try:
                return await self._attempt(url, send)
            except Exception as exc:
                if not idempotent or not is_transient(exc):
                    raise
                first: BaseException | None = exc
            # Retries: tenacity's first attempt is the one that just failed (so its counts,
            # waits and time budget are the policy's), without its bookkeeping on calls that
            # succeed at once.
            async for attempt in self.retry.retrying(spent=time.monotonic() - started):
                with attempt:
                    if first is not None:
                        failed, first = first, None
                        raise failed
                    return await self._attempt(url, send)
        except _RetryableStatus as exc:
            raise UnavailableError(f"{url}: HTTP {exc.status_code}") from exc
        except httpx.TransportError as exc:
            raise UnavailableError(f"{url}: {type(exc).__name__}: {exc}") from exc
        raise AssertionError("unreachable: tenacity re-raises the last error")

    def _post(self, url: str, body: bytes, headers: dict[str, str]) -> Awaitable[Answer]:
        # Direct: plain http without credentials in the URL (httpx turns those into Basic auth).
        if self.direct is not None and url.startswith("http://") and "@" not in url:
            return self.direct.post(url, body, headers, self.http.timeout)
        return self._post_httpx(url, body, headers)

    async def _post_httpx(self, url: str, body: bytes, headers: dict[str, str]) -> Answer:
        headers = {**headers, "Content-Type": "application/json"}
        response = await self.http.post(url, content=body, headers=headers)
        return response.status_code, response.content

    def _order(self, address: str) -> list[str]:
        urls = replicas(address)
        preferred = self._preferred.get(address)
        if preferred in urls:
            at = urls.index(preferred)
            urls = urls[at:] + urls[:at]
        return urls

    async def _failover(
        self, address: str, attempt: Callable[[str], Awaitable[T]], *, idempotent: bool
    ) -> T:
        """`attempt(url)` on each replica in turn, while a failure allows trying the next."""
        urls = self._order(address)
        for i, url in enumerate(urls):
            try:
                result = await attempt(url)
            except (UnavailableError, CircuitOpenError) as exc:
                last = i == len(urls) - 1
                if last or not (idempotent or never_arrived(exc)):
                    raise
                continue
            if len(urls) > 1:
                self._preferred[address] = url
            return result
        raise AssertionError("unreachable: the last replica's error is raised")

    # -- cards and calls ------------------------------------------------------------------

    async def card(self, url: str, *, fresh: bool = False, retry: bool = True) -> AgentCard:
        """The agent card at `url`, cached for `card_ttl` seconds; `retry=False`: one try."""
        return await self._failover(url, lambda one: self._card(one, fresh, retry), idempotent=True)

    async def _card(self, url: str, fresh: bool, retry: bool) -> AgentCard:
        clock = self._breaker_args[2]
        cached = self._cards.get(url)
        if cached and not fresh and clock() - cached[0] < self.card_ttl:
            return cached[1]
        card_url = url.rstrip("/") + "/" + CARD_PATH
        headers = self._headers(url)

        async def get() -> Answer:
            response = await self.http.get(card_url, headers=headers)
            return response.status_code, response.content

        status, content = await self._request(url, get, idempotent=retry)
        if status != 200:
            raise UnavailableError(f"{url}: agent card answered HTTP {status}")
        card = AgentCard.model_validate_json(content)
        self._cards[url] = (clock(), card)
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
        """One JSON-RPC call: its result, or RemoteError / UnavailableError / CircuitOpenError."""
        encoded = json.dumps(params, separators=(",", ":"), allow_nan=False)
        return await self.call_json(
            url, method, encoded, extensions=extensions, idempotent=idempotent
        )

    async def call_json(
        self,
        url: str,
        method: str,
        params_json: str,
        *,
        extensions: Iterable[str] = (),
        idempotent: bool = False,
    ) -> Any:
        """`call()` with the params already encoded as a JSON object."""
        body = (
            f'{{"jsonrpc":"2.0","id":{next(self._ids)},"method":{json.dumps(method)},'
            f'"params":{params_json}}}'
        ).encode()

        async def attempt(one: str) -> Any:
            headers = self._headers(one, extensions)
            answer = await self._request(
                one, lambda: self._post(one, body, headers), idempotent=idempotent
            )
            return _result(one, answer)

        return await self._failover(url, attempt, idempotent=idempotent)

    async def send(
        self, url: str, message: Message, *, return_immediately: bool = False
    ) -> Task | Message:
        """SendMessage; retried, since the message id makes a repeat return the same task."""
        params: dict[str, Any] = {"message": message.dump()}
        if return_immediately:
            params["configuration"] = {"returnImmediately": True}
        result = await self.call(url, "SendMessage", params, idempotent=True)
        if "task" in result:
            return Task.model_validate(result["task"])
        return Message.model_validate(result["message"])

    async def get_task(self, url: str, task_id: str, history_length: int | None = None) -> Task:
        params: dict[str, Any] = {"id": task_id}
        if history_length is not None:
            params["historyLength"] = history_length
        return Task.model_validate(await self.call(url, "GetTask", params, idempotent=True))

    async def list_tasks(self, url: str, **query: Any) -> dict[str, Any]:
        result: dict[str, Any] = await self.call(url, "ListTasks", query, idempotent=True)
        return result

    async def cancel(self, url: str, task_id: str) -> Task:
        return Task.model_validate(await self.call(url, "CancelTask", {"id": task_id}))

    # -- streams --------------------------------------------------------------------------

    def stream(
        self, url: str, message: Message
    ) -> AsyncIterator[tuple[int | None, StreamResponse]]:
        """SendStreamingMessage: (event seq, item) pairs until the task ends or pauses."""
        return self._sse(url, "SendStreamingMessage", {"message": message.dump()}, None)

    async def subscribe(
        self, url: str, task_id: str, *, last_event_id: int | None = None, resumes: int = 5
    ) -> AsyncIterator[Event]:
        """SubscribeToTask, resuming with Last-Event-ID after a dropped stream (`resumes` times)."""
        last = last_event_id
        for attempt in range(resumes + 1):
            try:
                async for seq, item in self._sse(url, "SubscribeToTask", {"id": task_id}, last):
                    if seq is not None:
                        last = seq
                    yield seq, item
                return
            except (UnavailableError, httpx.TransportError):
                if attempt == resumes or last is None:
                    raise

    async def _sse(
        self, address: str, method: str, params: dict[str, Any], last_event_id: int | None
    ) -> AsyncIterator[Event]:
        """A stream from the first replica that opens one (streams carry a message id or a
        task id: opening one elsewhere never duplicates work). Once events flowed, a failure
        is raised: the caller resumes with Last-Event-ID."""
        urls = self._order(address)
        for i, url in enumerate(urls):
            started = False
            try:
                async for event in self._sse_one(url, method, params, last_event_id):
                    if not started and len(urls) > 1:
                        self._preferred[address] = url
                    started = True
                    yield event
                return
            except (UnavailableError, CircuitOpenError):
                if started or i == len(urls) - 1:
                    raise

    async def _sse_one(
        self, url: str, method: str, params: dict[str, Any], last_event_id: int | None
    ) -> AsyncIterator[Event]:
        body = {"jsonrpc": "2.0", "id": next(self._ids), "method": method, "params": params}
        headers = {**self._headers(url), "Accept": "text/event-stream"}
        if last_event_id is not None:
            headers["Last-Event-ID"] = str(last_event_id)
        try:
            async with self.breaker(url).guard():
                request = self.http.build_request("POST", url, json=body, headers=headers)
                response = await self.http.send(request, stream=True)
                if response.status_code in RETRYABLE_STATUS:
                    await response.aclose()
                    raise _RetryableStatus(response.status_code)
            try:
                if not response.headers.get("content-type", "").startswith("text/event-stream"):
                    content = await response.aread()
                    _result(url, (response.status_code, content))  # raises its JSON-RPC error
                    raise UnavailableError(f"{url}: {method} did not answer with a stream")
                async for seq, data in _events(response):
                    payload = json.loads(data)
                    if "error" in payload:
                        error = payload["error"]
                        raise RemoteError(error.get("code", -32603), error.get("message", ""),
                                          url=url)  # fmt: skip
                    yield seq, StreamResponse.model_validate(payload["result"])
            finally:
                await response.aclose()
        except _RetryableStatus as exc:
            raise UnavailableError(f"{url}: HTTP {exc.status_code}") from exc
        except httpx.TransportError as exc:
            raise UnavailableError(f"{url}: {type(exc).__name__}: {exc}") from exc

    async def aclose(self) -> None:
        await self.http.aclose()


async def _events(response: httpx.Response) -> AsyncIterator[tuple[int | None, str]]:
    """(id, data) of each SSE event; comments and pings are skipped."""
    data: list[str] = []
    event_id: int | None = None
    async for line in response.aiter_lines():
        if not line:
            if data:
                yield event_id, "\n".join(data)
            data, event_id = [], None
        elif line.startswith("data:"):
            data.append(line[5:].lstrip(" "))
        elif line.startswith("id:"):
            raw = line[3:].strip()
            event_id = int(raw) if raw.isdigit() else None
    if data:
        yield event_id, "\n".join(data)


__all__ = [
    "AgentClient",
    "CircuitOpenError",
    "RemoteError",
    "RetryPolicy",
    "UnavailableError",
    "endpoint_of",
    "is_transient",
    "replicas",
]
