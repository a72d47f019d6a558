"""An OpenID Connect issuer's bearer tokens, verified: its keys fetched, refreshed, and each
token's verification kept until it expires.

The issuer's discovery document (`ISSUER/.well-known/openid-configuration`) names its keys
(`jwks_uri`); it must name the configured issuer exactly. The keys are fetched when the agent
starts (`keep_trying`, in the background: again every `retry` seconds, at least one, until
the issuer answered), and again, at most once per `retry` seconds, when a token names a key
they do not hold — a rotation needs no restart, and a flood of forged key ids costs the
issuer one request per interval. An issuer that has not answered yet does not stop the agent:
a token is then answered 503 (`IssuerUnavailableError`), and a call asks the issuer again too
once `retry` seconds have passed since it was last asked. A token verified once is
answered from a bounded dict keyed by the token until its `exp`: a repeated token costs a
lookup, not a signature check.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import urlsplit

import httpx

from a2a_handoff.errors import AuthenticationError, IssuerUnavailableError
from a2a_handoff.trust.tokens import (
    IssuerKeys,
    TokenError,
    TokenRules,
    UnknownKeyError,
    header_of,
    verify,
)

log = logging.getLogger("a2a_handoff.server")

DISCOVERY_PATH = "/.well-known/openid-configuration"
MAX_DOCUMENT_BYTES = 1024 * 1024
Fetch = Callable[[str], Awaitable[Any]]
"""A JSON document fetched from a URL (raises on any failure)."""


def discovery_url(issuer: str) -> str:
    """Where an issuer's OpenID Connect discovery document is (OpenID Connect Discovery §4)."""
    return issuer.rstrip("/") + DISCOVERY_PATH


def _fit_for_keys(uri: str, issuer: str) -> bool:
    """Keys are fetched over https, or from the issuer's own origin (an issuer served over
    plain http on loopback, in tests and local setups): never over plain http elsewhere."""
    named, own = urlsplit(uri), urlsplit(issuer)
    if not named.netloc:
        return False
    return named.scheme == "https" or (named.scheme, named.netloc) == (own.scheme, own.netloc)


class OidcVerifier:
    """Bearer tokens of one issuer, checked for one audience; see the module docstring."""

    def __init__(
        self,
        rules: TokenRules,
        *,
        retry: float = 30.0,
        cache_size: int = 10_000,
        fetch: Fetch | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.rules = rules
        self.issuer = rules.issuer
        self.retry = retry
        self.cache_size = cache_size
        self._http: httpx.AsyncClient | None = None
        self._fetch = fetch or self._get
        self._clock, self._wall = clock, wall
        self._keys: IssuerKeys | None = None
        self._jwks_uri: str | None = None
        self._asked: float | None = None  # when the issuer was last asked (clock)
        self._why = "not asked yet"
        self._lock = asyncio.Lock()
        self._verified: dict[str, tuple[str, float]] = {}  # token → (subject, exp)

    def cached(self, token: str) -> str | None:
        """The subject of a token verified before and not expired, or None."""
        hit = self._verified.get(token)
        if hit is None:
            return None
        if self._wall() > hit[1] + self.rules.leeway:
            self._verified.pop(token, None)
            return None
        return hit[0]

    async def principal(self, token: str) -> str:
        """The token's subject. Raises AuthenticationError (401) for a token refused,
        IssuerUnavailableError (503) while the issuer's keys cannot be had."""
        found = self.cached(token)
        if found is not None:
            return found
        try:
            header_of(token)  # a forged header is refused before anything is fetched
            keys = await self._current_keys()
            try:
                verified = verify(token, keys, self.rules, self._wall())
            except UnknownKeyError:
                keys = await self._refetched(keys)
                verified = verify(token, keys, self.rules, self._wall())
        except TokenError as exc:
            raise AuthenticationError(f"bearer token refused: {exc}") from None
        self._remember(token, verified.subject, verified.expires)
        return verified.subject

    def _remember(self, token: str, subject: str, expires: float) -> None:
        """Kept until its expiry; when the dict is full the oldest entry goes (expired or
        not: `cached` drops an expired one it meets), so a full cache costs no scan."""
        if len(self._verified) >= self.cache_size:
            del self._verified[next(iter(self._verified))]
        self._verified[token] = (subject, expires)

    def _due(self) -> bool:
        return self._asked is None or self._clock() - self._asked >= self.retry

    async def keep_trying(self) -> None:
        """Ask the issuer for its keys until it answered: at start-up, in the background, so
        that the first token finds them and an issuer that is down is said at once."""
        while self._keys is None:
            try:
                await self._current_keys()
            except IssuerUnavailableError:
                await asyncio.sleep(max(self.retry, 1.0))

    async def _current_keys(self) -> IssuerKeys:
        if self._keys is not None:
            return self._keys
        async with self._lock:
            if self._keys is None and self._due():
                await self._load()
            if self._keys is None:
                raise IssuerUnavailableError(  # why it failed is logged, not told the caller
                    f"the token issuer {self.issuer} has not answered yet: the token cannot"
                    " be checked; retry later"
                )
            return self._keys

    async def _refetched(self, held: IssuerKeys) -> IssuerKeys:
        """The issuer's keys fetched again for a key id they lack, unless fetched within the
        last `retry` seconds (then those held, or those another call fetched meanwhile)."""
        async with self._lock:
            if self._keys is held and self._due():
                await self._load()
            return self._keys or held

    async def _load(self) -> None:
        """Discovery (until it answered once), then the keys. On failure the keys held stay
        and the reason is kept; the issuer is asked again after `retry` seconds."""
        self._asked = self._clock()
        try:
            if self._jwks_uri is None:
                self._jwks_uri = self._jwks_uri_of(
                    await self._fetch(discovery_url(self.rules.issuer))
                )
            keys = IssuerKeys(await self._fetch(self._jwks_uri))
        except (httpx.HTTPError, ValueError, TokenError, RecursionError) as exc:
            self._why = str(exc) or type(exc).__name__
            log.warning("the token issuer %s: %s", self.issuer, self._why)
            return
        if self._keys is None:
            log.info(
                "the token issuer %s answered: %d signing key(s)", self.rules.issuer, len(keys)
            )
        self._keys = keys

    def _jwks_uri_of(self, discovery: Any) -> str:
        if not isinstance(discovery, dict):
            raise ValueError("its discovery document is not a JSON object")
        if discovery.get("issuer") != self.rules.issuer:
            raise ValueError(
                f"its discovery document names another issuer: {discovery.get('issuer')!r}"
            )
        uri = discovery.get("jwks_uri")
        if not isinstance(uri, str) or not _fit_for_keys(uri, self.rules.issuer):
            raise ValueError(
                f"its discovery document names no usable jwks_uri: {str(uri)[:200]!r} (https,"
                " or the issuer's own origin)"
            )
        return uri

    async def _get(self, url: str) -> Any:
        if self._http is None:
            self._http = httpx.AsyncClient(timeout=httpx.Timeout(5.0, connect=2.0))
        response = await self._http.get(url, headers={"Accept": "application/json"})
        response.raise_for_status()
        if len(response.content) > MAX_DOCUMENT_BYTES:
            raise ValueError(f"{url} answered more than {MAX_DOCUMENT_BYTES} bytes")
        return json.loads(response.content)

    async def aclose(self) -> None:
        if self._http is not None:
            await self._http.aclose()
            self._http = None
