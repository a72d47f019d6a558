"""The flags an agent is served with — one set for the example agents (`python -m servers
NAME`), for `python -m servers all` (which passes them on) and for any agent object
(`python -m a2a_handoff serve MODULE:OBJECT`) — and the config objects some of them make."""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from a2a_handoff import HandoffError
from a2a_handoff.errors import ConfigError
from a2a_handoff.secrets import HOW as SECRETS_HOW
from a2a_handoff.secrets import SecretError, read_secret
from a2a_handoff.trust import ENV_VAR as KEY_ENV_VAR
from servers import _llm

if TYPE_CHECKING:
    from a2a_handoff import PushSettings, ToolsConfig
    from a2a_handoff.server import DrainConfig, RetentionConfig, ServerLimits, TlsConfig

# The server's config classes are imported where they are made: the CLI takes the gateway's
# flags from here (`python -m orchestrator serve`), and its other commands do not load the
# server.


def pairs(values: Sequence[str], what: str) -> dict[str, str]:
    pairs = {}
    for value in values:
        name, sep, rest = value.partition("=")
        if not sep or not name or not rest:
            raise HandoffError(f"{what} must read NAME=VALUE, not {value!r}")
        pairs[name] = rest
    return pairs


def listed(value: str) -> list[str]:
    """A comma-separated option as its entries."""
    return [entry.strip() for entry in value.split(",") if entry.strip()]


