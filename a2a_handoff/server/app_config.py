"""The settings `create_app` takes, grouped by concern the way httpx groups `Timeout` and `Limits`.

    create_app(
        agent, card, store,
        handoff=HandoffConfig(routes={"billing": BILLING_URL}, scope=["refunds"]),
        trust=TrustConfig(auth=ApiKeyAuth.from_env(), trusted=["triage=http://…"]),
        limits=LimitsConfig(max_body=256 * 1024),
        observability=ObservabilityConfig(metrics_public=True),
        tools=ToolsConfig(mcp={"search": "http://127.0.0.1:9000/mcp"}),
        escalation=EscalationPolicy(amount_limit=500),
        retention=RetentionConfig(retain=30 * 86400),
    )

Each is a frozen dataclass whose defaults are the server's: `create_app(agent, card, store)`
serves with all of them. A value out of range is refused when the object is made
(`ConfigError`, a `ValueError`), a URL that cannot be called too (`AgentUrlError`), so a
mistake is said before anything is served. Collections given as lists are kept as tuples,
sets and read-only mappings: a config, once made, does not change under the app.

`LimitsConfig` is the app's own (a request body, the open streams); the connection-level
limits (timeouts, connections, slow readers) are the HTTP server's: `server.ServerLimits`.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from a2a_handoff.errors import ConfigError
from a2a_handoff.protocol.extension import DEFAULT_MAX_HOPS, DEFAULT_TTL_SECONDS
from a2a_handoff.protocol.urls import check_agent_url
from a2a_handoff.server._health import STALE_AFTER_SECONDS
from a2a_handoff.server._jsonrpc import DEFAULT_MAX_BODY
from a2a_handoff.trust.trustlist import TrustedAgent, parse_trust

if TYPE_CHECKING:  # jsonschema (contracts) is slow to import; the rest only types fields
    from a2a_handoff.auth import ApiKeyAuth
    from a2a_handoff.client.client import AgentClient
    from a2a_handoff.client.oauth import TokenSource
    from a2a_handoff.contracts.catalog import Catalog
    from a2a_handoff.trust.keys import IdentityStore


@dataclass(frozen=True, slots=True)
class HandoffConfig:
    """How this agent hands tasks off, and how long it keeps trying.

    `routes`: target name → agent URL (several comma-separated: replicas); every URL is
    checked here. `scope`: the capabilities this agent may delegate (None: any).
    `credentials`: agent URL (or origin) → the API key presented to it, or a `TokenSource`
    (`a2a_handoff.client.OAuth2Tokens`: OAuth2 bearer tokens). `client`: the
    `AgentClient` for calls to other agents (built when None, with `credentials`; one given
    is not closed by the app). `contracts` (a `Catalog`) turns handoff contracts on: every
    handoff needs one, sent and received, and the card lists those this agent accepts.
    `max_hops`: an envelope past this many hops is refused (`loop_detected`; 0: this agent
    takes part in no handoff). `ttl_seconds`: how long an envelope may wait for its target.
    `recovery_interval`: seconds between the outbox's retries and the store heartbeat.
    `return_give_up`: seconds a return to the agent that escalated is retried before its
    task fails (None: the envelope TTL).
    """

    routes: Mapping[str, str] = field(default_factory=dict)
    scope: Collection[str] | None = None
    credentials: Mapping[str, str | TokenSource] = field(default_factory=dict, repr=False)
    client: AgentClient | None = field(default=None, repr=False, compare=False)
    contracts: Catalog | None = None
    max_hops: int = DEFAULT_MAX_HOPS
    ttl_seconds: int = DEFAULT_TTL_SECONDS
    recovery_interval: float = 2.0
    return_give_up: float | None = None

    def __post_init__(self) -> None:
        routes = {
            _name(name, "a route"): check_agent_url(url, f"route {name}")
            for name, url in self.routes.items()
        }
        object.__setattr__(self, "routes", MappingProxyType(routes))
        if self.scope is not None:
            object.__setattr__(self, "scope", frozenset(_names(self.scope, "scope")))
        object.__setattr__(self, "credentials", MappingProxyType(dict(self.credentials)))
        _count("max_hops", self.max_hops, 0)
        _count("ttl_seconds", self.ttl_seconds, 1)
        _seconds("recovery_interval", self.recovery_interval)
        if self.return_give_up is not None:
            _seconds("return_give_up", self.return_give_up, zero=True)  # 0: no retry


@dataclass(frozen=True, slots=True)
class TrustConfig:
    """Who may call this agent, whom it accepts handoffs from, and the keys it signs with.

    `auth`: API keys callers must present (None: no authentication — anyone who reaches the
    agent). `trusted`: agents, besides its routes, it accepts handoffs from (`TrustedAgent`s,
    or `NAME=URL` strings; checked here). `identity`: where its signing keys are kept
    (None: its store — a key file beside a SQLite database). `operators`: the principals
    that see and decide escalations (a human agent under API-key auth must name one).
    `trusted_max_age`: seconds a trusted agent's fetched keys are used before they are
    fetched again. `keys_reload`: seconds between reads of its own keys, to pick up a
    rotation (0: never; a rotation then needs a restart). `allowed_hosts`: host names it
    answers at besides its own URLs' (and any IP address); `allowed_origins`: web origins
    whose pages may call it (`scheme://host:port`; `null`; `*`: any). By default a request
    with another `Host`, or from another origin's page, is refused (`server._browser_guard`).
    `oidc`: an OpenID Connect issuer whose bearer tokens (JWT access tokens) are accepted,
    beside the API keys or alone (`OidcConfig`); a token's principal is its subject (`sub`).
    """

    auth: ApiKeyAuth | None = field(default=None, repr=False)
    oidc: OidcConfig | None = None
    trusted: Collection[TrustedAgent | str] = ()
    identity: IdentityStore | None = field(default=None, repr=False, compare=False)
    operators: Collection[str] = ()
    trusted_max_age: float = 60.0
    keys_reload: float = 2.0
    allowed_hosts: Collection[str] = ()
    allowed_origins: Collection[str] = ()

    def __post_init__(self) -> None:
        if isinstance(self.trusted, str):
            raise ConfigError(f"trusted is a list of agents, not one string: [{self.trusted!r}]")
        parsed = tuple(parse_trust(t) if isinstance(t, str) else t for t in self.trusted)
        for entry in parsed:
            if not isinstance(entry, TrustedAgent):
                raise ConfigError(f"trusted takes TrustedAgent or 'NAME=URL', not {entry!r}")
        object.__setattr__(self, "trusted", parsed)
        object.__setattr__(self, "operators", _names(self.operators, "operators"))
        object.__setattr__(self, "allowed_hosts", _names(self.allowed_hosts, "allowed_hosts"))
        origins = _names(self.allowed_origins, "allowed_origins")
        for origin in origins:
            if origin not in ("*", "null") and not origin.startswith(("http://", "https://")):
                raise ConfigError(f"allowed_origins: {origin!r} is not scheme://host[:port]")
        object.__setattr__(self, "allowed_origins", origins)
        _seconds("trusted_max_age", self.trusted_max_age, zero=True)  # 0: fetched every time
        _seconds("keys_reload", self.keys_reload, zero=True)  # 0: never read again

    def trusted_agents(self) -> tuple[TrustedAgent, ...]:
        """`trusted`, every entry a `TrustedAgent`."""
        return tuple(t for t in self.trusted if isinstance(t, TrustedAgent))


@dataclass(frozen=True, slots=True)
class OidcConfig:
    """Bearer tokens from an OpenID Connect issuer, verified with its published keys.

    `issuer`: the issuer's identifier, exactly as its tokens' `iss` and its discovery
    document (`ISSUER/.well-known/openid-configuration`) say it; https, or http on a loopback
    address. `audience`: what a token's `aud` must name (None: the agent's JSON-RPC URL,
    exactly as its card writes it). `leeway`: seconds of clock skew allowed on `exp` and
    `nbf` (at most 60). `retry`: seconds before the issuer is asked again — its discovery
    and keys while it has not answered, its keys when a token names a key it does not know
    (a rotation), at most once per this interval (at most 60). `cache_size`: verified tokens
    kept (a token seen again costs a lookup until it expires).
    """

    issuer: str
    audience: str | None = None
    leeway: float = 60.0
    retry: float = 30.0
    cache_size: int = 10_000

    def __post_init__(self) -> None:
        _issuer_url(self.issuer)
        if self.audience is not None and (not isinstance(self.audience, str) or not self.audience):
            raise ConfigError(f"audience must be a non-empty string, not {self.audience!r}")
        _seconds("leeway", self.leeway, zero=True)
        _seconds("retry", self.retry, zero=True)  # 0: asked again on every call that needs it
        if self.leeway > 60 or self.retry > 60:
            raise ConfigError("leeway and retry are at most 60 seconds")
        _count("cache_size", self.cache_size, 1)


def _issuer_url(issuer: object) -> None:
    """An issuer's identifier: https (http only on a loopback address), no query or fragment."""
    if not isinstance(issuer, str):
        raise ConfigError(f"issuer must be a URL, not {issuer!r}")
    url = urlsplit(issuer)
    loopback = url.hostname in ("127.0.0.1", "::1", "localhost")
    if url.scheme != "https" and not (url.scheme == "http" and loopback):
        raise ConfigError(
            f"issuer {issuer!r} must be an https URL (http only on 127.0.0.1, ::1 or localhost)"
        )
    if not url.hostname or url.query or url.fragment:
        raise ConfigError(f"issuer {issuer!r} must be a URL with a host and no query or fragment")


