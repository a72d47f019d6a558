"""The client for every call from one agent to another, and for the orchestrator.

An `httpx.AsyncClient` is injected (tests pass an ASGI or mock transport). Idempotent calls
are retried (see `retry`), every attempt goes through the circuit breaker of its endpoint,
and an address naming several replicas fails over between them (see `replicas`). A JSON-RPC
error from the target is raised as RemoteError with the target's code and message:
surfaced, never swallowed.

Calls go over JSON-RPC, to the agent's address, unless the agent's card — once this client
has read it (a handoff, a delegation and a notice read the target's card before they send)
— offers gRPC and not JSON-RPC: then they go to the card's gRPC address through
`grpc_transport` (the `grpc` extra, imported then), answered as JSON-RPC answers, so the
retries, breakers and replicas are the same. JSON-RPC stays preferred where both are offered.
When the card's interface the calls go to names a `tenant`, every call and stream to that
agent carries it (the `tenant` param, the gRPC request's `tenant`), unless the call names
one itself: an agent whose card says "acme" receives in "acme" what this client sends it.
"""

from __future__ import annotations

import base64
import itertools
import json
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import httpx
from pydantic_core import from_json

from a2a_handoff.client.breaker import CircuitBreaker
from a2a_handoff.client.oauth import TokenSource
from a2a_handoff.client.reasons import unreachable
from a2a_handoff.client.replicas import endpoint_of, failover, ordered, replicas
from a2a_handoff.client.retry import (
    RETRYABLE_STATUS,
    Answer,
    RetryableStatus,
    RetryPolicy,
    is_transient,
    request,
)
from a2a_handoff.client.transport import Http11Transport
from a2a_handoff.errors import (
    AuthenticationError,
    CircuitOpenError,
    RemoteError,
    SignatureError,
    TrustError,
    UnavailableError,
)
from a2a_handoff.observe import tracing
from a2a_handoff.protocol.agent_card import AgentCard
from a2a_handoff.protocol.models import Message, StreamResponse, Task
from a2a_handoff.protocol.sse import read_events
from a2a_handoff.trust.card_signature import verify_card
from a2a_handoff.trust.trustlist import TrustList

if TYPE_CHECKING:  # imported when a card offers gRPC alone: grpcio is an extra
    from a2a_handoff.client.grpc_transport import Endpoint, GrpcTransport

CARD_PATH = ".well-known/agent-card.json"
GrpcTls = tuple[bytes | None, bytes | None, bytes | None]
"""A gRPC channel's TLS, as PEM: root CAs, private key, certificate chain (None: gRPC's
default roots; no client certificate)."""
GRPC_EXTRA = "pip install '.[grpc]' in the a2a-handoff clone"

Event = tuple[int | None, StreamResponse]
"""A stream item and its event sequence number (None when the server sent no id)."""


def _json(content: bytes) -> Any:
    """`json.loads(content)`, parsed in Rust (pydantic-core's parser: half the instructions
    of the standard library's on a task). What it refuses — a lone surrogate escaped, a
    byte order mark, UTF-16, nesting past 200 levels, bad JSON — goes to `json.loads`, so
    the outcome is the standard library's either way."""
    try:
        return from_json(content)
    except ValueError:
        return json.loads(content)


def _result(url: str, answer: Answer) -> Any:
    status, content = answer
    try:
        payload = _json(content)
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise UnavailableError(f"{url}: HTTP {status}, not JSON") from None
    if not isinstance(payload, dict):
        raise UnavailableError(f"{url}: answered a non-object")
    error = payload.get("error")
    if isinstance(error, dict):  # a code that is not an integer: the target failed (-32603)
        code = error.get("code")
        raise RemoteError(
            code if isinstance(code, int) else -32603,
            str(error.get("message", "")),
            error.get("data"),
            url=url,
        )
    if status != 200 or "result" not in payload:
        raise UnavailableError(f"{url}: HTTP {status} without a result")
    return payload["result"]


