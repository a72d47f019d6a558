"""Trust between agents: identities, signatures, the trust list.

    agent_trust.py  one agent's identity (it signs) and trust list (it verifies)
    keys.py       an agent's Ed25519 keys (rotation, retirement) and where they are kept
    canonical.py  RFC 8785 canonical JSON: the bytes that are signed
    signing.py    detached JWS with joserfc (kid required, EdDSA, typed), signed statements
    card.py       A2A 1.0 agent card signatures (verifiable by the official SDK)
    trustlist.py  the agents whose handoffs are accepted, their principals and keys (TOFU)

Invariants: no cryptography by hand (joserfc, cryptography); nothing unsigned or signed by an
unknown key verifies; no key is ever fetched from a URL a message named — only from the
addresses this agent was configured with. I/O is injected (an `IdentityStore`, a JWKS
fetcher): this room imports only the protocol and the leaves.

This file imports nothing: `trust.canonical` is light, and reaching it must not load joserfc.
"""
