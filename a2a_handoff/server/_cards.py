"""The cards an app serves: the agent's own, made to say what the app does — the schemes
it authenticates with (API keys, an OpenID Connect issuer, mutual TLS), the extended card
it has, the contracts it accepts, push notifications."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from a2a_handoff.protocol.agent_card import AgentCard
from a2a_handoff.protocol.extension import HANDOFF_EXTENSION_URI
from a2a_handoff.push import PushSettings
from a2a_handoff.server._authentication import Authentication

if TYPE_CHECKING:  # imported when contracts are used: jsonschema is slow to import
    from a2a_handoff.contracts.catalog import Catalog


def served_cards(
    card: AgentCard,
    extended: AgentCard | None,
    auth: Authentication | None,
    contracts: Catalog | None,
    push: PushSettings | None,
) -> tuple[AgentCard, AgentCard | None]:
    """The public card and the extended one as served: naming the auth scheme, declaring the
    extended card, listing the contracts this agent accepts, declaring push notifications."""
    if auth is not None and not card.security_schemes:
        card = card.model_copy(
            update={
                "security_schemes": auth.security_schemes(),
                "security_requirements": auth.security_requirements(),
            }
        )
    if extended is not None:
        card = _declaring_extended(card)
        extended = _declaring_extended(extended)
        if auth is not None and not extended.security_schemes:
            extended = extended.model_copy(
                update={
                    "security_schemes": card.security_schemes,
                    "security_requirements": card.security_requirements,
                }
            )
    if contracts is not None:
        accepted = contracts.accepted_by(card.name)
        card = _with_contracts(card, accepted)
        if extended is not None:
            extended = _with_contracts(extended, accepted)
    if push is not None:
        capabilities = card.capabilities.model_copy(update={"push_notifications": True})
        card = card.model_copy(update={"capabilities": capabilities})
    return card, extended


def _with_contracts(card: AgentCard, accepted: list[dict[str, Any]]) -> AgentCard:
    """The card with the handoff extension listing the contracts this agent accepts."""
    extensions = []
    for ext in card.capabilities.extensions or []:
        if ext.uri == HANDOFF_EXTENSION_URI:
            ext = ext.model_copy(update={"params": {**(ext.params or {}), "contracts": accepted}})
        extensions.append(ext)
    capabilities = card.capabilities.model_copy(update={"extensions": extensions})
    return card.model_copy(update={"capabilities": capabilities})


def _declaring_extended(card: AgentCard) -> AgentCard:
    """The card declaring `capabilities.extendedAgentCard`."""
    capabilities = card.capabilities.model_copy(update={"extended_agent_card": True})
    return card.model_copy(update={"capabilities": capabilities})
