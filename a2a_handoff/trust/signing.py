"""Detached JWS (RFC 7515, compact, Appendix F) over canonical bytes, with joserfc.

One algorithm: Ed25519, named `EdDSA` in headers (the name PyJWT — and so the official A2A
SDK — knows); `Ed25519` (RFC 9864) is accepted when verifying. Every signature names its key
(`kid`): a signature without one is refused, even against a single key (joserfc would accept
it). `typ` separates what was signed — an envelope, a decision, a card — so a signature made
for one can never be presented as another. A `jku` or `jwk` in a header is never fetched or
used: the keys come from the trust list.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

from joserfc import jws
from joserfc.errors import JoseError, SecurityWarning
from joserfc.jwk import OKPKey
from joserfc.jws import JWSRegistry

from a2a_handoff.canonical import canonical
from a2a_handoff.errors import SignatureError

ALG = "EdDSA"
ALGORITHMS = ("EdDSA", "Ed25519")
ENVELOPE_TYP = "a2a-handoff-envelope+jws"
DECISION_TYP = "a2a-handoff-decision+jws"
KEY_TYP = "a2a-handoff-key+jws"  # a rotation statement: an agent's key vouching for its next
CARD_TYP = "JOSE"  # what A2A 1.0 §8.4.2 asks of card signatures (SHOULD)
CARD_TYPS = ("JOSE", "JWT", None)  # accepted on cards: the SDK writes "JWT", others none

# joserfc warns on every use of the name "EdDSA" (RFC 9864 prefers "Ed25519"); we keep the
# name the official SDK verifies, so this one warning is expected. Narrow: that message only.
warnings.filterwarnings("ignore", message="EdDSA is deprecated", category=SecurityWarning)

_REGISTRY = JWSRegistry(algorithms=list(ALGORITHMS))


def sign_detached(payload: bytes, key: OKPKey, typ: str, **header: str) -> str:
    """A detached compact JWS (`protected..signature`) of `payload` by `key`."""
    if key.kid is None or not key.is_private:
        raise SignatureError("signing needs a private key with a key id")
    protected: dict[str, Any] = {"alg": ALG, "typ": typ, "kid": key.kid, **header}
    try:
        token = jws.serialize_compact(protected, payload, key, registry=_REGISTRY)
    except JoseError as exc:
        raise SignatureError(f"cannot sign: {exc}") from None
    head, _, rest = token.partition(".")
    return f"{head}..{rest.rpartition('.')[2]}"


def verify_detached(
    token: Any, payload: bytes, keys: Mapping[str, OKPKey], typ: str | tuple[str | None, ...]
) -> dict[str, Any]:
    """The protected header of `token`, a valid signature of `payload` by one of `keys`
    (kid → public key) of type `typ` (or one of several); SignatureError otherwise."""
    if not isinstance(token, str) or token.count(".") != 2 or len(token) > 4096:
        raise SignatureError("the signature is not a detached compact JWS")
    if token.split(".")[1]:
        # joserfc would verify the payload the token carries and ignore `payload`: any one
        # signature seen with its envelope would then vouch for every other envelope.
        raise SignatureError("the signature carries a payload: not a detached JWS")
    try:
        obj = jws.extract_compact(token.encode(), payload, _REGISTRY)
        header = obj.headers()
    except (JoseError, ValueError, TypeError) as exc:
        raise SignatureError(f"the signature cannot be read: {exc}") from None
    kid = header.get("kid")
    if not isinstance(kid, str) or not kid:
        raise SignatureError("the signature names no key (kid)")
    accepted = (typ,) if isinstance(typ, str) else typ
    if header.get("typ") not in accepted:
        raise SignatureError(f"the signature is of type {header.get('typ')!r}, not {typ!r}")
    key = keys.get(kid)
    if key is None:
        raise SignatureError(f"unknown key id {kid!r}", unknown_kid=kid)
    try:
        valid = jws.validate_compact(obj, key, registry=_REGISTRY)
    except (JoseError, ValueError, TypeError) as exc:
        raise SignatureError(f"the signature does not verify: {exc}") from None
    if not valid:
        raise SignatureError(f"the signature does not verify with key {kid!r}")
    return dict(header)


def sign_claims(claims: Mapping[str, Any], key: OKPKey, typ: str) -> dict[str, Any]:
    """`{"claims": …, "signature": …}`: a statement others verify with `verify_claims`."""
    signature = sign_detached(canonical(dict(claims)), key, typ)
    return {"claims": dict(claims), "signature": signature}


def verify_claims(signed: Any, keys: Mapping[str, OKPKey], typ: str) -> tuple[dict[str, Any], str]:
    """The claims of a statement `sign_claims` made, and the kid that signed them."""
    if not isinstance(signed, Mapping) or not isinstance(signed.get("claims"), Mapping):
        raise SignatureError("not a signed statement")
    claims = dict(signed["claims"])
    header = verify_detached(signed.get("signature"), canonical(claims), keys, typ)
    return claims, str(header["kid"])
