"""How one agent hands tasks off: its name and URL, its routes, its limits."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from a2a_handoff.protocol.extension import DEFAULT_MAX_HOPS, DEFAULT_TTL_SECONDS

if TYPE_CHECKING:  # imported when contracts are used: jsonschema is slow to import
    from a2a_handoff.contracts.catalog import Catalog


@dataclass(frozen=True, slots=True)
class HandoffSettings:
    """How one agent hands tasks off."""

    agent_name: str
    agent_url: str
    routes: Mapping[str, str] = field(default_factory=dict)
    scope: frozenset[str] | None = None  # None: this agent may delegate any capability
    max_hops: int = DEFAULT_MAX_HOPS
    ttl_seconds: int = DEFAULT_TTL_SECONDS
    recovery_interval: float = 2.0
    retry_interval: float = 0.5
    contracts: Catalog | None = None  # enforced when set (see a2a_handoff.contracts)
    decision_ttl: float = 900.0  # seconds an operator's signed decision approves anything
    return_give_up: float | None = None  # seconds a return is retried (None: the TTL)
    # Every URL this agent answers at (its card's interfaces, as `same_url` writes them): an
    # envelope must name one.
    own_urls: frozenset[str] = frozenset()

    def addressed_here(self, address: str) -> bool:
        """Whether an envelope's `target.url` (a URL, or several comma-separated: replicas)
        names this agent: one of its URLs, not merely its name."""
        mine = self.own_urls or {same_url(self.agent_url)}
        return any(same_url(u) in mine for u in address.split(",") if u.strip())


@functools.lru_cache(maxsize=64)  # every handoff received compares its target's URL
def same_url(url: str) -> str:
    """A URL compared as an address: scheme and host in lower case, the default port and a
    trailing slash dropped."""
    parts = urlsplit(url.strip())
    host = (parts.hostname or "").lower()
    port = parts.port
    if port is not None and (parts.scheme.lower(), port) not in (("http", 80), ("https", 443)):
        host = f"{host}:{port}"
    return f"{parts.scheme.lower()}://{host}{parts.path.rstrip('/')}"