@dataclass(frozen=True, slots=True)
class LimitsConfig:
    """What one request or stream may take of this agent.

    `max_body`: bytes a request body may have (beyond: -32100, HTTP 413). `max_streams`:
    SSE streams open at once (beyond: -32106, HTTP 503). `sse_ping`: seconds between the
    keep-alives of an idle stream or a blocking answer still waited for: below the 5 s read
    timeout of the stock A2A SDKs' clients, so that they wait as long as the task does.
    """

    max_body: int = DEFAULT_MAX_BODY
    max_streams: int = 1000
    sse_ping: float = 2.0

    def __post_init__(self) -> None:
        _count("max_body", self.max_body, 1)
        _count("max_streams", self.max_streams, 1)
        _seconds("sse_ping", self.sse_ping)


@dataclass(frozen=True, slots=True)
class ObservabilityConfig:
    """What this agent shows about itself.

    `metrics_public`: `GET /metrics` answers without a key under API-key auth (a scraper on
    a private network). `stale_after`: seconds a handoff may stay pending before
    `GET /health` says degraded.
    """

    metrics_public: bool = False
    stale_after: float = STALE_AFTER_SECONDS

    def __post_init__(self) -> None:
        _seconds("stale_after", self.stale_after)


@dataclass(frozen=True, slots=True)
class ToolsConfig:
    """The MCP servers this agent's handlers may call (`ctx.tools.call(NAME, tool, args)`).

    `mcp`: name → the server's streamable HTTP endpoint (`http://host:port/mcp`); a handler
    names a server, never a URL, and only these are called. `timeout`: seconds a call may
    take, connecting and retries included. `attempts`: how often a call with
    an idempotency key is tried when the connection fails (a call without one: once).
    `breaker_threshold` failures in a row open a server's circuit breaker for
    `breaker_cooldown` seconds: calls then fail at once.
    """

    mcp: Mapping[str, str] = field(default_factory=dict)
    timeout: float = 30.0
    attempts: int = 3
    breaker_threshold: int = 5
    breaker_cooldown: float = 10.0

    def __post_init__(self) -> None:
        servers = {
            _name(name, "an MCP server"): check_agent_url(url, f"MCP server {name}", replicas=False)
            for name, url in self.mcp.items()
        }
        object.__setattr__(self, "mcp", MappingProxyType(servers))
        _seconds("timeout", self.timeout)
        _count("attempts", self.attempts, 1)
        _count("breaker_threshold", self.breaker_threshold, 1)
        _seconds("breaker_cooldown", self.breaker_cooldown, zero=True)


