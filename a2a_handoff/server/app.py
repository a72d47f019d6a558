"""`create_app()`: an agent served as an A2A 1.0 service on Starlette.

Routes: `POST /` (JSON-RPC; SSE for the streaming methods, see `server.jsonrpc` and
`server.methods`; A2A 0.3 requests are served there too, `server.compat03`), the HTTP+JSON
routes (`server.rest`), `GET /.well-known/agent-card.json` and `GET /.well-known/jwks.json`
(`server.card`; the 0.3 card at `/.well-known/agent.json`) and `GET /health`
(`server.health`). Every binding calls the same methods on the same runtime. The store is
opened, the agent's identity loaded (made on first start), handoffs a previous process left
pending are
replayed, and tasks it left running are recovered, in the lifespan before the first request
is served; everything is closed when the app stops.

Trust: the agent's routes are on its trust list (the route its escalations go to may sign
operators' decisions); `trust` adds agents that hand off to it without being routes. Under
API-key auth an agent's calls arrive as the principal its trust entry names (its name by
default): the key another agent presents to this one (its `credentials`) must map to that
principal here.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
import urllib.request
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from a2a_handoff.agent import Agent
from a2a_handoff.auth import ApiKeyAuth
from a2a_handoff.client.client import AgentClient
from a2a_handoff.client.transport import Http11Transport
from a2a_handoff.errors import StoreError
from a2a_handoff.escalation import EscalationPolicy
from a2a_handoff.handoff.settings import HandoffSettings, same_url
from a2a_handoff.observe import Observer, events, use
from a2a_handoff.protocol.agent_card import AgentCard
from a2a_handoff.protocol.extension import (
    DEFAULT_MAX_HOPS,
    DEFAULT_TTL_SECONDS,
    HANDOFF_EXTENSION_URI,
)
from a2a_handoff.protocol.urls import check_agent_url
from a2a_handoff.push import Pusher, PushSettings
from a2a_handoff.runtime.tasks import TaskManager
from a2a_handoff.server.card import CARD_PATH, JWKS_ROUTE, V03_CARD_PATH, CardRoute
from a2a_handoff.server.compat03 import V03Methods
from a2a_handoff.server.health import STALE_AFTER_SECONDS, Health
from a2a_handoff.server.jsonrpc import DEFAULT_MAX_BODY, JsonRpcEndpoint
from a2a_handoff.server.methods import A2AMethods
from a2a_handoff.server.metrics import MetricsRoute
from a2a_handoff.server.push import PushMethods
from a2a_handoff.server.rest import RestEndpoint, not_found
from a2a_handoff.stores.base import Store
from a2a_handoff.stores.memory import MemoryTaskStore
from a2a_handoff.trust.agent_trust import AgentTrust
from a2a_handoff.trust.keys import IdentityStore, KeyFile
from a2a_handoff.trust.pins import MemoryPins, PinFile, Pins
from a2a_handoff.trust.trustlist import TrustedAgent, TrustList, parse_trust

if TYPE_CHECKING:  # imported when contracts are used: jsonschema is slow to import
    from a2a_handoff.contracts.catalog import Catalog

log = logging.getLogger("a2a_handoff.server")


@dataclass(frozen=True, slots=True)
class Served:
    """What one app serves (`app.state.a2a`): its card, store, client and task manager."""

    card: AgentCard
    store: Store
    client: AgentClient
    manager: TaskManager
    trust: AgentTrust
    observer: Observer


def _default_client(credentials: Mapping[str, str] | None) -> AgentClient:
    """The client for this agent's calls to others: over our HTTP/1.1 transport, unless the
    environment names an HTTP proxy (HTTP_PROXY, ALL_PROXY), which only httpx's own honours."""
    timeout = httpx.Timeout(10.0, connect=2.0)
    if urllib.request.getproxies().keys() & {"http", "all"}:
        return AgentClient(httpx.AsyncClient(timeout=timeout), credentials=credentials)
    transport = Http11Transport()
    http = httpx.AsyncClient(timeout=timeout, transport=transport)
    return AgentClient(http, direct=transport, credentials=credentials)


def _with_contracts(card: AgentCard, accepted: list[dict[str, Any]]) -> AgentCard:
    """The card with the handoff extension listing the contracts this agent accepts."""
    extensions = []
    for ext in card.capabilities.extensions or []:
        if ext.uri == HANDOFF_EXTENSION_URI:
            ext = ext.model_copy(update={"params": {**(ext.params or {}), "contracts": accepted}})
        extensions.append(ext)
    capabilities = card.capabilities.model_copy(update={"extensions": extensions})
    return card.model_copy(update={"capabilities": capabilities})


