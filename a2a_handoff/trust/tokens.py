"""Bearer tokens (JWT, RFC 7519; access tokens, RFC 9068) checked against an issuer's keys.

Pure: the issuer's JWKS is given, nothing is fetched here. What a token says of itself is
trusted only for choosing among the issuer's keys (`kid`), the algorithm (`alg`, which must
be one of RS256, ES256, EdDSA and fit the key) and its type (`typ`): a token naming a key
or a key's address (`jwk`, `jku`, `x5u`, `x5c`), or critical extensions, is refused before
any signature is checked; `none` and the HMAC algorithms are never accepted, so a public
key can never be used as a shared secret. `iss` must be the issuer, `aud` name the audience,
`exp` be present; `exp` and `nbf` are checked with a leeway of at most 60 seconds.
"""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from joserfc import jws
from joserfc.errors import JoseError, SecurityWarning
from joserfc.jwk import ECKey, JWKRegistry, OKPKey, RSAKey
from joserfc.jws import JWSRegistry
from joserfc.util import urlsafe_b64decode

from a2a_handoff.errors import TrustError

ALGORITHMS = ("RS256", "ES256", "EdDSA")
TYPES = (None, "JWT", "at+jwt", "application/at+jwt")  # RFC 9068 §2.1: at+jwt preferred
MAX_LEEWAY = 60.0
MAX_TOKEN_BYTES = 16 * 1024
_FORBIDDEN_HEADERS = ("jwk", "jku", "x5u", "x5c", "crit")
_KEY_TYPE = {"RS256": "RSA", "ES256": "EC", "EdDSA": "OKP"}
_REGISTRY = JWSRegistry(algorithms=list(ALGORITHMS))

# joserfc warns on every use of the name "EdDSA" (RFC 9864 prefers "Ed25519"); issuers still
# sign with that name. Narrow: that message only.
warnings.filterwarnings("ignore", message="EdDSA is deprecated", category=SecurityWarning)

Key = RSAKey | ECKey | OKPKey


class TokenError(TrustError):
    """A bearer token refused; the message says why, in words fit for its bearer."""


class UnknownKeyError(TokenError):
    """The token names a key (`kid`) the issuer's JWKS, as last fetched, does not hold."""


@dataclass(frozen=True, slots=True)
class TokenRules:
    """What a token must say: its issuer, its audience, the leeway on its times."""

    issuer: str
    audience: str
    leeway: float = MAX_LEEWAY

    def __post_init__(self) -> None:
        if not 0 <= self.leeway <= MAX_LEEWAY:
            raise ValueError(f"a token's leeway is 0 to {MAX_LEEWAY:.0f} seconds")


@dataclass(frozen=True, slots=True)
class VerifiedToken:
    """A token whose signature, issuer, audience and times were checked."""

    subject: str
    expires: float  # `exp`, seconds since the epoch
    claims: Mapping[str, Any]


class IssuerKeys:
    """An issuer's signing keys, from its JWKS document: the keys fit to verify a signature
    (`use` absent or `sig`), by `kid`; a key that cannot be read is left out."""

    def __init__(self, jwks: Mapping[str, Any]) -> None:
        self.keys: dict[str, Key] = {}
        entries = jwks.get("keys") if isinstance(jwks, Mapping) else None
        if not isinstance(entries, list):
            raise TokenError("the issuer's JWKS has no keys list")
        for entry in entries:
            if not isinstance(entry, dict) or not isinstance(entry.get("kid"), str):
                continue
            if entry.get("use", "sig") != "sig" or "d" in entry:
                continue  # an encryption key, or one leaking its private part: not used
            try:
                key = JWKRegistry.import_key(entry)
            except (JoseError, ValueError, TypeError):
                continue
            if isinstance(key, RSAKey | ECKey | OKPKey):
                self.keys[entry["kid"]] = key

    def __len__(self) -> int:
        return len(self.keys)