@dataclass(frozen=True, slots=True)
class RetentionConfig:
    """How long this agent keeps finished tasks (`runtime.retention`).

    `retain`: seconds after a task ended (its last update) it is deleted with its events,
    push configs, outbox entries and ledger rows (None: kept forever, the default; a task
    whose idempotency key is still live, or with a handoff pending, is kept longer).
    `batch`: tasks deleted per transaction. `interval`: seconds between sweeps (None: a
    tenth of `retain`, between 1 and 60). The store must declare `capabilities.retention`.
    """

    retain: float | None = None
    batch: int = 100
    interval: float | None = None

    def __post_init__(self) -> None:
        if self.retain is not None:
            _seconds("retain", self.retain)
        _count("batch", self.batch, 1)
        if self.interval is not None:
            _seconds("interval", self.interval)


@dataclass(frozen=True, slots=True)
class DrainConfig:
    """How this agent stops when told to (SIGTERM, served by `server.DrainingServer`).

    `seconds`: the whole drain's bound, from the signal to the exit: the tasks still running
    then are handed over (resumed at once by another replica, or at the next start).
    `grace`: seconds after the signal during which new work is still taken while `/readyz`
    already says 503, for a load balancer to notice (None: a fifth of `seconds`, at most
    2 s); after it, a message that would start a run is refused with -32108 (HTTP 503).
    `close`: seconds the app's close may still take once the drain is over and the
    connections' grace (uvicorn's `timeout_graceful_shutdown`) has passed; a close that hangs
    past it (a store that stopped answering) is logged as an ERROR and the process exits 0
    anyway: what it ran was handed over, or is the next start's to recover.
    """

    seconds: float = 10.0
    grace: float | None = None
    close: float = 10.0

    def __post_init__(self) -> None:
        _seconds("seconds", self.seconds, zero=True)
        if self.grace is not None:
            _seconds("grace", self.grace, zero=True)
        _seconds("close", self.close, zero=True)

    @property
    def grace_seconds(self) -> float:
        """The grace, within the drain's bound."""
        grace = min(2.0, self.seconds / 5) if self.grace is None else self.grace
        return min(grace, self.seconds)