def tenant_of_card(card: AgentCard) -> str:
    """The tenant the card's interface calls go to names ("": none): its JSON-RPC one's,
    or, when it offers gRPC alone, its gRPC one's (as `grpc_address` chooses)."""
    bindings = [i.protocol_binding.upper() for i in card.supported_interfaces]
    for binding in ("JSONRPC", "GRPC"):
        if binding in bindings:
            return card.supported_interfaces[bindings.index(binding)].tenant or ""
    return ""


def with_tenant(params_json: str, tenant: str) -> str:
    """The JSON object `params_json` with `"tenant": tenant` first (a caller's params never
    name one here: `AgentClient.call_json`)."""
    rest = params_json.lstrip()[1:].lstrip()
    named = f'{{"tenant":{json.dumps(tenant)}'
    return f"{named}}}" if rest.startswith("}") else f"{named},{rest}"


def grpc_address(card: AgentCard) -> str | None:
    """The URL of the card's gRPC interface when it offers no JSON-RPC one (else None:
    JSON-RPC, preferred). Dialed only when it is a `host:port` (`dialable`)."""
    bindings = [i.protocol_binding.upper() for i in card.supported_interfaces]
    if "JSONRPC" in bindings or "GRPC" not in bindings:
        return None
    return card.supported_interfaces[bindings.index("GRPC")].url


_HOST_PORT = re.compile(r"(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+):([0-9]{1,5})")


def dialable(address: str) -> bool:
    """Whether a card's gRPC address is a bare `host:port` — not one of gRPC's other target
    forms (`unix:…`, `dns:///…`, `ipv4:…`), which would have a card choose a local socket or
    a resolver for this agent to dial."""
    found = _HOST_PORT.fullmatch(address)
    return found is not None and 0 < int(found.group(1)) < 65536


def _kid_of(signature: Any) -> str | None:
    """The kid a card signature's protected header names (unverified: to pick keys)."""
    try:
        padded = str(signature["protected"]) + "=="
        header = json.loads(base64.urlsafe_b64decode(padded))
        kid = header.get("kid")
    except (KeyError, TypeError, ValueError, AttributeError):
        return None
    return kid if isinstance(kid, str) else None


