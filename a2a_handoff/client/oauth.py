"""OAuth2 access tokens for calls to other agents: the client-credentials grant (RFC 6749 §4.4).

An `OAuth2Tokens` is a credential `AgentClient` presents as `Authorization: Bearer TOKEN`.
What holds:

- one token request at a time: calls that need a token while one is being asked for wait
  for that one (single flight), and share its token — or its error;
- a token is used until 60 s before it expires (`expires_in`; 300 s assumed when the
  endpoint says nothing); one that lives 60 s or less serves only the calls that waited for it;
- a target's 401 replaces the token once (`refresh(rejected)`): calls that saw the same token
  refused share one new token;
- a refused token request (the endpoint answered 4xx: a wrong secret, an unknown client or
  audience) is remembered for `refused_backoff` seconds: calls in between fail at once with
  the same error instead of asking again;
- the client secret and the tokens never appear in a log line, an error or a repr.

The client authenticates with HTTP Basic (`client_secret_basic`: the one method every
authorization server must accept, RFC 6749 §2.3.1). The request names the audience twice:
`audience` (the name most providers read) and, when it is an absolute URI, `resource`
(RFC 8707, which allows nothing else there). The token endpoint must be https — the request
carries the secret —, plain http only on a loopback address.
"""

from __future__ import annotations

import asyncio
import base64
import ipaddress
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import quote_plus, urlsplit

import httpx

from a2a_handoff.errors import ConfigError, TokenError
from a2a_handoff.secrets import read_private, read_secret

log = logging.getLogger("a2a_handoff.client.oauth")

EXPIRY_SKEW = 60.0  # seconds before its expiry a token is replaced, at the latest
DEFAULT_LIFETIME = 300.0  # seconds a token is taken to live when `expires_in` is missing
MAX_ANSWER = 64 * 1024  # bytes of a token endpoint's answer read, at most
OAUTH2_PREFIX = "oauth2:"
FIELDS = frozenset({"token_url", "client_id", "client_secret", "audience", "scope"})


class TokenSource(Protocol):
    """Bearer tokens for one set of agents: what `AgentClient` takes beside API keys."""

    async def token(self) -> str:
        """A token to present now."""

    async def refresh(self, rejected: str) -> str:
        """A token other than `rejected`, which a target refused (401)."""

    async def aclose(self) -> None:
        """Close what the source opened."""


def read_credential(value: str, what: str) -> str | OAuth2Tokens:
    """A credential as a command line names it: `oauth2:@FILE` (a `ClientCredentials` file:
    its tokens), else an API key's `@FILE` or `env:VAR` (`secrets.read_secret`)."""
    if value.startswith(OAUTH2_PREFIX):
        where = value[len(OAUTH2_PREFIX) :]
        if not where.startswith("@") or len(where) < 2:
            raise ConfigError(f"{what}: an OAuth2 client is named as oauth2:@FILE")
        return OAuth2Tokens(ClientCredentials.from_file(where[1:], what))
    return read_secret(value, what)


