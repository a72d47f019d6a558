"""Trust between agents: identities, signatures, the trust list.

    agent_trust.py     one agent's identity (it signs) and trust list (it verifies)
    keys.py            an agent's Ed25519 keys (rotation, retirement) and where they are kept
    signing.py         detached JWS with joserfc (kid required, EdDSA, typed), signed statements
    card_signature.py  A2A 1.0 agent card signatures (verifiable by the official SDK)
    trustlist.py       the agents whose handoffs are accepted, their principals and keys (TOFU)

Invariants: no cryptography by hand (joserfc, cryptography); nothing unsigned or signed by an
unknown key verifies; no key is ever fetched from a URL a message named — only from the
addresses this agent was configured with. I/O is injected (an `IdentityStore`, a JWKS
fetcher): this room imports only the protocol and the leaves (`a2a_handoff.canonical`: the
bytes that are signed).
"""

from a2a_handoff.trust.agent_trust import AgentTrust
from a2a_handoff.trust.keys import (
    ENV_VAR,
    NO_KEYS_IN_SHARED_STORE,
    EnvIdentity,
    Identity,
    IdentityStore,
    KeyFile,
    load_or_create,
    own_identity,
)
from a2a_handoff.trust.trustlist import TrustedAgent, TrustList, load_trust_file, parse_trust

__all__ = [
    "ENV_VAR",
    "NO_KEYS_IN_SHARED_STORE",
    "AgentTrust",
    "EnvIdentity",
    "Identity",
    "IdentityStore",
    "KeyFile",
    "TrustList",
    "TrustedAgent",
    "load_or_create",
    "load_trust_file",
    "own_identity",
    "parse_trust",
]
