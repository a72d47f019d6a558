"""TLS as a `TlsConfig` says: the server's context (HTTPS; mutual TLS with a client CA), and
the client's (what the agent presents to and trusts of the agents it calls). How the
caller's certificate reaches the app: `server._tls_peer`.

A private key readable by another local user is refused before anything is served
(`secrets.check_private`; accepted with a warning under `--allow-insecure-files`).
"""

from __future__ import annotations

import ssl
from pathlib import Path
from typing import Any

import httpx

from a2a_handoff.errors import ConfigError
from a2a_handoff.protocol.agent_card import AgentCard
from a2a_handoff.secrets import check_private
from a2a_handoff.server.app_config import TlsConfig


def _load_pair(context: ssl.SSLContext, cert: str | Path, key: str | Path, what: str) -> None:
    check_private(Path(key), what)
    try:
        context.load_cert_chain(cert, key)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"{what}: cannot load {cert} and {key}: {exc}") from None


def _load_cas(context: ssl.SSLContext, cafile: str | Path, what: str) -> None:
    try:
        context.load_verify_locations(cafile)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"{what}: cannot load {cafile}: {exc}") from None


def server_context(tls: TlsConfig) -> ssl.SSLContext:
    """The context HTTPS is served with: the agent's certificate, TLS 1.2 at least, and under
    mutual TLS a client certificate required, verified against `client_ca`. ConfigError for
    files that cannot be used; SecretError (a ValueError) for a key others can read."""
    if tls.cert is None or tls.key is None:
        raise ConfigError("serving TLS needs cert and key")
    # Made bare, not by create_default_context: that one trusts the system's CAs too (its
    # default paths, $SSL_CERT_FILE), and any public CA would then vouch for a caller.
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    _load_pair(context, tls.cert, tls.key, "tls key")
    if tls.client_ca is not None:
        context.verify_mode = ssl.CERT_REQUIRED
        _load_cas(context, tls.client_ca, "tls client CA")
    else:
        context.verify_mode = ssl.CERT_NONE  # no certificate asked of callers
    return context


def client_context(tls: TlsConfig) -> ssl.SSLContext:
    """The context of the agent's calls to others: peers' server certificates verified
    (hostnames too) against `ca` alone or, without it, the CAs httpx trusts by default; the
    agent's own certificate presented to a peer that asks for one."""
    if tls.ca is not None:  # these CAs only, not the system's besides
        try:
            context = ssl.create_default_context(cafile=str(tls.ca))
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(f"tls CA: cannot load {tls.ca}: {exc}") from None
    else:
        context = httpx.create_ssl_context()
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    presented = tls.presented
    if presented is not None:
        _load_pair(context, presented[0], presented[1], "tls client key")
    return context


def grpc_channel_tls(tls: TlsConfig) -> tuple[bytes | None, bytes | None, bytes | None]:
    """What the agent's gRPC channels to others trust and present, as PEM (`AgentClient`'s
    `grpc_tls`): `ca` (None: gRPC's default roots), the presented key and certificate."""
    try:
        roots = None if tls.ca is None else Path(tls.ca).read_bytes()
        presented = tls.presented
        if presented is None:
            return roots, None, None
        check_private(Path(presented[1]), "tls client key")
        return roots, Path(presented[1]).read_bytes(), Path(presented[0]).read_bytes()
    except OSError as exc:
        raise ConfigError(f"tls: {exc}") from None


def uvicorn_options(tls: TlsConfig) -> dict[str, Any]:
    """`uvicorn.run`'s TLS arguments for `tls`: the files, and `server_context`'s context
    (built now, so that a bad file is said before anything listens)."""
    context = server_context(tls)
    return {
        "ssl_certfile": str(tls.cert),
        "ssl_keyfile": str(tls.key),
        "ssl_context_factory": lambda config, default: context,
    }


def require_https(card: AgentCard) -> None:
    """ConfigError unless every HTTP interface of `card` says https://: an agent serving TLS
    answers nothing in plaintext, so an http:// URL would send its callers nowhere."""
    plain = [
        i.url
        for i in card.supported_interfaces
        if i.protocol_binding != "GRPC" and not i.url.startswith("https://")
    ]
    if plain:
        raise ConfigError(
            f"the agent serves TLS but its card names {', '.join(plain)}: give it https:// URLs"
        )