def check_token_url(url: str, what: str = "token_url") -> str:
    """`url` when a secret may be sent to it: https, or http on a loopback address."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.scheme not in ("https", "http") or not host:
        raise ConfigError(f"{what}: {url!r} is not an http(s) URL")
    if parts.username is not None or parts.password is not None or parts.fragment:
        raise ConfigError(f"{what}: a token URL carries no credentials and no fragment")
    if parts.scheme == "http" and not _loopback(host):
        raise ConfigError(
            f"{what}: {url} is plain http: the client secret would cross the network in"
            " clear; use https (plain http only on a loopback address)"
        )
    return url


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True, slots=True)
class ClientCredentials:
    """An OAuth2 client's registration: where to ask for tokens, as whom, for which audience."""

    token_url: str
    client_id: str
    client_secret: str = field(repr=False)
    audience: str
    scope: str | None = None

    def __post_init__(self) -> None:
        for name in ("token_url", "client_id", "client_secret", "audience"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value.strip():
                raise ConfigError(f"{name}: a non-empty string is needed")
        if self.scope is not None and (not isinstance(self.scope, str) or not self.scope):
            raise ConfigError("scope: a non-empty string of space-separated scopes, or none")
        check_token_url(self.token_url)

    @classmethod
    def from_file(cls, path: str | Path, what: str = "--credential") -> ClientCredentials:
        """Read from a JSON file only its owner can read (`secrets.check_private`):
        `{"token_url", "client_id", "client_secret", "audience"}`, `scope` optional."""
        path = Path(path)
        try:
            text = read_private(path, what)  # SecretError for a file others can read
        except OSError as exc:
            raise ConfigError(f"{what}: cannot read {path}: {exc.strerror or exc}") from None
        try:
            raw = json.loads(text)
        except ValueError:
            raise ConfigError(f"{what}: {path} is not JSON") from None
        if not isinstance(raw, dict):
            raise ConfigError(f"{what}: {path} must hold a JSON object")
        unknown = sorted(set(raw) - FIELDS)
        missing = sorted(FIELDS - {"scope"} - set(raw))
        if unknown or missing:
            said = [f"unknown {unknown}"] if unknown else []
            said += [f"missing {missing}"] if missing else []
            raise ConfigError(f"{what}: {path}: {', '.join(said)} (fields: {sorted(FIELDS)})")
        try:
            return cls(**raw)
        except ConfigError as exc:
            raise ConfigError(f"{what}: {path}: {exc}") from None


class OAuth2Tokens:
    """Access tokens by the client-credentials grant, cached (see the module docstring).

    `http`: the client token requests go through (one of its own when None, closed by
    `aclose`); `clock`: monotonic seconds (tests move it). `requests` counts the token
    requests made.
    """

    def __init__(
        self,
        credentials: ClientCredentials,
        *,
        http: httpx.AsyncClient | None = None,
        clock: Callable[[], float] = time.monotonic,
        refused_backoff: float = 30.0,
    ) -> None:
        self.credentials = credentials
        self.requests = 0
        self._http = http
        self._own_http = http is None
        self._clock = clock
        self._refused_backoff = refused_backoff
        self._lock = asyncio.Lock()
        self._token: str | None = None
        self._fresh_until = 0.0
        self._round = 0  # token requests finished: a waiter takes the outcome of a newer one
        self._error: TokenError | None = None  # the latest request's failure
        self._refused: tuple[float, TokenError] | None = None  # when, and the answer

    def __repr__(self) -> str:
        cc = self.credentials
        return f"OAuth2Tokens(client_id={cc.client_id!r}, token_url={cc.token_url!r})"

    async def token(self) -> str:
        token = self._token
        if token is not None and self._clock() < self._fresh_until:
            return token
        return await self._next(rejected=None)

    async def refresh(self, rejected: str) -> str:
        return await self._next(rejected=rejected)

    async def _next(self, rejected: str | None) -> str:
        seen = self._round
        async with self._lock:
            if self._round != seen:  # a request finished while this call waited: its outcome
                if self._error is not None:
                    raise self._error
                if self._token is not None and self._token != rejected:
                    return self._token
            token = self._token
            if token is not None and token != rejected and self._clock() < self._fresh_until:
                return token
            refused = self._refused
            if refused is not None and self._clock() - refused[0] < self._refused_backoff:
                raise refused[1]
            try:
                return await self._request()
            finally:
                self._round += 1

    async def _request(self) -> str:
        """One token request; the token kept, or the failure kept and raised."""
        self._token = None
        self._error = None
        self._refused = None
        self.requests += 1
        asked = self._clock()
        try:
            token, lifetime = await self._ask()
        except TokenError as exc:
            self._error = exc
            if exc.refused:
                self._refused = (self._clock(), exc)
            raise
        self._token = token
        self._fresh_until = asked + lifetime - EXPIRY_SKEW
        cc = self.credentials
        log.info("OAuth2 token for %s from %s: %g s", cc.client_id, cc.token_url, lifetime)
        return token

    async def _ask(self) -> tuple[str, float]:
        cc = self.credentials
        form = {"grant_type": "client_credentials", "audience": cc.audience}
        if _absolute_uri(cc.audience):
            form["resource"] = cc.audience
        if cc.scope:
            form["scope"] = cc.scope
        pair = f"{quote_plus(cc.client_id)}:{quote_plus(cc.client_secret)}"
        headers = {
            "Authorization": "Basic " + base64.b64encode(pair.encode()).decode(),
            "Accept": "application/json",
        }
        if self._http is None:
            self._http = httpx.AsyncClient(timeout=httpx.Timeout(10.0, connect=5.0))
        try:
            async with self._http.stream("POST", cc.token_url, data=form, headers=headers) as r:
                content = bytearray()
                async for chunk in r.aiter_bytes():
                    content += chunk
                    if len(content) > MAX_ANSWER:
                        raise self._error_for(f"answered more than {MAX_ANSWER} bytes")
                status = r.status_code
        except httpx.HTTPError as exc:
            raise self._error_for(f"unreachable ({type(exc).__name__})", refused=False) from None
        if status >= 500:
            raise self._error_for(f"answered HTTP {status}", refused=False)
        try:
            answer: Any = json.loads(content)
        except ValueError:
            answer = None
        if status != 200:
            raise self._error_for(f"refused: HTTP {status}{self._why(answer)}")
        return self._read(answer)

    def _read(self, answer: Any) -> tuple[str, float]:
        if not isinstance(answer, dict):
            raise self._error_for("answered HTTP 200 without a JSON object")
        token = answer.get("access_token")
        if not isinstance(token, str) or not token or not token.isprintable() or " " in token:
            raise self._error_for("answered without a usable access_token")
        kind = answer.get("token_type", "Bearer")
        if not isinstance(kind, str) or kind.lower() != "bearer":
            raise self._error_for(f"answered a token_type that is not Bearer: {kind!r:.40}")
        lifetime = answer.get("expires_in", DEFAULT_LIFETIME)
        try:
            lifetime = float(lifetime)
        except (TypeError, ValueError):
            lifetime = -1.0
        if not 0 < lifetime < 10**9:
            raise self._error_for("answered an expires_in that is not a positive number")
        return token, lifetime

    def _why(self, answer: Any) -> str:
        """The endpoint's own `error` and `error_description` (RFC 6749 §5.2), short, and
        never the secret (a server might echo what it was sent)."""
        if not isinstance(answer, dict):
            return ""
        said = " ".join(
            str(answer[k])[:200] for k in ("error", "error_description") if answer.get(k)
        )
        said = "".join(c if c.isprintable() else "?" for c in said)
        said = said.replace(self.credentials.client_secret, "***")
        return f" ({said})" if said else ""

    def _error_for(self, what: str, *, refused: bool = True) -> TokenError:
        cc = self.credentials
        return TokenError(
            f"OAuth2 token for client {cc.client_id!r}: the token endpoint {cc.token_url} {what}",
            refused=refused,
        )

    async def aclose(self) -> None:
        if self._own_http and self._http is not None:
            http, self._http = self._http, None
            await http.aclose()


def _absolute_uri(value: str) -> bool:
    """An absolute URI without a fragment: what RFC 8707 allows as a `resource`."""
    parts = urlsplit(value)
    return bool(parts.scheme) and bool(parts.netloc or parts.path) and not parts.fragment