def _declaring_extended(card: AgentCard) -> AgentCard:
    """The card declaring `capabilities.extendedAgentCard`."""
    capabilities = card.capabilities.model_copy(update={"extended_agent_card": True})
    return card.model_copy(update={"capabilities": capabilities})


HUMAN_CAPABILITY = "escalations"  # what a human agent's card offers


def _operators(
    card: AgentCard, auth: ApiKeyAuth | None, operators: Iterable[str]
) -> frozenset[str] | None:
    """Who decides escalations here: the named operators under API-key auth (None: no
    authentication, whoever reaches the agent). A human agent under auth with no operator
    is refused: nobody could answer it, and anyone else answering would be a user deciding
    for an operator."""
    if auth is None:
        if HUMAN_CAPABILITY in card.offered:
            log.warning(
                "INSECURE: %s keeps escalations without API keys: anyone who can reach it"
                " answers them (approvals included); turn auth on and name operators",
                card.name,
            )
        return None
    named = frozenset(operators)
    if HUMAN_CAPABILITY in card.offered and not named:
        raise ValueError(
            f"{card.name} keeps escalations under API-key auth but names no operators: nobody"
            " could answer them. Name the principals that decide (operators=[...],"
            " --operators alice,bob): only they approve, deny or answer."
        )
    return named


def _pins(identity: IdentityStore | None, store: Store) -> Pins:
    """Where this agent keeps the keys it pinned: beside its key file (given, or its SQLite
    store's), so a restart keeps them; in memory for an agent with no key file."""
    key_file = identity if isinstance(identity, KeyFile) else getattr(store, "key_file", None)
    if isinstance(key_file, KeyFile):
        return PinFile.beside(key_file.path)
    if not isinstance(store, MemoryTaskStore):
        log.warning(
            "INSECURE: this agent has no key file (its keys come from $A2A_AGENT_KEY), so the"
            " keys it pins for the agents it trusts last only until it restarts: give it"
            " --key-file PATH to keep them"
        )
    return MemoryPins()


def _with_push(
    returns: Callable[[], dict[str, Any]], pusher: Pusher
) -> Callable[[], dict[str, Any]]:
    """/health's extra members, with the push deliveries' figures."""
    return lambda: {**returns(), "push": pusher.report()}