class AgentClient:
    """Calls agents: JSON-RPC and SSE, retries for idempotent calls, breakers, cached cards.

    `direct`: JSON-RPC calls to plain-http URLs go straight to this transport, past httpx's
    client layer (with `http`'s timeouts); cards and streams still go through `http`.
    `credentials` maps agent URLs (or origins, `scheme://host:port`) to the key presented to
    them (`X-API-Key`) or to a `TokenSource` (`oauth.OAuth2Tokens`: its bearer token, replaced
    once when a target answers 401), and to nothing else: a credential never reaches an
    origin it was not given for (there is none for every URL — following a transfer pointer
    would hand it to whoever the pointer names); over gRPC, only to a gRPC address on the
    same host. `trust`: the card of an agent on this trust list whose keys are known must
    carry a signature by one of them. `grpc`: the transport for agents whose card offers
    gRPC alone (made when first needed, with `grpc_tls`: the PEM root CAs, private key and
    certificate chain its TLS channels trust and present, each None for gRPC's default: its
    roots, no client certificate). `read_cards`: each agent's card is read before the first
    call to it (`addressed`), so that every call goes where its card says — the tenant it
    names, gRPC when it offers gRPC alone — even one that comes before anything else read it
    (after a restart, to an agent a handoff reached earlier); an agent's own client does.
    """

    def __init__(
        self,
        http: httpx.AsyncClient,
        *,
        direct: Http11Transport | None = None,
        credentials: Mapping[str, str | TokenSource] | None = None,
        retry: RetryPolicy | None = None,
        card_ttl: float = 60.0,
        breaker_threshold: int = 5,
        breaker_cooldown: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
        extensions: Iterable[str] = (),
        trust: TrustList | None = None,
        grpc: GrpcTransport | None = None,
        grpc_tls: GrpcTls | None = None,
        read_cards: bool = False,
    ) -> None:
        self.http = http
        self.read_cards = read_cards
        self.grpc = grpc
        self.grpc_tls = grpc_tls
        self.trust = trust
        self.direct = direct
        self.credentials: dict[str, str] = {}
        self.tokens: dict[str, TokenSource] = {}
        for address, key in (credentials or {}).items():
            for url in replicas(address):
                if isinstance(key, str):
                    self.credentials[url] = key
                else:
                    self.tokens[url] = key
        self.retry = retry or RetryPolicy()
        self.card_ttl = card_ttl
        self.extensions = tuple(extensions)
        self._breaker_args = (breaker_threshold, breaker_cooldown, clock)
        self._breakers: dict[str, CircuitBreaker] = {}
        self._cards: dict[str, tuple[float, AgentCard]] = {}
        self._preferred: dict[str, str] = {}  # address → the replica that answered last
        self._ids = itertools.count(1)  # JSON-RPC request ids
        self._grpc_only: dict[str, str] = {}  # agent URL → the gRPC address its card offers
        self._tenants: dict[str, str] = {}  # agent URL → the tenant its card's interface names

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
        key = self.credentials.get(url) or self.credentials.get(endpoint_of(url))
        if key:
            headers["X-API-Key"] = key
        tracing.outgoing(headers)  # the current trace goes on every call to an agent
        return headers

    def _token_source(self, url: str) -> TokenSource | None:
        return self.tokens.get(url) or self.tokens.get(endpoint_of(url))

    async def _authorized(
        self,
        url: str,
        source: TokenSource,
        headers: dict[str, str],
        send: Callable[[dict[str, str]], Awaitable[Answer]],
    ) -> Answer:
        """`send(headers)` with the source's bearer token; a 401 replaces the token once."""
        token = await source.token()
        answer = await send({**headers, "Authorization": f"Bearer {token}"})
        if answer[0] != 401:
            return answer
        token = await source.refresh(token)
        answer = await send({**headers, "Authorization": f"Bearer {token}"})
        if answer[0] == 401:
            raise RemoteError(
                AuthenticationError.code,
                "refused a fresh OAuth2 token as well: does it trust the token's issuer,"
                " and is the token's audience this agent?",
                url=url,
            )
        return answer

    def _post(self, url: str, body: bytes, headers: dict[str, str]) -> Awaitable[Answer]:
        # Direct: plain http without credentials in the URL (httpx turns those into Basic auth).
        if self.direct is not None and url.startswith("http://") and "@" not in url:
            return self.direct.post(url, body, headers, self.http.timeout)
        return self._post_httpx(url, body, headers)

    def _grpc_endpoint(self, url: str) -> Endpoint | None:
        """Where calls to `url` go over gRPC (its card offers gRPC alone), or None."""
        target = self._grpc_only.get(url)
        if target is None:
            return None
        if not dialable(target):
            raise UnavailableError(
                f"{url} offers gRPC alone, at {target!r}: not a host:port, so not dialed"
            )
        if self.grpc is None:
            try:
                from a2a_handoff.client.grpc_transport import GrpcTransport
            except ImportError:
                raise UnavailableError(
                    f"{url} offers gRPC alone (at {target}), and this agent has no gRPC"
                    f" client: {GRPC_EXTRA}"
                ) from None
            self.grpc = GrpcTransport(tls=self.grpc_tls)
        from a2a_handoff.client.grpc_transport import Endpoint

        return Endpoint(target, secure=url.startswith("https://"))

    def _grpc_token_source(self, url: str, endpoint: Endpoint) -> TokenSource | None:
        """The token source for `url` when its gRPC address is on the same host (as a key)."""
        if not self.tokens or not _same_host(url, endpoint):
            return None
        return self._token_source(url)

    def _grpc_metadata(
        self, url: str, endpoint: Endpoint, extensions: Iterable[str] = ()
    ) -> list[tuple[str, str]]:
        """The headers of a call to `url` as gRPC metadata (lower-case keys); its key only
        to a gRPC address on the host it was given for."""
        headers = self._headers(url, extensions)
        if not _same_host(url, endpoint):
            headers.pop("X-API-Key", None)
        return [(name.lower(), value) for name, value in headers.items()]

    async def _post_httpx(self, url: str, body: bytes, headers: dict[str, str]) -> Answer:
        headers = {**headers, "Content-Type": "application/json"}
        response = await self.http.post(url, content=body, headers=headers)
        return response.status_code, response.content

    # -- cards and calls ------------------------------------------------------------------

    async def card(self, url: str, *, fresh: bool = False, retry: bool = True) -> AgentCard:
        """The agent card at `url`, cached for `card_ttl` seconds; `retry=False`: one try."""
        if not fresh and replicas(url) == [url]:  # one replica: its cached card, if fresh
            cached = self._cards.get(url)
            if cached and self._breaker_args[2]() - cached[0] < self.card_ttl:
                return cached[1]
        card = await failover(
            url, self._preferred, lambda one: self._card(one, fresh, retry), idempotent=True
        )
        if replicas(url) != [url]:  # the address's tenant too: for a replica not read yet
            self._tenants[url] = tenant_of_card(card)
        return card

    async def addressed(self, url: str) -> None:
        """Read the agent's card unless this client read it already, so that calls to it
        go where it says (the tenant it names, gRPC when it offers gRPC alone); made before
        every call by a client that `read_cards`."""
        if not any(one in self._cards for one in replicas(url)):
            await self.card(url)

    async def _card(self, url: str, fresh: bool, retry: bool) -> AgentCard:
        clock = self._breaker_args[2]
        cached = self._cards.get(url)
        if cached and not fresh and clock() - cached[0] < self.card_ttl:
            return cached[1]
        card_url = url.rstrip("/") + "/" + CARD_PATH
        headers = self._headers(url)

        def get(headers: dict[str, str]) -> Awaitable[Answer]:
            async def one() -> Answer:
                response = await self.http.get(card_url, headers=headers)
                return response.status_code, response.content

            return request(self.breaker(url), self.retry, url, one, idempotent=retry)

        source = self._token_source(url) if self.tokens else None
        if source is None:
            status, content = await get(headers)
        else:
            status, content = await self._authorized(url, source, headers, get)
        if status != 200:
            raise UnavailableError(f"{url}: agent card answered HTTP {status}")
        card = AgentCard.model_validate_json(content)
        await _check_signature(self.trust, url, content)
        self._cards[url] = (clock(), card)
        tenant = tenant_of_card(card)
        if tenant:
            self._tenants[url] = tenant
        else:
            self._tenants.pop(url, None)
        grpc_only = grpc_address(card)
        if grpc_only is None:
            self._grpc_only.pop(url, None)
        else:
            self._grpc_only[url] = grpc_only
        return card

    async def jwks(self, address: str, path: str) -> Any:
        """The JSON document at `path` of a configured agent address (its JWKS)."""

        async def get_one(one: str) -> Any:
            target = one.rstrip("/") + "/" + path if path else one

            async def get() -> Answer:
                response = await self.http.get(target, headers={"A2A-Version": "1.0"})
                return response.status_code, response.content

            status, content = await request(
                self.breaker(one), self.retry, one, get, idempotent=True
            )
            if status != 200:
                raise UnavailableError(f"{target}: answered HTTP {status}")
            return json.loads(content)

        return await failover(address, self._preferred, get_one, idempotent=True)

    async def call(
        self,
        url: str,
        method: str,
        params: Mapping[str, Any],
        *,
        extensions: Iterable[str] = (),
        idempotent: bool = False,
    ) -> Any:
        """One JSON-RPC call: its result, or RemoteError / UnavailableError / CircuitOpenError.
        In the tenant the agent's card names, unless `params` name a `tenant` themselves."""
        encoded = json.dumps(params, separators=(",", ":"), allow_nan=False)
        return await self.call_json(
            url,
            method,
            encoded,
            extensions=extensions,
            idempotent=idempotent,
            card_tenant="tenant" not in params,
        )

    async def call_json(
        self,
        url: str,
        method: str,
        params_json: str,
        *,
        extensions: Iterable[str] = (),
        idempotent: bool = False,
        read: Callable[[str, Answer], Any] = _result,
        card_tenant: bool = True,
    ) -> Any:
        """`call()` with the params already encoded as a JSON object; `read(url, answer)`
        makes the result of the answer (the JSON-RPC result, by default). The call names
        the tenant the agent's card names (`card_tenant=False`: the params name their own,
        or none)."""
        if self.read_cards:
            await self.addressed(url)
        head = f'{{"jsonrpc":"2.0","id":{next(self._ids)},"method":{json.dumps(method)},"params":'
        untenanted = f"{head}{params_json}}}".encode()

        async def attempt(one: str) -> Any:
            tenant = None
            if card_tenant and self._tenants:
                tenant = self._tenants.get(one, self._tenants.get(url))
            if tenant:
                params = with_tenant(params_json, tenant)
                body = f"{head}{params}}}".encode()
            else:
                params, body = params_json, untenanted
            endpoint = self._grpc_endpoint(one) if self._grpc_only else None
            if endpoint is None:
                headers = self._headers(one, extensions)
                source = self._token_source(one) if self.tokens else None
                if source is None:  # the usual call: as lean as it can be
                    answer = await request(
                        self.breaker(one),
                        self.retry,
                        one,
                        lambda: self._post(one, body, headers),
                        idempotent=idempotent,
                    )
                    return read(one, answer)

                def post(headers: dict[str, str]) -> Awaitable[Answer]:
                    return self._post(one, body, headers)

                send = post
            else:
                assert self.grpc is not None
                headers = dict(self._grpc_metadata(one, endpoint, extensions))
                source = self._grpc_token_source(one, endpoint)
                call = self.grpc.call
                timeout = self.http.timeout

                def grpc_call(headers: dict[str, str]) -> Awaitable[Answer]:
                    metadata = [(name.lower(), value) for name, value in headers.items()]
                    return call(endpoint, method, params, metadata, timeout)

                send = grpc_call

            def attempts(headers: dict[str, str]) -> Awaitable[Answer]:
                return request(
                    self.breaker(one),
                    self.retry,
                    one,
                    lambda: send(headers),
                    idempotent=idempotent,
                )

            if source is None:
                return read(one, await attempts(headers))
            return read(one, await self._authorized(one, source, headers, attempts))

        return await failover(url, self._preferred, attempt, idempotent=idempotent)

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
        if self.read_cards:
            await self.addressed(address)
        urls = ordered(address, self._preferred)
        for i, url in enumerate(urls):
            started = False
            tenant = self._tenants.get(url, self._tenants.get(address))
            named = {"tenant": tenant, **params} if tenant and "tenant" not in params else params
            try:
                endpoint = self._grpc_endpoint(url) if self._grpc_only else None
                if endpoint is not None:
                    events = _grpc_stream(self, url, endpoint, method, named, last_event_id)
                else:
                    events = _sse_one(self, url, method, named, last_event_id)
                async for event in events:
                    if not started and len(urls) > 1:
                        self._preferred[address] = url
                    started = True
                    yield event
                return
            except (UnavailableError, CircuitOpenError):
                if started or i == len(urls) - 1:
                    raise

    async def aclose(self) -> None:
        """Close the HTTP client and the token sources given."""
        for source in {id(s): s for s in self.tokens.values()}.values():
            await source.aclose()
        await self.http.aclose()
        if self.grpc is not None:
            await self.grpc.aclose()


