"""How an agent service's parts are made from its settings (`server.service`): the client for
its calls to other agents, the MCP servers its handlers call, its handoff settings."""

from __future__ import annotations

import importlib.util
import ssl
import urllib.request
from collections.abc import Mapping

import httpx

from a2a_handoff.client.client import AgentClient
from a2a_handoff.client.mcp_tools import McpTools
from a2a_handoff.client.oauth import TokenSource
from a2a_handoff.client.transport import Http11Transport
from a2a_handoff.errors import ConfigError
from a2a_handoff.handoff.settings import HandoffSettings, same_url
from a2a_handoff.protocol.agent_card import AgentCard
from a2a_handoff.server.app_config import HandoffConfig, TlsConfig, ToolsConfig
from a2a_handoff.server.tls import client_context, grpc_channel_tls


def default_client(
    credentials: Mapping[str, str | TokenSource] | None, tls: TlsConfig | None = None
) -> AgentClient:
    """The client for this agent's calls to others: over our HTTP/1.1 transport, unless the
    environment names an HTTP proxy (HTTP_PROXY, ALL_PROXY), which only httpx's own honours.
    https:// calls go through httpx's transport, with `tls`'s context when given: the CAs
    peers' certificates are verified against, the agent's own certificate presented."""
    timeout = httpx.Timeout(10.0, connect=2.0)
    verify: ssl.SSLContext | bool = True if tls is None else client_context(tls)
    grpc_tls = None if tls is None else grpc_channel_tls(tls)  # gRPC-only peers: the same
    if urllib.request.getproxies().keys() & {"http", "all"}:
        http = httpx.AsyncClient(timeout=timeout, verify=verify)
        return AgentClient(http, credentials=credentials, grpc_tls=grpc_tls, read_cards=True)
    transport = Http11Transport(fallback=httpx.AsyncHTTPTransport(verify=verify))
    http = httpx.AsyncClient(timeout=timeout, transport=transport)
    return AgentClient(
        http, direct=transport, credentials=credentials, grpc_tls=grpc_tls, read_cards=True
    )


def mcp_tools(config: ToolsConfig) -> McpTools | None:
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


def handoff_settings(card: AgentCard, handoff: HandoffConfig) -> HandoffSettings:
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
