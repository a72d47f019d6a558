"""Test helpers for signed handoffs: a signing identity the tests hold, trusted by the
agents under test through a pinned key, and envelopes signed (or forged) with it."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from joserfc.jwk import OKPKey

from a2a_handoff.canonical import canonical
from a2a_handoff.handoff.envelope import HandoffEnvelope
from a2a_handoff.protocol.extension import HANDOFF_EXTENSION_URI as URI
from a2a_handoff.protocol.extension import SIGNATURE_KEY
from a2a_handoff.trust.keys import Identity
from a2a_handoff.trust.signing import ENVELOPE_TYP, sign_detached
from a2a_handoff.trust.trustlist import TrustedAgent


def as_dict(env: HandoffEnvelope | Mapping[str, Any]) -> dict[str, Any]:
    return env.dump() if isinstance(env, HandoffEnvelope) else dict(env)


def sign_with(key: OKPKey, env: HandoffEnvelope | Mapping[str, Any]) -> str:
    return sign_detached(canonical(as_dict(env)), key, ENVELOPE_TYP)


class Signer:
    """An agent identity the test holds (default: agent `tests`)."""

    def __init__(self, name: str = "tests", url: str = "http://tests/") -> None:
        self.name = name
        self.url = url
        self.identity = Identity.generate(name)

    @property
    def key(self) -> OKPKey:
        return self.identity.signing_key

    def sign(self, env: HandoffEnvelope | Mapping[str, Any]) -> str:
        return sign_with(self.key, env)

    def metadata(self, env: HandoffEnvelope | Mapping[str, Any], **extra: Any) -> dict[str, Any]:
        """`message.metadata` carrying the envelope (with `extra` members) and its signature."""
        body = {**as_dict(env), **extra}
        return {URI: body, SIGNATURE_KEY: self.sign(body)}

    def trusted(self, **options: Any) -> TrustedAgent:
        """This signer as a trust-list entry with its key pinned (never fetched)."""
        return TrustedAgent(self.name, self.url, pinned=self.identity.public_keys, **options)

    def trust_file(self, path: Path, **options: Any) -> Path:
        """A trust file naming this signer with its key pinned; `--trust-file PATH`."""
        jwk = self.identity.jwks()["keys"][0]
        entry = {"name": self.name, "url": self.url, "key": jwk, **options}
        path.write_text(json.dumps({"agents": [entry]}))
        return path


def stolen_identity(db: Path) -> Identity:
    """The identity an agent keeps beside its SQLite file `db` (read as an attacker would)."""
    return Identity.from_document(db.with_name(db.stem + ".keys.json").read_text())
