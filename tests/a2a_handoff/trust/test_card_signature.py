"""Agent card signatures: ours verify with ours and with the official SDK, and back."""

from __future__ import annotations

import copy
import json
from typing import Any

import jwt
import pytest
from a2a.client.card_resolver import parse_agent_card
from a2a.utils.signing import (
    ProtectedHeader,
    _canonicalize_agent_card,
    create_agent_card_signer,
    create_signature_verifier,
)

from a2a_handoff.errors import SignatureError
from a2a_handoff.protocol.agent_card import build_card, skill
from a2a_handoff.trust.card_signature import card_payload, sign_card, verify_card
from a2a_handoff.trust.keys import Identity

JKU = "http://127.0.0.1:9/.well-known/jwks.json"


def card() -> dict[str, Any]:
    made = build_card(
        "billing",
        "http://127.0.0.1:9/",
        description="Remboursements — ünïcode",
        skills=[skill("refund", "Refund a charge", "billing")],
        capabilities=["refunds"],
    )
    body = made.dump()
    body["capabilities"]["extensions"][0]["params"]["jwks"] = JKU
    body["capabilities"]["extensions"][0]["params"]["limits"] = {"hops": 8, "ratio": 0.5}
    return body


def sdk_verify(signed: dict[str, Any], identity: Identity) -> None:
    jwks = {k["kid"]: k for k in identity.jwks()["keys"]}

    def key_provider(kid: str | None, jku: str | None) -> jwt.PyJWK:
        if kid is None or jku != JKU:
            raise jwt.PyJWTError("untrusted")
        return jwt.PyJWK(jwks[kid])

    verifier = create_signature_verifier(key_provider, algorithms=["EdDSA"])
    verifier(parse_agent_card(copy.deepcopy(signed)))


def test_our_signed_card_verifies_with_ours_and_the_sdk() -> None:
    identity = Identity.generate("billing")
    signed = sign_card(card(), identity.signing_key, JKU)
    assert verify_card(signed, identity.public_keys) == identity.signing_key.kid
    sdk_verify(json.loads(json.dumps(signed)), identity)


def test_our_payload_is_the_sdk_canonical_form() -> None:
    body = card()
    sdk = _canonicalize_agent_card(parse_agent_card(copy.deepcopy(body))).encode()
    assert card_payload(body) == sdk


def test_a_card_the_sdk_signed_verifies_with_ours() -> None:
    identity = Identity.generate("billing")
    jwk = identity.signing_key.as_dict(private=True)
    signer = create_agent_card_signer(
        jwt.PyJWK(jwk), ProtectedHeader(kid=identity.signing_key.kid, alg="EdDSA", jku=JKU)
    )
    proto = signer(parse_agent_card(card()))
    from google.protobuf.json_format import MessageToDict

    assert verify_card(MessageToDict(proto), identity.public_keys)


def test_a_changed_or_unsigned_card_does_not_verify() -> None:
    identity = Identity.generate("billing")
    signed = sign_card(card(), identity.signing_key, JKU)
    with pytest.raises(SignatureError):
        verify_card({**signed, "description": "another agent"}, identity.public_keys)
    with pytest.raises(SignatureError, match="not signed"):
        verify_card(card(), identity.public_keys)
    other = Identity.generate("mallory")
    with pytest.raises(SignatureError):
        verify_card(sign_card(card(), other.signing_key, JKU), identity.public_keys)


def test_every_active_key_signs_across_a_rotation() -> None:
    old = Identity.generate("billing")
    new = old.rotated()
    signed = card()
    for entry in new.active:
        signed = sign_card(signed, entry.key, JKU)
    # A verifier that pinned only the old key still verifies the rotated card.
    assert verify_card(signed, old.public_keys) == old.signing_key.kid
    assert verify_card(signed, {new.signing_key.kid: new.public_keys[new.signing_key.kid]})
