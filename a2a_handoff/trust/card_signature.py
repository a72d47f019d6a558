"""Agent card signatures, as A2A 1.0 defines them (§8.4): a JWS over the canonical card.

The payload is the card without `signatures`, canonicalized with RFC 8785 after empty values
(`""`, `[]`, `{}`) are left out, as the official SDKs do before verifying (the spec's text
keeps some empty REQUIRED members; A2A#2122 tracks the disagreement): so a card this library
signs verifies with the official `a2a-sdk` verifier too. The protected header names the key
(`kid`), the algorithm (`EdDSA`), `typ: JOSE` and the JWKS URL (`jku`) — which a verifier here
never fetches: the keys come from the trust list.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from joserfc.jwk import OKPKey

from a2a_handoff.canonical import canonical
from a2a_handoff.errors import SignatureError
from a2a_handoff.trust.signing import CARD_TYP, CARD_TYPS, sign_detached, verify_detached


def _clean(value: Any) -> Any:
    """`value` without empty strings, lists and objects (None: nothing left)."""
    if isinstance(value, dict):
        cleaned = {k: c for k, v in value.items() if (c := _clean(v)) is not None}
        return cleaned or None
    if isinstance(value, list):
        items = [c for v in value if (c := _clean(v)) is not None]
        return items or None
    if value == "" and isinstance(value, str):
        return None
    return value


def card_payload(card: Mapping[str, Any]) -> bytes:
    """What a card's signatures sign: the canonical card, without `signatures` or empties."""
    body = {k: v for k, v in card.items() if k != "signatures"}
    return canonical(_clean(body) or {})


def sign_card(card: Mapping[str, Any], key: OKPKey, jku: str) -> dict[str, Any]:
    """The card (its ProtoJSON dict) with a signature by `key` added to `signatures`."""
    token = sign_detached(card_payload(card), key, CARD_TYP, jku=jku)
    protected, _, signature = token.split(".")
    signatures = [*card.get("signatures", []), {"protected": protected, "signature": signature}]
    return {**card, "signatures": signatures}


def verify_card(card: Mapping[str, Any], keys: Mapping[str, OKPKey]) -> str:
    """The kid of a signature of `card` made by one of `keys`; SignatureError when none is."""
    signatures = card.get("signatures")
    if not isinstance(signatures, list) or not signatures:
        raise SignatureError("the card is not signed")
    payload = card_payload(card)
    problems = []
    for entry in signatures:
        if not isinstance(entry, Mapping):
            continue
        token = f"{entry.get('protected')}..{entry.get('signature')}"
        try:
            header = verify_detached(token, payload, keys, CARD_TYPS)
        except SignatureError as exc:
            problems.append(str(exc))
            continue
        return str(header["kid"])
    raise SignatureError("no signature of the card verifies: " + "; ".join(problems))