def agent_options(parser: argparse.ArgumentParser, examples: bool = True) -> None:
    """The agent options, added to `parser`; `examples=False` leaves out the options only
    the example agents read (--payments, the human agent's, the model's: --llm…)."""
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument(
        "--store",
        default=None,
        help="sqlite:///PATH (default sqlite:///data/NAME.db), postgresql://USER@HOST:PORT/DB or"
        " redis://HOST:PORT/DB (shared by replicas), or memory://",
    )
    parser.add_argument("--url", default=None, help="the URL the card advertises")
    parser.add_argument(
        "--tenant",
        default=None,
        metavar="NAME",
        help="the tenant the card's interfaces name: A2A clients following the card (other"
        " agents' handoffs and delegations among them) call this agent in it",
    )
    parser.add_argument(
        "--card-v03",
        action="store_true",
        help="serve the A2A 0.3 card members at /.well-known/agent-card.json too, for 0.3"
        " clients that read only that path (the 1.0 card schema forbids them there)",
    )
    parser.add_argument(
        "--route", action="append", default=[], metavar="NAME=URL", help="a handoff target"
    )
    parser.add_argument(
        "--scope", default=None, help="capabilities this agent may delegate, comma-separated"
    )
    parser.add_argument(
        "--credential",
        action="append",
        default=[],
        metavar="NAME=@FILE|NAME=env:VAR|NAME=oauth2:@FILE",
        help="the API key presented to agent NAME (a route or a trusted agent), read from FILE"
        " or from $VAR: never on the command line; oauth2:@FILE: bearer tokens by the OAuth2"
        " client-credentials grant, the client in FILE (JSON: token_url, client_id,"
        " client_secret, audience, scope)",
    )
    trust = parser.add_argument_group("trust")
    trust.add_argument(
        "--trust",
        action="append",
        default=[],
        metavar="NAME=URL",
        help="accept handoffs from this agent too (routes are trusted already)",
    )
    trust.add_argument(
        "--trust-file", type=Path, default=None, help="more trusted agents (YAML: agents: …)"
    )
    trust.add_argument(
        "--key-file",
        type=Path,
        default=None,
        help=f"this agent's keys (default: beside its store; or ${KEY_ENV_VAR})",
    )
    trust.add_argument(
        "--operators",
        default=None,
        help="principals that see and answer this agent's escalations, comma-separated",
    )
    trust.add_argument(
        "--trust-max-age",
        type=float,
        default=60.0,
        help="seconds a trusted agent's fetched keys are used before fetching them again",
    )
    trust.add_argument("--keys-reload", type=float, default=2.0, help=argparse.SUPPRESS)
    trust.add_argument(
        "--allow-insecure-files",
        action="store_true",
        help="read files of secrets (--auth-keys, @FILE, pins) another user owns or can read,"
        " with a warning, instead of refusing to start ($A2A_ALLOW_INSECURE_FILES=1)",
    )
    trust.add_argument(
        "--allowed-hosts",
        default="",
        metavar="NAMES",
        help="host names this agent answers at besides its URL's (and any IP address),"
        " comma-separated; `*`: any. Other Host headers are refused (DNS rebinding)",
    )
    trust.add_argument(
        "--allowed-origins",
        default="",
        metavar="ORIGINS",
        help="web origins (scheme://host:port) whose pages may call this agent,"
        " comma-separated; by default a browser's cross-origin request is refused",
    )
    trust.add_argument(
        "--return-give-up",
        type=float,
        default=None,
        help="seconds a decision's return is retried before its task fails (default: --ttl)",
    )
    retention_options(parser)
    parser.add_argument("--ttl", type=int, default=300, help="handoff envelope TTL, seconds")
    parser.add_argument("--max-hops", type=int, default=8)
    parser.add_argument("--recovery-interval", type=float, default=2.0)
    auth = parser.add_mutually_exclusive_group()
    auth.add_argument("--auth-keys", metavar="FILE", help="require API keys: principal=key lines")
    auth.add_argument("--auth-env", action="store_true", help="require keys from $A2A_API_KEYS")
    tokens = parser.add_argument_group("bearer tokens from an OpenID Connect issuer")
    tokens.add_argument(
        "--oidc-issuer",
        metavar="ISSUER_URL",
        default=None,
        help="accept its JWT access tokens (Authorization: Bearer), beside any API keys;"
        " the principal is the token's sub",
    )
    tokens.add_argument(
        "--oidc-audience",
        metavar="AUD",
        default=None,
        help="the aud a token must name (default: this agent's JSON-RPC URL, as its card says)",
    )
    tokens.add_argument(
        "--oidc-retry",
        metavar="SECONDS",
        type=float,
        default=30.0,
        help="seconds before the issuer is asked again: while it has not answered, and for a"
        " key id it did not publish (a rotation); at most 60",
    )
    parser.add_argument(
        "--escalate-over",
        type=float,
        default=None,
        help="escalate actions over this amount to route `human` (billing: 500)",
    )
    parser.add_argument(
        "--repeated-failures",
        type=int,
        default=None,
        help="escalate after this many failures of one kind in a conversation",
    )
    parser.add_argument(
        "--contracts", type=Path, default=None, help="enforce the handoff contracts of DIR"
    )
    drain_options(parser)
    limits = parser.add_argument_group("server limits (see docs/server.md)")
    from a2a_handoff.server import ServerLimits

    defaults = ServerLimits()
    limits.add_argument("--max-connections", type=int, default=defaults.max_connections)
    limits.add_argument("--max-streams", type=int, default=1000, help="open SSE streams")
    limits.add_argument("--header-timeout", type=float, default=defaults.header_timeout)
    limits.add_argument("--body-timeout", type=float, default=defaults.body_timeout)
    limits.add_argument("--write-timeout", type=float, default=defaults.write_timeout)
    limits.add_argument("--keep-alive", type=float, default=5.0, help="idle keep-alive, s")
    push_options(parser.add_argument_group("push notifications (see docs/push.md)"))
    if examples:
        _example_options(parser)
    seen = parser.add_argument_group("observability (see docs/observability.md)")
    seen.add_argument(
        "--log-level",
        default="info",
        choices=["debug", "info", "warning", "error"],
        help="info: a line per task transition, handoff step, escalation (default);"
        " debug adds a line per HTTP request",
    )
    seen.add_argument("--log-format", default="text", choices=["text", "json"])
    parser.add_argument(
        "--grpc-port",
        type=int,
        default=None,
        metavar="G",
        help="also serve the A2A gRPC binding on port G of --host, listed in the card (needs"
        " a2a-handoff[grpc])",
    )
    tls_options(parser.add_argument_group("TLS (see docs/server.md)"))
    parser.add_argument(
        "--mcp-server",
        action="store_true",
        help="also serve this agent as an MCP server at /mcp (needs a2a-handoff[mcp])",
    )
    tools = parser.add_argument_group("MCP tools a handler calls (see docs/tools.md)")
    tools.add_argument(
        "--mcp",
        action="append",
        default=[],
        metavar="NAME=URL",
        help="an MCP server (streamable HTTP) handlers may call as NAME (needs a2a-handoff[mcp])",
    )
    tools.add_argument(
        "--mcp-timeout", type=float, default=30.0, help="seconds an MCP tool call may take"
    )
    seen.add_argument(
        "--metrics-public", action="store_true", help="GET /metrics without a key under auth"
    )
    seen.add_argument(
        "--otlp-endpoint",
        metavar="URL",
        default=os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"),
        help="export traces over OTLP/HTTP (needs a2a-handoff[otel])",
    )


