"""Optional authentication: API keys or bearer tokens mapped to principals.

Off by default. When on, every JSON-RPC call must carry `X-API-Key: KEY` or
`Authorization: Bearer KEY`; the principal the key maps to owns the tasks it creates.
Keys are compared by their SHA-256 digests and never appear in logs or errors.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from a2a_handoff.errors import HandoffError
from a2a_handoff.protocol.agent_card import (
    ApiKeySecurityScheme,
    HttpAuthSecurityScheme,
    SecurityRequirement,
    SecurityScheme,
    StringList,
)
from a2a_handoff.secrets import read_private

API_KEY_HEADER = "X-API-Key"
ENV_VAR = "A2A_API_KEYS"


def _digest(secret: str) -> bytes:
    return hashlib.sha256(secret.encode()).digest()


def parse_keys(text: str) -> dict[str, str]:
    """`principal=key` pairs, one per line or comma-separated; `#` starts a comment."""
    keys: dict[str, str] = {}
    for raw in text.replace(",", "\n").splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        principal, sep, secret = line.partition("=")
        if not sep or not principal.strip() or not secret.strip():
            raise HandoffError("an API key entry must read principal=key")
        if not principal.strip().isprintable():  # stored owners use a control character
            raise HandoffError("an API key's principal holds a control character")
        keys[principal.strip()] = secret.strip()
    if not keys:
        raise HandoffError("no API keys given")
    return keys


@dataclass(frozen=True, slots=True)
class ApiKeyAuth:
    """Maps presented keys to principals."""

    _principals: Mapping[bytes, str]
    _names: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        object.__setattr__(self, "_names", frozenset(self._principals.values()))

    @classmethod
    def from_keys(cls, keys: Mapping[str, str]) -> ApiKeyAuth:
        """From a principal → key mapping."""
        return cls({_digest(secret): principal for principal, secret in keys.items()})

    @classmethod
    def from_file(cls, path: str | Path) -> ApiKeyAuth:
        return cls.from_keys(parse_keys(read_private(Path(path), "--auth-keys")))

    @classmethod
    def from_env(cls, var: str = ENV_VAR) -> ApiKeyAuth:
        value = os.environ.get(var)
        if not value:
            raise HandoffError(f"environment variable {var} is empty")
        return cls.from_keys(parse_keys(value))

    def authenticate(self, headers: Mapping[str, str]) -> str | None:
        """The principal the request's credentials name, or None."""
        secret = headers.get(API_KEY_HEADER.lower()) or headers.get(API_KEY_HEADER)
        if not secret:
            authorization = headers.get("authorization") or headers.get("Authorization") or ""
            scheme, _, token = authorization.partition(" ")
            if scheme.lower() == "bearer":
                secret = token.strip()
        if not secret:
            return None
        return self.lookup(secret)

    def lookup(self, secret: str) -> str | None:
        """The principal a presented key names, or None."""
        return self._principals.get(_digest(secret))

    def names(self, principal: str) -> bool:
        """Whether `principal` is the name of one of these keys."""
        return principal in self._names

    @staticmethod
    def security_schemes() -> dict[str, SecurityScheme]:
        return {
            "apiKey": SecurityScheme(
                api_key_security_scheme=ApiKeySecurityScheme(
                    location="header", name=API_KEY_HEADER, description="An API key"
                )
            ),
            "bearer": SecurityScheme(
                http_auth_security_scheme=HttpAuthSecurityScheme(
                    scheme="Bearer", description="The same API key as a bearer token"
                )
            ),
        }

    @staticmethod
    def security_requirements() -> list[SecurityRequirement]:
        """Either scheme is enough."""
        return [
            SecurityRequirement(schemes={"apiKey": StringList()}),
            SecurityRequirement(schemes={"bearer": StringList()}),
        ]
