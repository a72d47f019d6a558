"""Who calls: an API key (`X-API-Key`, or `Authorization: Bearer KEY`), or under mutual TLS
the client certificate of the call's connection — and the security schemes the card declares.

A credential in the request decides when there is one: a valid key is its principal, an
invalid one is refused (never passed over for the certificate). Without one, under mutual
TLS, the caller is the certificate's principal (its SAN, `trust.certificates`): the agent
calling with its own certificate, or a client behind a gateway that holds one per user and
sends their keys. Keys and certificates name principals in one namespace (`--operators`,
task owners, trust entries): a key's name is its principal, a certificate's its SAN.
"""

from __future__ import annotations

from collections.abc import Mapping

from a2a_handoff.auth import ApiKeyAuth
from a2a_handoff.errors import AuthenticationError
from a2a_handoff.protocol.agent_card import SecurityRequirement, SecurityScheme, StringList

MTLS_SCHEME = "mutualTLS"


class Authentication:
    """The app's ways in: API keys, client certificates (mutual TLS), or both."""

    __slots__ = ("certificates", "keys")

    def __init__(self, keys: ApiKeyAuth | None, certificates: bool = False) -> None:
        if keys is None and not certificates:
            raise ValueError("authentication needs API keys, client certificates, or both")
        self.keys = keys
        self.certificates = certificates

    @classmethod
    def of(cls, keys: ApiKeyAuth | None, mutual_tls: bool) -> Authentication | None:
        """The app's authentication (None: none configured, anyone who reaches it)."""
        if keys is None and not mutual_tls:
            return None
        return cls(keys, mutual_tls)

    def authenticate(self, headers: Mapping[str, str], peer: str | None = None) -> str | None:
        """The caller's principal, or None. `peer`: the principal of the connection's
        verified client certificate (`server.tls.peer_of`, or the gRPC face's)."""
        if self.keys is not None and _presents_credential(headers):
            return self.keys.authenticate(headers)
        if self.certificates:
            return peer
        return None

    def principal(self, headers: Mapping[str, str], peer: str | None = None) -> str:
        """The caller's principal; AuthenticationError (HTTP 401) without one."""
        found = self.authenticate(headers, peer)
        if found is None:
            raise AuthenticationError()
        return found

    def security_schemes(self) -> dict[str, SecurityScheme]:
        """The card's schemes: the API key's (as a header and as a bearer), mutual TLS's."""
        schemes = {} if self.keys is None else self.keys.security_schemes()
        if self.certificates:
            schemes[MTLS_SCHEME] = SecurityScheme(
                mtls_security_scheme={
                    "description": "A client certificate from the agent's CA; the caller is"
                    " its subject alternative name (a URI such as a SPIFFE ID, or a DNS name)"
                }
            )
        return schemes

    def security_requirements(self) -> list[SecurityRequirement]:
        """Under mutual TLS the certificate is required and enough (a key beside it chooses
        the principal); otherwise either key scheme is enough."""
        if self.certificates:
            return [SecurityRequirement(schemes={MTLS_SCHEME: StringList()})]
        assert self.keys is not None
        return self.keys.security_requirements()


def _presents_credential(headers: Mapping[str, str]) -> bool:
    """Whether the request carries a key: `X-API-Key`, or an `Authorization: Bearer`."""
    if headers.get("x-api-key") or headers.get("X-API-Key"):
        return True
    authorization = headers.get("authorization") or headers.get("Authorization") or ""
    return authorization[:7].lower() == "bearer "