# -- retention (docs/stores.md) -------------------------------------------------------------


def retention_options(parser: argparse.ArgumentParser) -> None:
    """--retain DURATION: finished tasks deleted once older than that (default: kept)."""
    parser.add_argument(
        "--retain",
        type=_duration,
        default=None,
        metavar="DURATION",
        help="delete finished tasks (their events, push configs, outbox and ledger rows) once"
        " older than DURATION: 30d, 12h, 90s (default: keep them forever)",
    )


def retention_config(args: argparse.Namespace) -> RetentionConfig | None:
    from a2a_handoff.server import RetentionConfig

    return RetentionConfig(retain=args.retain) if args.retain is not None else None


def _duration(text: str) -> float:
    from a2a_handoff.server import parse_duration

    try:
        return parse_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def tls_options(tls: argparse._ArgumentGroup) -> None:
    """The TLS flags: what the agent serves with (HTTPS, gRPC), whom it asks for a client
    certificate, what it presents and trusts calling others."""
    tls.add_argument(
        "--tls-cert",
        type=Path,
        default=None,
        metavar="PEM",
        help="serve HTTPS (and gRPC, with --grpc-port) with this certificate (chain); the card's"
        " URLs become https://",
    )
    tls.add_argument(
        "--tls-key",
        type=Path,
        default=None,
        metavar="PEM",
        help="its private key (a file only you can read)",
    )
    tls.add_argument(
        "--tls-client-ca",
        type=Path,
        default=None,
        metavar="PEM",
        help="mutual TLS: require a client certificate from these CAs; the caller is its URI"
        " SAN (a SPIFFE ID) or else its first DNS SAN",
    )
    tls.add_argument(
        "--tls-ca",
        type=Path,
        default=None,
        metavar="PEM",
        help="the CAs the agents this one calls must have certificates from (default: the"
        " system's)",
    )
    tls.add_argument(
        "--tls-client-cert",
        type=Path,
        default=None,
        metavar="PEM",
        help="the certificate presented to the agents this one calls (default: --tls-cert)",
    )
    tls.add_argument(
        "--tls-client-key", type=Path, default=None, metavar="PEM", help="its private key"
    )


def tls_config(args: argparse.Namespace) -> TlsConfig | None:
    """TLS as the flags say (None: none given); ConfigError for a pair given by half, a
    client CA without a certificate, or a file that is not there."""
    from a2a_handoff.server import TlsConfig

    given = {
        "cert": args.tls_cert,
        "key": args.tls_key,
        "client_ca": args.tls_client_ca,
        "ca": args.tls_ca,
        "client_cert": args.tls_client_cert,
        "client_key": args.tls_client_key,
    }
    if all(value is None for value in given.values()):
        return None
    for name, path in given.items():
        if path is not None and not path.is_file():
            raise ConfigError(f"--tls-{name.replace('_', '-')}: no file at {path}")
    try:
        return TlsConfig(**given)
    except ConfigError as exc:  # said with the flags' names
        names = re.compile(r"\b(" + "|".join(sorted(given, key=len, reverse=True)) + r")\b")
        flag = names.sub(lambda m: "--tls-" + m.group(1).replace("_", "-"), str(exc))
        raise ConfigError(flag) from None


def drain_options(parser: argparse.ArgumentParser) -> None:
    """How the server stops on SIGTERM: the example agents', `a2a-handoff serve`'s and the
    gateway's."""
    stopping = parser.add_argument_group("stopping (see docs/server.md)")
    stopping.add_argument(
        "--drain-seconds",
        type=float,
        default=10.0,
        metavar="S",
        help="on SIGTERM: /readyz 503 at once, new work refused after a short grace, running"
        " tasks finished or handed over to another replica within S seconds, then exit 0",
    )
    stopping.add_argument(
        "--close-seconds",
        type=float,
        default=10.0,  # DrainConfig's (the server is not imported to write its help)
        metavar="S",
        help="after the drain and the open streams' 5 s: what closing (the store, clients) may"
        " take before the process logs an ERROR and exits 0 anyway (default: %(default)g)",
    )


