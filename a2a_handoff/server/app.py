"""`create_app()`: an agent served as an A2A 1.0 service on Starlette.

Routes: `POST /` (JSON-RPC; SSE for the streaming methods, see `server._jsonrpc` and
`server._methods`; A2A 0.3 requests are served there too, `server._compat03`), the HTTP+JSON
routes (`server._rest`), `GET /.well-known/agent-card.json` and `GET /.well-known/jwks.json`
(`server._card_route`; the 0.3 card at `/.well-known/agent.json`), `GET /health` (`server._health`)
and `GET /metrics` (`server._metrics_route`). Every binding calls the same methods on the same
runtime. Its settings come grouped (`server.app_config`); the cards it serves say what it does
(`server._cards`); what runs before the first request and after the last is the lifespan's
(`server._lifespan`).

Trust (`server._app_trust`): the agent's routes are on its trust list (the route its
escalations go to may sign operators' decisions); `TrustConfig.trusted` adds agents that hand
off to it without being routes. Under API-key auth an agent's calls arrive as the principal
its trust entry names (its name by default): the key another agent presents to this one (its
`credentials`) must map to that principal here.
"""

from __future__ import annotations

import importlib.util
import inspect
import logging
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from a2a_handoff.agent import Agent
from a2a_handoff.auth import ApiKeyAuth
from a2a_handoff.client.client import AgentClient
from a2a_handoff.client.mcp_tools import McpTools
from a2a_handoff.client.transport import Http11Transport
from a2a_handoff.errors import ConfigError
from a2a_handoff.escalation import EscalationPolicy
from a2a_handoff.handoff.settings import HandoffSettings, same_url
from a2a_handoff.observe import Observer, use
from a2a_handoff.protocol.agent_card import AgentCard
from a2a_handoff.push import Pusher, PushSettings
from a2a_handoff.runtime.tasks import TaskManager
from a2a_handoff.server._app_trust import agent_trust_of, operators_of
from a2a_handoff.server._browser_guard import BrowserGuard, refused
from a2a_handoff.server._call import Handler
from a2a_handoff.server._card_route import CARD_PATH, JWKS_ROUTE, V03_CARD_PATH, CardRoute
from a2a_handoff.server._cards import served_cards
from a2a_handoff.server._compat03 import V03Methods
from a2a_handoff.server._health import Health
from a2a_handoff.server._jsonrpc import JsonRpcEndpoint
from a2a_handoff.server._lifespan import Face, Lifespan
from a2a_handoff.server._methods import A2AMethods
from a2a_handoff.server._metrics_route import MetricsRoute
from a2a_handoff.server._push import PushMethods
from a2a_handoff.server._rest import RestEndpoint, not_found
from a2a_handoff.server._trace_admission import TraceAdmission
from a2a_handoff.server.app_config import (
    HandoffConfig,
    LimitsConfig,
    ObservabilityConfig,
    ToolsConfig,
    TrustConfig,
)
from a2a_handoff.stores.base import Store
from a2a_handoff.trust.agent_trust import AgentTrust

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
    pusher: Pusher | None = None  # when push notifications are on


def _default_client(credentials: Mapping[str, str] | None) -> AgentClient:
    """The client for this agent's calls to others: over our HTTP/1.1 transport, unless the
    environment names an HTTP proxy (HTTP_PROXY, ALL_PROXY), which only httpx's own honours."""
    timeout = httpx.Timeout(10.0, connect=2.0)
    if urllib.request.getproxies().keys() & {"http", "all"}:
        return AgentClient(httpx.AsyncClient(timeout=timeout), credentials=credentials)
    transport = Http11Transport()
    http = httpx.AsyncClient(timeout=timeout, transport=transport)
    return AgentClient(http, direct=transport, credentials=credentials)


