"""How one agent hands tasks off: its name and URL, its routes, its limits."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

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