def _same_host(url: str, endpoint: Endpoint) -> bool:
    """Whether a card's gRPC address is on the host of the agent URL it was read from."""
    return urlsplit("//" + endpoint.target).hostname == urlsplit(url).hostname


async def _check_signature(trust: TrustList | None, url: str, content: bytes) -> None:
    """A trusted agent's card must be signed by one of its keys, when they are known."""
    agent = trust.by_url(url) if trust is not None else None
    if agent is None or trust is None:
        return
    keys = trust.cached_keys(agent.name)
    if not keys:
        return  # no key for it yet: fetched (and pinned) with its first handoff
    raw = json.loads(content)
    try:
        verify_card(raw, keys)
    except SignatureError as exc:
        try:  # it may have rotated since its keys were pinned
            kids = [_kid_of(s) for s in raw.get("signatures") or []]
            unknown = next((k for k in kids if k and k not in keys), None)
            if unknown is None:
                raise
            verify_card(raw, await trust.keys(agent.name, unknown_kid=unknown))
        except (SignatureError, TrustError):
            raise UnavailableError(
                f"{url}: the agent card of {agent.name} is not signed by its keys: {exc}"
            ) from None


async def _sse_one(
    client: AgentClient,
    url: str,
    method: str,
    params: dict[str, Any],
    last_event_id: int | None,
) -> AsyncIterator[Event]:
    """One stream from one replica: its events, or the reason it gave none."""
    body = {"jsonrpc": "2.0", "id": next(client._ids), "method": method, "params": params}
    headers = {**client._headers(url), "Accept": "text/event-stream"}
    if last_event_id is not None:
        headers["Last-Event-ID"] = str(last_event_id)
    source = client._token_source(url) if client.tokens else None
    token = None if source is None else await source.token()
    try:
        async with client.breaker(url).guard():
            response = await _open(client, url, body, headers, token)
            if response.status_code == 401 and source is not None and token is not None:
                await response.aclose()  # the token replaced once, as for a call
                token = await source.refresh(token)
                response = await _open(client, url, body, headers, token)
            if response.status_code in RETRYABLE_STATUS:
                await response.aclose()
                raise RetryableStatus(response.status_code)
        try:
            if not response.headers.get("content-type", "").startswith("text/event-stream"):
                content = await response.aread()
                _result(url, (response.status_code, content))  # raises its JSON-RPC error
                raise UnavailableError(f"{url}: {method} did not answer with a stream")
            async for seq, data in read_events(response.aiter_lines()):
                payload = json.loads(data)
                if "error" in payload:
                    error = payload["error"]
                    raise RemoteError(error.get("code", -32603), error.get("message", ""), url=url)
                yield seq, StreamResponse.model_validate(payload["result"])
        finally:
            await response.aclose()
    except RetryableStatus as exc:
        raise UnavailableError(f"cannot reach {url} (HTTP {exc.status_code})") from exc
    except httpx.TransportError as exc:
        raise UnavailableError(unreachable(url, exc)) from exc