@dataclass(frozen=True, slots=True)
class GrpcConfig:
    """The A2A gRPC binding, served beside HTTP on a port of its own (the `grpc` extra).

    `port`: where it listens (0: any free port, for tests); `host`: the address it binds
    (loopback by default). `url`: what the card's `GRPC` interface says (default
    `host:port`, the bare address gRPC clients dial). It serves TLS (mutual TLS too) as the
    app's `TlsConfig` says; without one plaintext, for loopback or behind a proxy that
    terminates TLS.
    """

    port: int
    host: str = "127.0.0.1"
    url: str | None = None

    def __post_init__(self) -> None:
        _count("port", self.port, 0)
        if self.port > 65535:
            raise ConfigError(f"port must be at most 65535, not {self.port}")
        if not isinstance(self.host, str) or not self.host.strip():
            raise ConfigError(f"host must be an address or a host name, not {self.host!r}")

    @property
    def address(self) -> str:
        """The card's `GRPC` interface URL: `url`, or `host:port`."""
        if self.url:
            return self.url
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"


_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_DURATION = re.compile(r"(\d+(?:\.\d+)?)([smhd])")


def parse_duration(text: str) -> float:
    """`30d`, `12h`, `15m`, `90s` (or `1.5h`) in seconds; ConfigError (a ValueError) for
    anything else."""
    found = _DURATION.fullmatch(text.strip())
    if found is None or not float(found.group(1)) > 0:
        raise ConfigError(
            f"a duration is a positive number and a unit (s, m, h, d): 30d, 12h, 90s; not {text!r}"
        )
    return float(found.group(1)) * _UNITS[found.group(2)]


def _count(name: str, value: int, least: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise ConfigError(f"{name} must be a whole number of at least {least}, not {value!r}")


def _seconds(name: str, value: float, *, zero: bool = False) -> None:
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if not number or not (value >= 0 if zero else value > 0):  # NaN fails both
        least = "0 or more" if zero else "above 0"
        raise ConfigError(f"{name} must be a number of seconds {least}, not {value!r}")


def _name(value: object, what: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{what} needs a name, not {value!r}")
    return value


def _names(values: Collection[str], what: str) -> tuple[str, ...]:
    if isinstance(values, str):
        raise ConfigError(f"{what} is a list of names, not one string: write [{values!r}]")
    return tuple(_name(v, f"each of {what}") for v in values)


@dataclass(frozen=True, slots=True)
class TlsConfig:
    """TLS, both ways: what the agent serves with, and what it shows and trusts calling others.

    `cert` and `key` (PEM files, both or neither): HTTPS served with them — and the gRPC
    face, when on. `client_ca` (PEM, one CA or several): mutual TLS — every connection, HTTPS
    and gRPC, must present a certificate signed by one of them (refused at the handshake
    otherwise), and the caller's principal is its subject alternative name
    (`trust.certificates`); needs `cert`. `ca` (PEM): the CAs the servers of the agents it
    calls must have certificates from (None: the system's). `client_cert` and `client_key`
    (both or neither): the certificate it presents to the agents it calls (default: `cert`
    and `key`, one identity both ways). The files are read when the app is made (a key file
    another user can read is refused: `secrets.check_private`); verification is never off.
    """

    cert: str | Path | None = None
    key: str | Path | None = None
    client_ca: str | Path | None = None
    ca: str | Path | None = None
    client_cert: str | Path | None = None
    client_key: str | Path | None = None

    def __post_init__(self) -> None:
        for name in ("cert", "key", "client_ca", "ca", "client_cert", "client_key"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str | Path) or not str(value)):
                raise ConfigError(f"{name} must be the path of a PEM file, not {value!r}")
        if (self.cert is None) != (self.key is None):
            raise ConfigError("cert and key go together: give both, or neither")
        if (self.client_cert is None) != (self.client_key is None):
            raise ConfigError("client_cert and client_key go together: give both, or neither")
        if self.client_ca is not None and self.cert is None:
            raise ConfigError("client_ca (mutual TLS) needs the agent's own cert and key")

    @property
    def serves(self) -> bool:
        """Whether the agent serves TLS (HTTPS, and gRPC over TLS)."""
        return self.cert is not None

    @property
    def mutual(self) -> bool:
        """Whether callers must present a client certificate (mutual TLS)."""
        return self.client_ca is not None

    @property
    def presented(self) -> tuple[str | Path, str | Path] | None:
        """The certificate and key shown to the agents it calls (None: none)."""
        if self.client_cert is not None and self.client_key is not None:
            return self.client_cert, self.client_key
        if self.cert is not None and self.key is not None:
            return self.cert, self.key
        return None