class _A2AStarlette(Starlette):
    """Starlette, with `POST /` dispatched straight to the JSON-RPC handler.

    The handler answers every failure itself, so the error and routing middleware in between
    would only cost time on the hot path (measured: about a tenth of a request's CPU).
    Every call (and the lifespan, whose background tasks inherit it) runs with this agent's
    observer current (`observe.use`): its metrics and log lines are this agent's. Every HTTP
    request passes the browser guard first (`server._browser_guard`), on every route.
    """

    def __init__(
        self, endpoint: JsonRpcEndpoint, observer: Observer, guard: BrowserGuard, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self._endpoint = endpoint
        self._observer = observer
        self._guard = guard

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        use(self._observer)
        if scope["type"] == "http":
            refusal = self._guard.refusal(scope)
            if refusal is not None:
                await refused(refusal, scope)(scope, receive, send)
                return
            if scope["method"] == "POST" and scope["path"] == "/":
                scope["app"] = self
                response = await self._endpoint.serve(Request(scope, receive))
                await response(scope, receive, send)
                return
        await super().__call__(scope, receive, send)


# The defaults (frozen: one instance serves every app).
_HANDOFF = HandoffConfig()
_TRUST = TrustConfig()
_LIMITS = LimitsConfig()
_OBSERVABILITY = ObservabilityConfig()
_TOOLS = ToolsConfig()


def create_app(
    agent: Agent,
    card: AgentCard,
    store: Store,
    *,
    handoff: HandoffConfig = _HANDOFF,
    trust: TrustConfig = _TRUST,
    limits: LimitsConfig = _LIMITS,
    observability: ObservabilityConfig = _OBSERVABILITY,
    tools: ToolsConfig = _TOOLS,
    escalation: EscalationPolicy | None = None,
    extended_card: AgentCard | None = None,
    card_v03_fields: bool = False,
    mcp_server: bool = False,
    dedupe_message_ids: bool = True,
    push: PushSettings | None = None,
) -> Starlette:
    """Serve `agent` over A2A; the app opens and closes `store` in its lifespan.

    `handoff`, `trust`, `limits`, `observability`, `tools` (MCP servers handlers call): the
    grouped settings, defaulting to the server's (`server.app_config`). `escalation`: the
    rules that escalate to the human agent. The switches: `extended_card`, served to
    authenticated callers (the public card then declares it); `card_v03_fields=True` adds the
    0.3 members to the 1.0 card path too (for 0.3 clients that read only that path);
    `mcp_server=True` also serves the agent as an MCP server at `/mcp` (the `mcp` extra,
    see `server._mcp`); `push` (a `PushSettings`) turns push notifications on;
    `dedupe_message_ids=False` runs a message whose id was seen before as new (for clients
    that reuse ids, such as the conformance kit; a retried send must not start the work twice
    anywhere else). Connection limits are the HTTP server's (`server.limits`).
    """
    _check_handler(agent)
    card, extended_card = served_cards(card, extended_card, trust.auth, handoff.contracts, push)
    deciders = operators_of(card, trust.auth, trust.operators)
    client = handoff.client if handoff.client is not None else _default_client(handoff.credentials)
    agent_trust = agent_trust_of(card, store, client, trust, handoff.routes, escalation)
    manager = TaskManager(
        agent, store, _settings(card, handoff), client, agent_trust, escalation, deciders,
        dedupe_message_ids=dedupe_message_ids, tools=_tools(tools),
    )  # fmt: skip
    pusher = None if push is None else Pusher(store, push, lambda: agent_trust.signing_key)
    served = Served(card, store, client, manager, agent_trust, Observer(card.name), pusher)
    methods = _methods(served, extended_card, trust.auth, limits)
    table = methods.table() | (methods.push.table() if methods.push else {})
    endpoint = _endpoint(served, table, trust, limits)
    routes = _routes(
        served, methods, table, endpoint, trust.auth, limits, observability, card_v03_fields
    )
    faces: list[Face] = []
    if mcp_server:
        routes.append(_mcp_route(served, table, trust.auth, limits.max_body, faces))
    app = _A2AStarlette(
        endpoint,
        served.observer,
        _guard(card, trust),
        routes=routes,
        exception_handlers={404: not_found, 405: not_found},
        lifespan=_lifespan(agent, served, own_client=handoff.client is None, faces=faces),
    )
    app.state.a2a = served
    return app


def _endpoint(
    served: Served, table: dict[str, Handler], trust: TrustConfig, limits: LimitsConfig
) -> JsonRpcEndpoint:
    """`POST /`: the methods, A2A 0.3 beside them, and whose trace context is followed
    (the trusted agents' and the operators' always)."""
    agents = served.trust.trust_list.agents.values()
    trusted = frozenset({a.caller for a in agents} | set(trust.operators))
    return JsonRpcEndpoint(
        table,
        trust.auth,
        limits.max_body,
        legacy=V03Methods(table).dispatch,
        admission=TraceAdmission(trust.auth, trusted),
    )


def _guard(card: AgentCard, trust: TrustConfig) -> BrowserGuard:
    """The Host and Origin checks: the agent's own URLs are its card's and interfaces'."""
    own_urls = [card.url, *(i.url for i in card.supported_interfaces)]
    return BrowserGuard(own_urls, trust.allowed_hosts, trust.allowed_origins)


def _tools(config: ToolsConfig) -> McpTools | None:
    """The MCP servers handlers may call; None without any. The `mcp` package is imported
    by the first call (an agent without MCP servers never loads it); one missing is said
    here, before anything is served."""
    if not config.mcp:
        return None
    if importlib.util.find_spec("mcp") is None:
        raise ConfigError(
            "calling MCP servers needs the mcp package: pip install '.[mcp]' in the"
            " a2a-handoff clone"
        )
    return McpTools(
        config.mcp,
        timeout=config.timeout,
        attempts=config.attempts,
        breaker_threshold=config.breaker_threshold,
        breaker_cooldown=config.breaker_cooldown,
    )


def _check_handler(agent: Agent) -> None:
    if not inspect.iscoroutinefunction(getattr(agent, "handle", None)):
        raise TypeError(
            f"{type(agent).__name__}.handle must be an async method (async def handle(self,"
            " ctx)): the server awaits it for every task step"
        )


def _methods(
    served: Served, extended_card: AgentCard | None, auth: ApiKeyAuth | None, limits: LimitsConfig
) -> A2AMethods:
    extended = None
    if extended_card is not None:
        extended = CardRoute(extended_card, served.trust, auth=auth).text
    methods = A2AMethods(
        served.manager,
        limits.sse_ping,
        limits.max_streams,
        extended_card=extended,
        extended_declared=bool(served.card.capabilities.extended_agent_card),
    )
    if served.pusher is not None:
        methods.push = PushMethods(served.manager, served.pusher)
        served.observer.metrics.add_collector(served.pusher.collector())
    return methods


def _lifespan(agent: Agent, served: Served, *, own_client: bool, faces: list[Face]) -> Lifespan:
    return Lifespan(
        agent,
        served.card.name,
        served.store,
        served.manager,
        served.trust,
        served.client,
        own_client,
        faces,
        served.pusher,
    )


def _settings(card: AgentCard, handoff: HandoffConfig) -> HandoffSettings:
    return HandoffSettings(
        agent_name=card.name,
        agent_url=card.url,
        own_urls=frozenset(same_url(i.url) for i in card.supported_interfaces),
        routes=dict(handoff.routes),
        scope=frozenset(handoff.scope) if handoff.scope is not None else None,
        max_hops=handoff.max_hops,
        ttl_seconds=handoff.ttl_seconds,
        recovery_interval=handoff.recovery_interval,
        contracts=handoff.contracts,
        return_give_up=handoff.return_give_up,
    )


def _routes(
    served: Served,
    methods: A2AMethods,
    table: dict[str, Handler],
    endpoint: JsonRpcEndpoint,
    auth: ApiKeyAuth | None,
    limits: LimitsConfig,
    observability: ObservabilityConfig,
    card_v03_fields: bool,
) -> list[Route]:
    """The route table: JSON-RPC, the cards and keys, health, metrics, then HTTP+JSON."""
    card, trust = served.card, served.trust
    card_route = CardRoute(card, trust, v03_fields=card_v03_fields, auth=auth)
    v03_card_route = CardRoute(card, trust, v03_fields=True, auth=auth)
    returns = _returns(served)
    health = Health(
        served.store,
        served.client,
        observability.stale_after,
        auth,
        returns=returns,
        sees_all=served.manager.sees_all,
    )
    metrics = MetricsRoute(
        served.observer,
        served.store,
        served.client,
        lambda: methods.streams.open,
        auth,
        public=observability.metrics_public,
    )
    return [
        Route("/", endpoint.rpc, methods=["POST"]),
        Route(CARD_PATH, card_route.get, methods=["GET"]),
        Route(V03_CARD_PATH, v03_card_route.get, methods=["GET"]),
        Route(JWKS_ROUTE, card_route.jwks, methods=["GET"]),
        Route("/health", health.get, methods=["GET"]),
        Route("/metrics", metrics.get, methods=["GET"]),
        *RestEndpoint(table, auth, limits.max_body).routes(),
    ]


def _mcp_route(
    served: Served,
    table: dict[str, Handler],
    auth: ApiKeyAuth | None,
    max_body: int,
    faces: list[Face],
) -> Route:
    """The MCP face's route; its sessions run in the lifespan (added to `faces`). Imported
    only when on: an agent without it pays nothing for MCP."""
    from a2a_handoff.server._mcp import HEALTH_STALE_SECONDS, MCP_PATH, McpFace

    health = Health(
        served.store, served.client, HEALTH_STALE_SECONDS, auth, returns=_returns(served)
    )
    face = McpFace(served.card, table, health, auth, max_body)
    faces.append(face.running)
    return Route(MCP_PATH, face, methods=["GET", "POST", "DELETE"])


def _returns(served: Served) -> Callable[[], dict[str, Any]]:
    """/health's extra members: the returns this process gave up, with push notifications
    on the deliveries' figures, with MCP servers to call their breakers."""
    returns = served.manager.handoffs.delivery.given_up_report
    pusher, tools = served.pusher, served.manager.tools
    if pusher is None and tools is None:
        return returns

    def report() -> dict[str, Any]:
        members = returns()
        if pusher is not None:
            members["push"] = pusher.report()
        if tools is not None:
            members["mcpServers"] = tools.snapshot()
        return members

    return report
