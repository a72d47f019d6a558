"""An agent's faces as Starlette routes: for `create_app`, or to mount in an app of one's own.

`agent_routes(service)` gathers what each face contributes: `POST /` (JSON-RPC, and A2A 0.3
on the same endpoint), the HTTP+JSON routes, the cards (`/.well-known/agent-card.json`, the
0.3 one at `/.well-known/agent.json`, the keys at `/.well-known/jwks.json`), `/health`,
the probes (`/livez`, `/readyz`), `/metrics`, and with `mcp=True` the MCP face at `/mcp`.
Every route is behind the agent's gate (`Gate`; the JSON-RPC route's is part of its app,
`JsonRpcRoute`): its observer made current, so what a call records is this agent's, then
the browser guard (`server._browser_guard`) — wherever the routes are mounted.

Under a prefix (`Mount("/billing", routes=agent_routes(service))`) the agent answers at
`<prefix>/`: its card's URL says so. Its service must be open while the app serves
(`lifespan=service.lifespan`, or entered with others'); an app of one's own answers its
unknown paths its own way (`create_app` answers them as HTTP+JSON errors, `server._rest`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from a2a_handoff.observe import Observer, use
from a2a_handoff.server._browser_guard import BrowserGuard, refused
from a2a_handoff.server._card_route import CARD_PATH, JWKS_ROUTE, V03_CARD_PATH, CardRoute
from a2a_handoff.server._compat03 import V03Methods
from a2a_handoff.server._health import Health
from a2a_handoff.server._http_methods import HttpMethods
from a2a_handoff.server._jsonrpc import JsonRpcEndpoint
from a2a_handoff.server._metrics_route import MetricsRoute
from a2a_handoff.server._probes import Probes
from a2a_handoff.server._rest import RestEndpoint
from a2a_handoff.server._trace_admission import TraceAdmission
from a2a_handoff.server.app_config import ObservabilityConfig
from a2a_handoff.server.service import AgentService

_OBSERVABILITY = ObservabilityConfig()


class Gate:
    """In front of each route of one agent: the agent's observer made current (its metrics
    and log lines are this agent's), then the browser guard (a refusal is a 403 carrying a
    `google.rpc.Status`)."""

    def __init__(self, app: ASGIApp, guard: BrowserGuard, observer: Observer) -> None:
        self.app = app
        self.guard = guard
        self.observer = observer

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        use(self.observer)
        if scope["type"] == "http":
            refusal = self.guard.refusal(scope)
            if refusal is not None:
                await refused(refusal)(scope, receive, send)
                return
        await self.app(scope, receive, send)


class JsonRpcRoute:
    """The JSON-RPC route's app (`POST /`, every SendMessage's path): its gate — a refusal is
    the 403 carrying a JSON-RPC error object — and the endpoint, in one call, with no
    request-response wrapper in between."""

    def __init__(self, endpoint: JsonRpcEndpoint, guard: BrowserGuard, observer: Observer) -> None:
        self.endpoint = endpoint
        self.guard = guard
        self.observer = observer

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        response = await self.answer(scope, receive)
        await response(scope, receive, send)

    async def answer(self, scope: Scope, receive: Receive) -> Response:
        """The answer to the call, not sent yet."""
        use(self.observer)
        headers = dict(scope["headers"])  # each name's last value: one pass, in C
        refusal = self.guard.refusal_of(headers.get(b"host"), headers.get(b"origin"), scope)
        if refusal is not None:
            return refused(refusal, jsonrpc=True)
        return await self.endpoint.serve(Request(scope, receive), headers)


def agent_routes(
    service: AgentService,
    *,
    observability: ObservabilityConfig = _OBSERVABILITY,
    card_v03_fields: bool = False,
    mcp: bool = False,
) -> list[BaseRoute]:
    """The routes of `service`'s faces (see the module docstring), each behind its gate.

    `observability`: `/metrics` public or not, when a pending handoff makes `/health`
    degraded; `card_v03_fields=True` adds the 0.3 members to the 1.0 card path too;
    `mcp=True` serves the agent as an MCP server at `/mcp` too (the `mcp` extra), its
    sessions running while the service serves (call this before entering it)."""
    trust, limits, auth = service.trust_config, service.limits, service.auth
    own_urls = [service.card.url, *(i.url for i in service.card.supported_interfaces)]
    guard = BrowserGuard(own_urls, trust.allowed_hosts, trust.allowed_origins)
    gate = [Middleware(Gate, guard=guard, observer=service.observer)]
    table = HttpMethods(service, limits.sse_ping).table()
    # Whose trace context is followed: the trusted agents' and the operators' always.
    agents = service.trust.trust_list.agents.values()
    trusted = frozenset({a.caller for a in agents} | set(trust.operators))
    endpoint = JsonRpcEndpoint(
        table,
        auth,
        limits.max_body,
        legacy=V03Methods(table, service.push).dispatch,
        admission=TraceAdmission(auth, trusted),
    )
    card = CardRoute(service.card, service.trust, v03_fields=card_v03_fields, auth=auth)
    v03_card = CardRoute(service.card, service.trust, v03_fields=True, auth=auth)
    health = Health(
        service.store,
        service.client,
        observability.stale_after,
        auth,
        _report(service),
        sees_all=service.manager.sees_all,
    )
    metrics = MetricsRoute(
        service.observer,
        service.store,
        service.client,
        lambda: service.streams.open,
        auth,
        public=observability.metrics_public,
    )
    probes = Probes(service.store, lambda: service.draining)
    routes: list[BaseRoute] = [
        Route("/", JsonRpcRoute(endpoint, guard, service.observer), methods=["POST"]),
        Route(CARD_PATH, card.get, methods=["GET"], middleware=gate),
        Route(V03_CARD_PATH, v03_card.get, methods=["GET"], middleware=gate),
        Route(JWKS_ROUTE, card.jwks, methods=["GET"], middleware=gate),
        Route("/health", health.get, methods=["GET"], middleware=gate),
        Route("/livez", probes.livez, methods=["GET"], middleware=gate),
        Route("/readyz", probes.readyz, methods=["GET"], middleware=gate),
        Route("/metrics", metrics.get, methods=["GET"], middleware=gate),
        *RestEndpoint(table, auth, limits.max_body).routes(gate),
    ]
    if mcp:
        routes.append(_mcp_route(service, gate))
    return routes


def _mcp_route(service: AgentService, gate: list[Middleware]) -> Route:
    """The MCP face's route; its sessions run while the service serves. Imported only when
    on: an agent without it pays nothing for MCP."""
    from a2a_handoff.server._mcp import HEALTH_STALE_SECONDS, MCP_PATH, McpFace

    auth = service.auth
    health = Health(service.store, service.client, HEALTH_STALE_SECONDS, auth, _report(service))
    face = McpFace(service, health, auth, service.limits.max_body)
    service.while_serving(face.running)
    return Route(MCP_PATH, face, methods=["GET", "POST", "DELETE"], middleware=gate)


def _report(service: AgentService) -> Callable[[], dict[str, Any]]:
    """/health's extra members: the returns this process gave up, with push notifications
    on the deliveries' figures, with MCP servers to call their breakers."""
    returns = service.manager.handoffs.delivery.given_up_report
    pusher, tools = service.pusher, service.manager.tools
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