def drain_config(args: argparse.Namespace) -> DrainConfig:
    """The drain as the flags say (ConfigError, a ValueError, for a bad one)."""
    from a2a_handoff.server import DrainConfig

    return DrainConfig(seconds=args.drain_seconds, close=args.close_seconds)


# -- push notifications ---------------------------------------------------------------------


def push_options(push: argparse._ArgumentGroup) -> None:
    """The push notification flags: the example agents', `a2a-handoff serve`'s and the
    gateway's (its clients' webhooks, under the same address rules and caps)."""
    push.add_argument(
        "--push-allow",
        action="append",
        default=[],
        metavar="HOSTS",
        help="webhook hosts, addresses or networks admitted beside public https URLs"
        " (comma-separated, repeatable; loopback only when listed: 127.0.0.1, localhost)",
    )
    push.add_argument("--no-push", action="store_true", help="turn push notifications off")
    push.add_argument(
        "--push-give-up",
        type=float,
        default=3600.0,
        metavar="SECONDS",
        help="how long a failing webhook is retried before its events are given up",
    )
    push.add_argument("--push-retry-max", type=float, default=60.0, help=argparse.SUPPRESS)
    push.add_argument(
        "--push-deadline",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="the most one webhook request may take, its answer included",
    )
    push.add_argument("--push-per-task", type=int, default=10, metavar="N", help="configs a task")
    push.add_argument(
        "--push-per-caller", type=int, default=100, metavar="N", help="active configs a caller"
    )
    push.add_argument(
        "--push-per-receiver",
        type=int,
        default=4,
        metavar="N",
        help="requests in flight to one receiver (scheme://host:port)",
    )


def push_settings(args: argparse.Namespace) -> PushSettings | None:
    """Push notifications as the flags say (on unless --no-push); ValueError for a bad one."""
    from a2a_handoff import PushSettings

    if args.no_push:
        return None
    return PushSettings(
        allow=tuple(args.push_allow),
        give_up=args.push_give_up,
        retry_max=args.push_retry_max,
        deadline=args.push_deadline,
        per_task=args.push_per_task,
        per_caller=args.push_per_caller,
        per_receiver=args.push_per_receiver,
    )


def mcp_tools(args: argparse.Namespace) -> ToolsConfig:
    """The MCP servers `--mcp NAME=URL` names (HandoffError, a ValueError: one malformed).
    A URL holding a password is a secret: read from `@FILE` or `env:VAR`, never written on
    the command line (SecretError, a ValueError, otherwise)."""
    from a2a_handoff import ToolsConfig

    servers = {}
    for name, where in pairs(args.mcp, "--mcp").items():
        if where.startswith(("@", "env:")):
            where = read_secret(where, f"--mcp {name}")
        elif urlsplit(where).password is not None:
            raise SecretError(f"--mcp {name}: the URL holds a password; {SECRETS_HOW}")
        servers[name] = where
    return ToolsConfig(mcp=servers, timeout=args.mcp_timeout)


def server_limits(args: argparse.Namespace) -> ServerLimits:
    from a2a_handoff.server import ServerLimits

    return ServerLimits(
        header_timeout=args.header_timeout,
        body_timeout=args.body_timeout,
        write_timeout=args.write_timeout,
        max_connections=args.max_connections,
    ).fitted()


def _example_options(parser: argparse.ArgumentParser) -> None:
    """The options only the example agents read."""
    parser.add_argument(
        "--payments",
        type=Path,
        default=None,
        help="billing: the payment provider's ledger, a file (default: in memory)",
    )
    human = parser.add_argument_group("the human agent")
    human.add_argument(
        "--answer-within",
        type=float,
        default=None,
        help="seconds a blocking escalation may wait for an operator (default: forever)",
    )
    human.add_argument(
        "--fallback",
        default="deny",
        help="what an unanswered escalation gets: deny, or a route NAME to hand it to",
    )
    human.add_argument("--check-every", type=float, default=1.0, help=argparse.SUPPRESS)
    _llm.add_arguments(parser)