class _A2AStarlette(Starlette):
    """Starlette, with `POST /` dispatched straight to the JSON-RPC handler.

    The handler answers every failure itself, so the error and routing middleware in between
    would only cost time on the hot path (measured: about a tenth of a request's CPU).
    Every call (and the lifespan, whose background tasks inherit it) runs with this agent's
    observer current (`observe.use`): its metrics and log lines are this agent's.
    """

    def __init__(self, endpoint: JsonRpcEndpoint, observer: Observer, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._endpoint = endpoint
        self._observer = observer

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        use(self._observer)
        if scope["type"] == "http" and scope["method"] == "POST" and scope["path"] == "/":
            scope["app"] = self
            response = await self._endpoint.serve(Request(scope, receive))
            await response(scope, receive, send)
            return
        await super().__call__(scope, receive, send)


def create_app(
    agent: Agent,
    card: AgentCard,
    store: Store,
    *,
    auth: ApiKeyAuth | None = None,
    routes: Mapping[str, str] | None = None,
    scope: Iterable[str] | None = None,
    credentials: Mapping[str, str] | None = None,
    client: AgentClient | None = None,
    max_hops: int = DEFAULT_MAX_HOPS,
    ttl_seconds: int = DEFAULT_TTL_SECONDS,
    recovery_interval: float = 2.0,
    max_body: int = DEFAULT_MAX_BODY,
    sse_ping: float = 15.0,
    max_streams: int = 1000,
    stale_after: float = STALE_AFTER_SECONDS,
    escalation: EscalationPolicy | None = None,
    contracts: Catalog | None = None,
    dedupe_message_ids: bool = True,
    card_v03_fields: bool = False,
    trust: Iterable[TrustedAgent | str] = (),
    identity: IdentityStore | None = None,
    operators: Iterable[str] = (),
    trust_max_age: float = 60.0,
    keys_reload: float = 2.0,
    return_give_up: float | None = None,
    metrics_public: bool = False,
    extended_card: AgentCard | None = None,
    mcp_server: bool = False,
    push: PushSettings | None = None,
) -> Starlette:
    """Serve `agent` over A2A JSON-RPC; the app opens and closes `store` in its lifespan.

    Handoffs: `routes` maps target names to agent URLs, `scope` lists the capabilities this
    agent may delegate (None: any), `credentials` maps target URLs to the API key presented
    to them. `client` (with an injected httpx client) is built when not given.
    `escalation` sets the rules that escalate to the human agent (route `human` by default).
    `contracts` (a `Catalog`) turns handoff contracts on: every handoff needs one, sent and
    received; the card lists the contracts this agent accepts. `max_streams` caps the SSE
    streams open at once (beyond: -32106, HTTP 503). The connection-level limits are the
    HTTP server's: serve the app with `server.limits.LimitedHttpProtocol` (see there).
    `dedupe_message_ids=False` runs every message as new, even one whose id was seen before
    (the conformance kit reuses ids); keep the default anywhere else: a retried send must
    not start the work twice. Handoffs deduplicate on their own keys either way.
    The card at `/.well-known/agent-card.json` is pure A2A 1.0; the same card with the 0.3
    members a 0.3 client needs (`url`, `preferredTransport`, `protocolVersion`) is served at
    `/.well-known/agent.json`, and `card_v03_fields=True` adds them to the 1.0 path too (for
    0.3 clients that read only that path — the 1.0 card schema forbids the extra members).
    `trust` adds agents this one accepts handoffs from (`TrustedAgent`s, or `NAME=URL`);
    `identity` keeps its signing keys (default: its store — a key file beside a SQLite
    database, a key in Redis); `operators` are the principals that may see and answer its
    escalations (a human agent under API-key auth). `trust_max_age`: seconds a trusted
    agent's fetched keys are used before they are fetched again; `keys_reload`: how often
    this agent reads its own keys again (rotation); `return_give_up`: seconds a return is
    retried before its task fails (default: the envelope TTL).
    `GET /metrics` serves the agent's Prometheus metrics; under API-key auth it needs a key
    unless `metrics_public`.
    `extended_card`: the card an authenticated caller gets from `GetExtendedAgentCard` (REST
    `GET /extendedAgentCard`) — say, with skills a user sees only when signed in; the public
    card then declares `capabilities.extendedAgentCard`. Under API-key auth only a caller
    with a valid key gets it; without auth, anyone (the public card names no scheme).
    `push` (a `PushSettings`) turns push notifications on: the four config methods, a config
    on SendMessage, deliveries from the store's outbox (see `push.sender`), and
    `capabilities.pushNotifications` in the card; its `allow` is the webhook allowlist.
    `mcp_server=True` also serves the agent as an MCP server at `/mcp` (streamable HTTP; needs
    `a2a-handoff[mcp]`, imported only then): see `server.mcp`.
    """
    if not inspect.iscoroutinefunction(getattr(agent, "handle", None)):
        raise TypeError(
            f"{type(agent).__name__}.handle must be an async method (async def handle(self,"
            " ctx)): the server awaits it for every task step"
        )
    if auth is not None and not card.security_schemes:
        card = card.model_copy(
            update={
                "security_schemes": auth.security_schemes(),
                "security_requirements": auth.security_requirements(),
            }
        )
    if extended_card is not None:
        card = _declaring_extended(card)
        extended_card = _declaring_extended(extended_card)
        if auth is not None and not extended_card.security_schemes:
            extended_card = extended_card.model_copy(
                update={
                    "security_schemes": card.security_schemes,
                    "security_requirements": card.security_requirements,
                }
            )
    if contracts is not None:
        card = _with_contracts(card, contracts.accepted_by(card.name))
        if extended_card is not None:
            extended_card = _with_contracts(extended_card, contracts.accepted_by(card.name))
    if push is not None:
        capabilities = card.capabilities.model_copy(update={"push_notifications": True})
        card = card.model_copy(update={"capabilities": capabilities})
    deciders = _operators(card, auth, operators)
    routes = {name: check_agent_url(url, f"route {name}") for name, url in (routes or {}).items()}
    approver = (escalation or EscalationPolicy()).target
    trusted = [TrustedAgent(name, url, approvals=name == approver) for name, url in routes.items()]
    trusted += [parse_trust(t) if isinstance(t, str) else t for t in trust]
    settings = HandoffSettings(
        agent_name=card.name,
        agent_url=card.url,
        own_urls=frozenset(same_url(i.url) for i in card.supported_interfaces),
        routes=routes,
        scope=frozenset(scope) if scope is not None else None,
        max_hops=max_hops,
        ttl_seconds=ttl_seconds,
        recovery_interval=recovery_interval,
        contracts=contracts,
        return_give_up=return_give_up,
    )
    own_client = client is None
    if client is None:
        client = _default_client(credentials)
    trust_list = TrustList(
        trusted,
        client.jwks,
        max_age=trust_max_age,
        min_refresh=min(2.0, trust_max_age),
        pins=_pins(identity, store),
    )
    if client.trust is None:
        client.trust = trust_list
    agent_trust = AgentTrust(card.name, identity or store, trust_list, reload_every=keys_reload)
    manager = TaskManager(
        agent,
        store,
        settings,
        client,
        agent_trust,
        escalation,
        deciders,
        dedupe_message_ids=dedupe_message_ids,
    )
    extended = None
    if extended_card is not None:
        extended = CardRoute(extended_card, agent_trust, auth=auth).text
    methods = A2AMethods(
        manager,
        sse_ping,
        max_streams,
        extended_card=extended,
        extended_declared=bool(card.capabilities.extended_agent_card),
    )
    pusher = None
    if push is not None:
        pusher = Pusher(store, push, lambda: agent_trust.signing_key)
        methods.push = PushMethods(manager, pusher)
    table = methods.table() | (methods.push.table() if methods.push else {})
    endpoint = JsonRpcEndpoint(table, auth, max_body, legacy=V03Methods(table).dispatch)
    observer = Observer(card.name)
    served = Served(card, store, client, manager, agent_trust, observer)
    metrics = MetricsRoute(
        observer, store, client, lambda: methods.streams.open, auth, public=metrics_public
    )
    card_route = CardRoute(card, agent_trust, v03_fields=card_v03_fields, auth=auth)
    v03_card_route = CardRoute(card, agent_trust, v03_fields=True, auth=auth)
    returns = manager.handoffs.delivery.given_up_report
    if pusher is not None:
        returns = _with_push(returns, pusher)
        observer.metrics.registry.register(pusher.collector())
    health = Health(store, client, stale_after, auth, returns=returns)
    extra_routes: list[Route] = []
    mcp_face = None
    if mcp_server:  # imported only when on: an agent without it pays nothing for MCP
        from a2a_handoff.server.mcp import HEALTH_STALE_SECONDS, MCP_PATH, McpFace

        mcp_health = Health(store, client, HEALTH_STALE_SECONDS, auth, returns=returns)
        mcp_face = McpFace(card, table, mcp_health, auth)
        extra_routes.append(Route(MCP_PATH, mcp_face, methods=["GET", "POST", "DELETE"]))

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await store.open()
        handoffs = manager.handoffs
        try:
            legacy = getattr(store, "refuse_legacy_identity", None)
            if legacy is not None:  # private keys left in a shared store: moved out first
                await legacy(card.name)
            await agent_trust.open()  # before any delivery: deliveries are signed
            agent_trust.start()
            # Before serving: finish handoffs a previous process left pending, then fail
            # the tasks it left running (with replicas: those whose runner is gone).
            # A store that fails reads here (a damaged file) is served degraded rather than
            # not at all: /health says what is wrong, and the heartbeat tries again.
            await manager.leases.start()
            try:
                replayed = await handoffs.outbox.recover(wait_seconds=5.0)
                if replayed:
                    events.recovery(
                        "replayed", "replaying %d pending handoff(s)", replayed, count=replayed
                    )
                recovered = await manager.recover()
                if recovered:
                    done = "resumed" if getattr(agent, "resumes", False) else "failed"
                    events.recovery(
                        "orphaned", f"{done} %d task(s) left running by a previous process",
                        recovered, count=recovered,
                    )  # fmt: skip
            except StoreError as exc:
                log.error("start-up recovery failed, serving degraded: %s", exc)
            handoffs.outbox.start()
            if pusher is not None:
                pusher.start()  # its first sweep resumes what a previous process left
            manager.start_background()
            async with contextlib.AsyncExitStack() as faces:
                if mcp_face is not None:
                    await faces.enter_async_context(mcp_face.running())
                yield
        finally:
            if pusher is not None:
                await pusher.aclose()
            await manager.aclose()
            await agent_trust.aclose()
            if own_client:
                await client.aclose()
            await store.aclose()

    app = _A2AStarlette(
        endpoint,
        observer,
        routes=[
            Route("/", endpoint.rpc, methods=["POST"]),
            Route(CARD_PATH, card_route.get, methods=["GET"]),
            Route(V03_CARD_PATH, v03_card_route.get, methods=["GET"]),
            Route(JWKS_ROUTE, card_route.jwks, methods=["GET"]),
            Route("/health", health.get, methods=["GET"]),
            Route("/metrics", metrics.get, methods=["GET"]),
            *RestEndpoint(table, auth, max_body).routes(),
            *extra_routes,
        ],
        exception_handlers={404: not_found, 405: not_found},
        lifespan=lifespan,
    )
    app.state.a2a = served
    return app
