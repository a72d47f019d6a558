"""The caller's client certificate, from its connection to the app (mutual TLS).

uvicorn (0.54) puts nothing of a connection's TLS in the ASGI scope, so `LimitedHttpProtocol`
(`server.limits`) does: once the handshake is done, it reads the peer's certificate from the
connection's `ssl.SSLObject` and gives every request of that connection the ASGI TLS
extension (`scope["extensions"]["tls"]`, made once per connection by `tls_extension`).
`peer_of(scope)` reads it back: the principal of the client certificate
(`trust.certificates`), which the server's context verified against the client CAs in the
handshake. `getpeercert()` answers a certificate only when it was verified, so an unverified
one never reaches the app.
"""

from __future__ import annotations

import ssl
from typing import Any

from a2a_handoff.trust.certificates import certificate_principal

_TLS_VERSIONS = {"TLSv1.2": 0x0303, "TLSv1.3": 0x0304}


def tls_extension(connection: ssl.SSLObject) -> dict[str, Any]:
    """The ASGI TLS extension of one connection (its handshake done): the peer's certificate
    as PEM when it presented one the server verified, the version."""
    der = connection.getpeercert(binary_form=True) if connection.getpeercert() else None
    chain = [] if der is None else [ssl.DER_cert_to_PEM_cert(der)]
    return {
        "server_cert": None,
        "client_cert_chain": chain,
        "client_cert_name": None,
        "client_cert_error": None,
        "tls_version": _TLS_VERSIONS.get(connection.version() or ""),
        "cipher_suite": None,
    }


def peer_of(scope: Any) -> str | None:
    """The principal of the verified client certificate of the request's connection (None:
    none, or one naming no principal)."""
    extensions = scope.get("extensions")
    tls = extensions.get("tls") if extensions else None
    if not tls or tls.get("client_cert_error") is not None:
        return None
    chain = tls.get("client_cert_chain")
    return certificate_principal(chain[0]) if chain else None