def header_of(token: str) -> dict[str, Any]:
    """The token's protected header, checked: what it may say and nothing more. Raises
    TokenError."""
    if len(token) > MAX_TOKEN_BYTES:
        raise TokenError("the token is too long")
    parts = token.split(".")
    if len(parts) != 3 or not parts[0] or not parts[1]:
        raise TokenError("not a JWT (header.payload.signature)")
    try:
        header = json.loads(urlsafe_b64decode(parts[0].encode("ascii")))
    except (ValueError, UnicodeError, RecursionError) as exc:  # nested past the parser's depth
        raise TokenError("the token's header is not base64url JSON") from exc
    if not isinstance(header, dict):
        raise TokenError("the token's header is not a JSON object")
    named = [name for name in _FORBIDDEN_HEADERS if name in header]
    if named:
        raise TokenError(f"the token names its own key or extensions ({', '.join(named)})")
    alg = header.get("alg")
    if alg not in ALGORITHMS:
        raise TokenError(f"algorithm {str(alg)[:20]!r} is not accepted ({', '.join(ALGORITHMS)})")
    if header.get("typ") not in TYPES:
        raise TokenError(f"token type {str(header.get('typ'))[:30]!r} is not accepted")
    if not isinstance(header.get("kid"), str):
        raise TokenError("the token names no key id (kid)")
    if not parts[2]:
        raise TokenError("the token is not signed")
    return header


def verify(token: str, keys: IssuerKeys, rules: TokenRules, now: float) -> VerifiedToken:
    """The token, verified against the issuer's `keys` and `rules` at `now` (seconds since
    the epoch). Raises UnknownKeyError for a `kid` not in `keys`, TokenError otherwise."""
    header = header_of(token)
    key = keys.keys.get(header["kid"])
    if key is None:
        raise UnknownKeyError("the token is signed by a key the issuer does not publish")
    alg = header["alg"]
    if key.key_type != _KEY_TYPE[alg] or key.get("alg", alg) != alg:
        raise TokenError(f"the issuer's key {header['kid'][:40]!r} is not for {alg}")
    try:
        signed = jws.deserialize_compact(token, key, algorithms=[alg], registry=_REGISTRY)
    except (JoseError, ValueError) as exc:
        raise TokenError("the token's signature does not verify") from exc
    try:
        claims = json.loads(signed.payload)
    except (ValueError, RecursionError) as exc:
        raise TokenError("the token's claims are not JSON") from exc
    if not isinstance(claims, dict):
        raise TokenError("the token's claims are not a JSON object")
    return VerifiedToken(_subject(claims), _check_claims(claims, rules, now), claims)


def _subject(claims: Mapping[str, Any]) -> str:
    subject = claims.get("sub")
    if not isinstance(subject, str) or not subject or len(subject) > 256:
        raise TokenError("the token names no subject (sub)")
    if not subject.isprintable():  # a principal holds no control character (stored owners)
        raise TokenError("the token's subject holds a control character")
    return subject


def _check_claims(claims: Mapping[str, Any], rules: TokenRules, now: float) -> float:
    """`iss`, `aud`, `exp` and `nbf` checked; the expiry returned."""
    if claims.get("iss") != rules.issuer:
        raise TokenError("the token is from another issuer")
    audience = claims.get("aud")
    audiences = audience if isinstance(audience, list) else [audience]
    if rules.audience not in audiences:
        raise TokenError(f"the token is not for this agent (audience {rules.audience!r})")
    expires = _time(claims, "exp")
    if expires is None:
        raise TokenError("the token has no expiry (exp)")
    if now > expires + rules.leeway:
        raise TokenError("the token has expired")
    not_before = _time(claims, "nbf")
    if not_before is not None and now < not_before - rules.leeway:
        raise TokenError("the token is not valid yet (nbf)")
    return expires


def _time(claims: Mapping[str, Any], name: str) -> float | None:
    value = claims.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise TokenError(f"the token's {name} is not a time")
    return float(value)
