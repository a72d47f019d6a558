"""Who an app trusts and who decides there: its keys and trust list, its operators.

The agent's routes are on its trust list (the route its escalations go to may sign
operators' decisions), with the agents `TrustConfig.trusted` adds; the keys it pins for them
are kept beside its key file, so a restart keeps them. Under API-key auth only the named
operators decide escalations; a human agent under auth with no operator does not start.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping

from a2a_handoff.client.client import AgentClient
from a2a_handoff.errors import TrustError
from a2a_handoff.escalation import EscalationPolicy
from a2a_handoff.protocol.agent_card import AgentCard
from a2a_handoff.server._authentication import Authentication
from a2a_handoff.server.app_config import TrustConfig
from a2a_handoff.stores.base import Store
from a2a_handoff.trust.agent_trust import AgentTrust
from a2a_handoff.trust.keys import NO_KEYS_IN_SHARED_STORE, IdentityStore, KeyFile
from a2a_handoff.trust.pins import MemoryPins, PinFile, Pins
from a2a_handoff.trust.trustlist import TrustedAgent, TrustList

log = logging.getLogger("a2a_handoff.server")

HUMAN_CAPABILITY = "escalations"  # what a human agent's card offers


def operators_of(
    card: AgentCard, auth: Authentication | None, operators: Iterable[str]
) -> frozenset[str] | None:
    """Who decides escalations here: the named operators under authentication, API keys or
    client certificates (None: none, whoever reaches the agent). A human agent under auth
    with no operator is refused: nobody could answer it, and anyone else answering would be
    a user deciding for an operator."""
    if auth is None:
        if HUMAN_CAPABILITY in card.offered:
            log.warning(
                "INSECURE: %s keeps escalations without API keys: anyone who can reach it"
                " answers them (approvals included); turn auth on and name operators",
                card.name,
            )
        return None
    named = frozenset(operators)
    if HUMAN_CAPABILITY in card.offered and not named:
        raise ValueError(
            f"{card.name} keeps escalations under API-key auth but names no operators: nobody"
            " could answer them. Name the principals that decide (operators=[...],"
            " --operators alice,bob): only they approve, deny or answer."
        )
    return named


class _NoKeys:
    """The identity of an agent given no keys, on a store that keeps none (a shared one):
    refused when the agent starts."""

    async def load_identity(self, agent: str) -> str | None:
        raise TrustError(NO_KEYS_IN_SHARED_STORE)

    async def save_identity(self, agent: str, document: str, expected: str | None) -> bool:
        raise TrustError(NO_KEYS_IN_SHARED_STORE)


def _pins(identity: IdentityStore | None, store: Store) -> Pins:
    """Where this agent keeps the keys it pinned: beside its key file (given, or the one its
    store keeps its keys in: SQLite's), so a restart keeps them; in memory for an agent with
    no key file."""
    kept = store.capabilities.identity
    key_file = identity if isinstance(identity, KeyFile) else kept
    if isinstance(key_file, KeyFile):
        return PinFile.beside(key_file.path)
    if kept is None:  # a store that keeps no keys (a shared one): they come from elsewhere
        log.warning(
            "INSECURE: this agent has no key file (its keys come from $A2A_AGENT_KEY), so the"
            " keys it pins for the agents it trusts last only until it restarts: give it"
            " --key-file PATH to keep them"
        )
    return MemoryPins()


def agent_trust_of(
    card: AgentCard,
    store: Store,
    client: AgentClient,
    trust: TrustConfig,
    routes: Mapping[str, str],
    escalation: EscalationPolicy | None,
) -> AgentTrust:
    """This agent's keys and trust list: its routes (the one escalations go to may sign
    operators' decisions) and the agents `trust` names. The client verifies with it too,
    unless it was given one of its own."""
    approver = (escalation or EscalationPolicy()).target
    trusted = [TrustedAgent(name, url, approvals=name == approver) for name, url in routes.items()]
    trusted += trust.trusted_agents()
    trust_list = TrustList(
        trusted,
        client.jwks,
        max_age=trust.trusted_max_age,
        min_refresh=min(2.0, trust.trusted_max_age),
        pins=_pins(trust.identity, store),
    )
    if client.trust is None:
        client.trust = trust_list
    identity = trust.identity or store.capabilities.identity or _NoKeys()
    return AgentTrust(card.name, identity, trust_list, reload_every=trust.keys_reload)
