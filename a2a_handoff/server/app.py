"""`create_app()`: an agent served as an A2A 1.0 service on Starlette.

It composes: the agent's service (`server.service.AgentService`: its store, keys, runtime and
background work, and the A2A operations), the routes its faces contribute
(`server.routes.agent_routes`: JSON-RPC with A2A 0.3 beside it, HTTP+JSON, the cards,
`/health`, `/livez`, `/readyz`, `/metrics`, and MCP when asked), and a plain Starlette app
whose lifespan is the service's. Unknown paths and methods are answered as HTTP+JSON errors
(`server._rest`). Its settings come grouped (`server.app_config`); the cards it serves say
what it does (`server._cards`).

Trust (`server._app_trust`): the agent's routes are on its trust list (the route its
escalations go to may sign operators' decisions); `TrustConfig.trusted` adds agents that hand
off to it without being routes. Under API-key auth an agent's calls arrive as the principal
its trust entry names (its name by default): the key another agent presents to this one (its
`credentials`) must map to that principal here.
"""

from __future__ import annotations

from typing import Any

from starlette.applications import Starlette
from starlette.middleware.errors import ServerErrorMiddleware
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from a2a_handoff.agent import Agent
from a2a_handoff.escalation import EscalationPolicy
from a2a_handoff.protocol.agent_card import AgentCard
from a2a_handoff.push import PushSettings
from a2a_handoff.server._grpc import serve_grpc, with_grpc_interface
from a2a_handoff.server._jsonrpc import JsonAnswer
from a2a_handoff.server._rest import not_found
from a2a_handoff.server.app_config import (
    DrainConfig,
    GrpcConfig,
    HandoffConfig,
    LimitsConfig,
    ObservabilityConfig,
    RetentionConfig,
    TlsConfig,
    ToolsConfig,
    TrustConfig,
)
from a2a_handoff.server.routes import JsonRpcRoute, agent_routes
from a2a_handoff.server.service import AgentService
from a2a_handoff.stores.base import Store

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
    grpc: GrpcConfig | None = None,
    tls: TlsConfig | None = None,
    drain: DrainConfig | None = None,
    retention: RetentionConfig | None = None,
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
    anywhere else). `grpc` (a `GrpcConfig`) serves the A2A gRPC binding too, on a port of
    its own while the app serves, listed last in the card (the `grpc` extra). `tls` (a
    `TlsConfig`): the certificate HTTPS and gRPC are served with, the client CAs of mutual
    TLS (the card then declares `mutualTLS`, and its URLs must be https://), and the
    certificate and CAs of the agent's calls to others; HTTPS itself is the HTTP server's
    (`server.tls.uvicorn_options(tls)`). `drain` (a `DrainConfig`): how the service stops
    when `server.DrainingServer` serving the app is told to (SIGTERM). `retention` (a
    `RetentionConfig`) deletes finished tasks once old enough (by default they are kept).
    Connection limits are the HTTP server's (`server.limits`). The agent's service is
    `app.state.a2a`.
    """
    if grpc is not None:
        card = with_grpc_interface(card, grpc)
    service = AgentService(
        agent,
        card,
        store,
        handoff=handoff,
        trust=trust,
        limits=limits,
        tools=tools,
        escalation=escalation,
        extended_card=extended_card,
        push=push,
        dedupe_message_ids=dedupe_message_ids,
        tls=tls,
        drain=drain,
        retention=retention,
    )
    if grpc is not None:
        serve_grpc(service, grpc)
    routes = agent_routes(
        service, observability=observability, card_v03_fields=card_v03_fields, mcp=mcp_server
    )
    app = AgentApp(
        routes=routes,
        exception_handlers={404: not_found, 405: not_found},
        lifespan=service.lifespan,
    )
    app.state.a2a = service
    return app


class AgentApp(Starlette):
    """The agent's Starlette app, whose `POST /` (every SendMessage) goes straight to the
    JSON-RPC route: the exception middleware, the router's walk and the route's method check
    do nothing for it (the route answers every call itself, errors included). Only while
    nothing was added to the app that could see the call: no middleware, no exception handler
    but the not-found ones, no body limit; under a root path, and for anything else, the
    whole stack as ever.

    The server error middleware stays in front of it, as it was: an error raised while the
    answer is made is its 500 (or the app's 500 handler's); an answer sent whole by a
    Starlette `Response` is sent without its watch on the sends — it counts a response
    started from its first send, which is that answer's first step — and anything else
    (a stream, a held answer) under it."""

    _rpc: JsonRpcRoute | None = None
    _error_handler: Any = None

    def build_middleware_stack(self) -> ASGIApp:
        stack = super().build_middleware_stack()
        first = self.routes[0] if self.routes else None  # what the router would match first
        route = getattr(first, "endpoint", None)
        handlers = self.exception_handlers
        if (
            isinstance(first, Route)
            and first.path == "/"
            and first.methods == {"POST"}
            and isinstance(route, JsonRpcRoute)
            and not self.user_middleware
            and self.max_body_size is None
            and handlers.keys() <= {404, 405, 500, Exception}
        ):
            self._error_handler = handlers.get(500, handlers.get(Exception))
            self._rpc = route
        return stack

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.middleware_stack is None:
            self.middleware_stack = self.build_middleware_stack()
        rpc = self._rpc
        if (
            rpc is not None
            and scope["type"] == "http"
            and scope["path"] == "/"
            and scope["method"] == "POST"
            and not scope.get("root_path")
        ):
            scope["app"] = self
            try:
                answer = await rpc.answer(scope, receive)
            except Exception as exc:
                await self._errors(_raising(exc))(scope, receive, send)  # its 500, re-raised
                return  # (not reached: the middleware raises it again)
            if type(answer) in _WHOLE:
                await answer(scope, receive, send)
            else:
                await self._errors(answer)(scope, receive, send)
            return
        await super().__call__(scope, receive, send)

    def _errors(self, app: ASGIApp) -> ServerErrorMiddleware:
        return ServerErrorMiddleware(app, handler=self._error_handler, debug=self.debug)


# Answers whose `__call__` is Starlette's `Response.__call__`: two sends, nothing before.
_WHOLE = frozenset({Response, JsonAnswer})


def _raising(exc: Exception) -> ASGIApp:
    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        raise exc

    return app