async def _open(
    client: AgentClient, url: str, body: Any, headers: dict[str, str], token: str | None
) -> httpx.Response:
    """A stream's response, its body not read yet."""
    if token is not None:
        headers = {**headers, "Authorization": f"Bearer {token}"}
    request = client.http.build_request("POST", url, json=body, headers=headers)
    return await client.http.send(request, stream=True)


async def _grpc_stream(
    client: AgentClient,
    url: str,
    endpoint: Endpoint,
    method: str,
    params: dict[str, Any],
    last_event_id: int | None,
) -> AsyncIterator[Event]:
    """One stream over gRPC (the card offers gRPC alone): its items — without sequence
    numbers, which the binding does not carry —, or the reason it gave none."""
    from a2a_handoff.client.grpc_transport import StatusAnswer

    assert client.grpc is not None
    metadata = client._grpc_metadata(url, endpoint)
    source = client._grpc_token_source(url, endpoint)
    if source is not None:  # a refused token is not replaced on a gRPC stream: said at once
        metadata.append(("authorization", f"Bearer {await source.token()}"))
    if last_event_id is not None:
        metadata.append(("last-event-id", str(last_event_id)))
    encoded = json.dumps(params, separators=(",", ":"), allow_nan=False)
    try:
        async with client.breaker(url).guard():
            await client.grpc.open(endpoint, client.http.timeout.connect)
        async for item in client.grpc.stream(endpoint, method, encoded, metadata):
            yield None, StreamResponse.model_validate(item)
    except StatusAnswer as exc:
        status, _ = exc.answer
        if status in RETRYABLE_STATUS:
            raise UnavailableError(f"cannot reach {url} (HTTP {status})") from exc
        _result(url, exc.answer)  # raises its JSON-RPC error
        raise UnavailableError(f"{url}: {method} did not answer with a stream") from exc
    except httpx.TransportError as exc:
        raise UnavailableError(unreachable(url, exc)) from exc
