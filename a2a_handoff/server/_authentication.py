"""Who calls: an API key (`X-API-Key`, or `Authorization: Bearer KEY`) or an OpenID Connect
issuer's bearer token (`Authorization: Bearer JWT`), as the app is configured — either, or
both side by side — and the security schemes the card declares for them.

A bearer credential is first looked up among the API keys (a digest lookup); only one that
is not a key and has a JWT's shape is verified as a token. A key's principal is its name, a
token's its subject (`sub`): one namespace, so name keys and subjects apart.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping

from a2a_handoff.auth import API_KEY_HEADER, ApiKeyAuth
from a2a_handoff.errors import AuthenticationError
from a2a_handoff.protocol.agent_card import SecurityRequirement, SecurityScheme, StringList
from a2a_handoff.server._oidc import OidcVerifier, discovery_url

OIDC_SCHEME = "oidc"
_KEY_HEADER = API_KEY_HEADER.lower()


class Authentication:
    """The app's ways in: API keys, an issuer's tokens, or both."""

    def __init__(self, keys: ApiKeyAuth | None, tokens: OidcVerifier | None) -> None:
        if keys is None and tokens is None:
            raise ValueError("authentication needs API keys, an issuer, or both")
        self.keys = keys
        self.tokens = tokens
        self._fetching: asyncio.Task[None] | None = None

    async def principal(self, headers: Mapping[str, str]) -> str:
        """The caller's principal. Raises AuthenticationError (HTTP 401) without valid
        credentials, IssuerUnavailableError (503) for a token that cannot be checked yet."""
        key = headers.get(_KEY_HEADER) or headers.get(API_KEY_HEADER)
        if key:
            found = None if self.keys is None else self.keys.lookup(key)
            if found is None:
                raise AuthenticationError()
            return found
        credential = _bearer(headers)
        if not credential:
            raise AuthenticationError()
        if self.keys is not None:
            found = self.keys.lookup(credential)
            if found is not None:
                return found
        if self.tokens is None or credential.count(".") != 2:
            raise AuthenticationError()
        return await self.tokens.principal(credential)

    async def authenticate(self, headers: Mapping[str, str]) -> str | None:
        """The caller's principal, or None for credentials missing, refused or not
        checkable yet."""
        try:
            return await self.principal(headers)
        except AuthenticationError:  # IssuerUnavailableError among them
            return None

    def recognised(self, headers: Mapping[str, str]) -> str | None:
        """The caller's principal when known without waiting: a key, or a token verified
        before; None otherwise (a token not seen yet included)."""
        key = headers.get(_KEY_HEADER) or headers.get(API_KEY_HEADER)
        if key:
            return None if self.keys is None else self.keys.lookup(key)
        credential = _bearer(headers)
        if not credential:
            return None
        found = None if self.keys is None else self.keys.lookup(credential)
        if found is None and self.tokens is not None:
            found = self.tokens.cached(credential)
        return found

    def security_schemes(self) -> dict[str, SecurityScheme]:
        """The card's schemes: the API key's (as a header and as a bearer), the issuer's."""
        schemes = {} if self.keys is None else self.keys.security_schemes()
        if self.tokens is not None:
            issuer = self.tokens.issuer
            schemes[OIDC_SCHEME] = SecurityScheme(
                open_id_connect_security_scheme={
                    "openIdConnectUrl": discovery_url(issuer),
                    "description": f"A bearer access token (JWT) from {issuer}",
                }
            )
        return schemes

    def security_requirements(self) -> list[SecurityRequirement]:
        """Any one scheme is enough."""
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
