"""Who calls: an API key (`X-API-Key`, or `Authorization: Bearer KEY`), an OpenID Connect
issuer's bearer token (`Authorization: Bearer JWT`) or, under mutual TLS, the client
certificate of the call's connection, as the app is configured — any of them side by side —
and the security schemes the card declares for them.

A bearer credential is first looked up among the API keys (a digest lookup); only one that
is not a key and has a JWT's shape is verified as a token. A credential in the request
decides when there is one — a wrong one is refused, never passed over for the certificate —
and without one, under mutual TLS, the caller is the certificate's principal (its SAN,
`trust.certificates`): an agent calling with its own certificate, or a gateway holding one
certificate that sends its users' keys or tokens. A key's principal is its name, a token's
its subject (`sub`), a certificate's its SAN: one namespace. A name belongs to one way in:
a token's subject or a certificate's principal that is the name of an API key is refused
(401, and a WARNING line), so that an issuer's or a CA's subject cannot become a key holder —
an operator, a trusted agent named by its key, a user with tasks.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping

from a2a_handoff.auth import API_KEY_HEADER, ApiKeyAuth
from a2a_handoff.errors import AuthenticationError
from a2a_handoff.protocol.agent_card import SecurityRequirement, SecurityScheme, StringList
from a2a_handoff.server._oidc import OidcVerifier, discovery_url

log = logging.getLogger("a2a_handoff.server")

OIDC_SCHEME = "oidc"
MTLS_SCHEME = "mutualTLS"
_KEY_HEADER = API_KEY_HEADER.lower()


class Authentication:
    """The app's ways in: API keys, an issuer's tokens, client certificates (mutual TLS)."""

    def __init__(
        self, keys: ApiKeyAuth | None, tokens: OidcVerifier | None, certificates: bool = False
    ) -> None:
        if keys is None and tokens is None and not certificates:
            raise ValueError("authentication needs API keys, an issuer, client certificates")
        self.keys = keys
        self.tokens = tokens
        self.certificates = certificates
        self._fetching: asyncio.Task[None] | None = None

    async def principal(self, headers: Mapping[str, str], peer: str | None = None) -> str:
        """The caller's principal. `peer`: the principal of the connection's verified client
        certificate (`server._tls_peer.peer_of`, or the gRPC face's). Raises
        AuthenticationError (HTTP 401) without valid credentials, IssuerUnavailableError
        (503) for a token that cannot be checked yet."""
        key = headers.get(_KEY_HEADER) or headers.get(API_KEY_HEADER)
        if key:
            found = None if self.keys is None else self.keys.lookup(key)
            if found is None:
                raise AuthenticationError()
            return found
        credential = _bearer(headers)
        if not credential:
            if self.certificates and peer:
                return self._not_a_key_name(peer, "client certificate")
            raise AuthenticationError()
        if self.keys is not None:
            found = self.keys.lookup(credential)
            if found is not None:
                return found
        if self.tokens is None or credential.count(".") != 2:
            raise AuthenticationError()
        return self._not_a_key_name(await self.tokens.principal(credential), "bearer token")

    def _not_a_key_name(self, principal: str, what: str) -> str:
        if self.keys is not None and self.keys.names(principal):
            log.warning(
                "a %s names %r, an API key's name: refused (name the key otherwise)",
                what,
                principal[:200],
            )
            raise AuthenticationError(f"{what} refused: its subject is an API key's name")
        return principal

    async def authenticate(self, headers: Mapping[str, str], peer: str | None = None) -> str | None:
        """The caller's principal, or None for credentials missing, refused or not
        checkable yet."""
        try:
            return await self.principal(headers, peer)
        except AuthenticationError:  # IssuerUnavailableError among them
            return None

    def recognised(self, headers: Mapping[str, str], peer: str | None = None) -> str | None:
        """The caller's principal when known without waiting: a key, a token verified
        before, or the certificate's; None otherwise (a token not seen yet included)."""
        key = headers.get(_KEY_HEADER) or headers.get(API_KEY_HEADER)
        if key:
            return None if self.keys is None else self.keys.lookup(key)
        credential = _bearer(headers)
        if not credential:
            clash = peer is not None and self.keys is not None and self.keys.names(peer)
            return peer if self.certificates and peer and not clash else None
        found = None if self.keys is None else self.keys.lookup(credential)
        if found is None and self.tokens is not None:
            subject = self.tokens.cached(credential)
            clash = subject is not None and self.keys is not None and self.keys.names(subject)
            found = None if clash else subject
        return found

    def security_schemes(self) -> dict[str, SecurityScheme]:
        """The card's schemes: the API key's (as a header and as a bearer), the issuer's,
        mutual TLS's."""
        schemes = {} if self.keys is None else self.keys.security_schemes()
        if self.tokens is not None:
            issuer = self.tokens.issuer
            schemes[OIDC_SCHEME] = SecurityScheme(
                open_id_connect_security_scheme={
                    "openIdConnectUrl": discovery_url(issuer),
                    "description": f"A bearer access token (JWT) from {issuer}",
                }
            )
        if self.certificates:
            schemes[MTLS_SCHEME] = SecurityScheme(
                mtls_security_scheme={
                    "description": "A client certificate from the agent's CA; the caller is"
                    " its subject alternative name (a URI such as a SPIFFE ID, or a DNS name)"
                }
            )
        return schemes

    def security_requirements(self) -> list[SecurityRequirement]:
        """Any one scheme is enough; under mutual TLS the certificate is required (in the
        handshake) and enough, a key or token beside it choosing the principal."""
        if self.certificates:
            return [SecurityRequirement(schemes={MTLS_SCHEME: StringList()})]
        requirements = [] if self.keys is None else self.keys.security_requirements()
        if self.tokens is not None:
            requirements.append(SecurityRequirement(schemes={OIDC_SCHEME: StringList()}))
        return requirements

    def start(self) -> None:
        """The issuer's keys fetched in the background (its answer awaited by no one)."""
        if self.tokens is not None and self._fetching is None:
            self._fetching = asyncio.get_running_loop().create_task(self.tokens.keep_trying())

    async def aclose(self) -> None:
        if self._fetching is not None:
            self._fetching.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._fetching
            self._fetching = None
        if self.tokens is not None:
            await self.tokens.aclose()


def _bearer(headers: Mapping[str, str]) -> str:
    authorization = headers.get("authorization") or headers.get("Authorization") or ""
    scheme, _, credential = authorization.partition(" ")
    return credential.strip() if scheme.lower() == "bearer" else ""
