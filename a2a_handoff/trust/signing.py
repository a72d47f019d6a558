"""Detached JWS (RFC 7515, compact, Appendix F) over canonical bytes, with joserfc.

One algorithm: Ed25519, named `EdDSA` in headers (the name PyJWT — and so the official A2A
SDK — knows); `Ed25519` (RFC 9864) is accepted when verifying. Every signature names its key
(`kid`): a signature without one is refused, even against a single key (joserfc would accept
it). `typ` separates what was signed — an envelope, a decision, a card — so a signature made
for one can never be presented as another. A `jku` or `jwk` in a header is never fetched or
used: the keys come from the trust list.
"""

from __future__ import annotations

import binascii
import warnings
from collections.abc import Callable, Mapping
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric import ed448, ed25519
from joserfc import jws
from joserfc.errors import JoseError, SecurityWarning
from joserfc.jwk import OKPKey
from joserfc.jws import JWSRegistry
from joserfc.util import json_b64encode, urlsafe_b64decode

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

# What joserfc checks of a header and a key is the same on every call for the same header
# and key: it is done once, by joserfc, and its outcome kept. Signers (own keys, one header
# each) and verified headers (made by trusted keys only: cached after a signature verified)
# are few; a full cache is emptied, never grown.
_CACHE_MAX = 256
SIGNATURE_BYTES = 64  # an Ed25519 signature
Sign = Callable[[bytes], bytes]
Verify = Callable[[bytes, bytes], None]  # (signature, data): raises when it does not verify
_SIGNERS: dict[tuple[int, str, tuple[tuple[str, str], ...]], tuple[OKPKey, bytes, str, Sign]] = {}
_HEADERS: dict[str, dict[str, Any]] = {}  # protected segment → its header, checked by joserfc
_VERIFIERS: dict[tuple[int, str], tuple[OKPKey, Verify]] = {}  # (key, alg) → its verifier


def _sodium_signer(native: ed25519.Ed25519PrivateKey | ed448.Ed448PrivateKey) -> Sign:
    """What signs with `native` once joserfc checked it: libsodium (PyNaCl) for Ed25519 —
    the same signatures (RFC 8032's are deterministic) in two thirds of OpenSSL's time —
    and `cryptography` for Ed448, which libsodium lacks. Imported on first use."""
    if not isinstance(native, ed25519.Ed25519PrivateKey):
        return native.sign
    from nacl.bindings import crypto_sign, crypto_sign_seed_keypair

    # libsodium's own call (what `SigningKey.sign` makes, without its encoders and the
    # SignedMessage it builds): the signed message is the signature followed by the data.
    secret = crypto_sign_seed_keypair(native.private_bytes_raw())[1]
    return lambda data: crypto_sign(data, secret)[:SIGNATURE_BYTES]


def _sodium_verifier(native: ed25519.Ed25519PublicKey | ed448.Ed448PublicKey) -> Verify:
    """What verifies with `native`: libsodium for Ed25519 (half OpenSSL's time; it also
    refuses non-canonical signatures and small-order keys), `cryptography` for Ed448."""
    if not isinstance(native, ed25519.Ed25519PublicKey):
        return native.verify
    from nacl.bindings import crypto_sign_open
    from nacl.exceptions import CryptoError

    key = native.public_bytes_raw()

    def verify(signature: bytes, data: bytes) -> None:
        # libsodium's own call (what `VerifyKey.verify` makes, without its encoders): the
        # signature's length checked first, as there, since the two are passed as one.
        if len(signature) != SIGNATURE_BYTES:
            raise InvalidSignature
        try:
            crypto_sign_open(signature + data, key)
        except CryptoError:
            raise InvalidSignature from None

    return verify


def _b64(data: bytes) -> bytes:
    """base64url without padding (`base64.urlsafe_b64encode(data).rstrip(b"=")`, without
    its Python wrappers and its byte-by-byte translation: a signed payload is ~1 KiB)."""
    encoded = binascii.b2a_base64(data, newline=False).rstrip(b"=")
    return encoded.replace(b"+", b"-").replace(b"/", b"_")


def _remember(cache: dict[Any, Any], key: Any, value: Any) -> None:
    if len(cache) >= _CACHE_MAX:
        cache.clear()
    cache[key] = value


def _signer(key: OKPKey, typ: str, header: dict[str, str]) -> tuple[bytes, str, Any]:
    """What signs for `key` signing `typ`: the protected segment followed by ".", the
    detached token's head (`protected..`) and the native private key — checked by joserfc
    (header, algorithm, key type, use and operations) once per key and header."""
    ident = (id(key), typ, tuple(sorted(header.items())) if header else ())
    known = _SIGNERS.get(ident)
    if known is not None and known[0] is key:  # the key itself is held: its id is not reused
        return known[1], known[2], known[3]
    if key.kid is None or not key.is_private:
        raise SignatureError("signing needs a private key with a key id")
    protected: dict[str, Any] = {"alg": ALG, "typ": typ, "kid": key.kid, **header}
    try:
        _REGISTRY.check_header(protected)
        alg = _REGISTRY.get_alg(ALG)
        alg.check_key(key)
        native = key.get_op_key("sign")
    except JoseError as exc:
        raise SignatureError(f"cannot sign: {exc}") from None
    if not isinstance(native, ed25519.Ed25519PrivateKey | ed448.Ed448PrivateKey):
        raise SignatureError("cannot sign: EdDSA needs an Ed25519 or Ed448 key")
    segment = json_b64encode(protected)
    signer = (key, segment + b".", segment.decode() + "..", _sodium_signer(native))
    _remember(_SIGNERS, ident, signer)
    return signer[1], signer[2], signer[3]


def sign_detached(payload: bytes, key: OKPKey, typ: str, **header: str) -> str:
    """A detached compact JWS (`protected..signature`) of `payload` by `key` (the very
    token joserfc's `serialize_compact` makes, detached: Ed25519 is deterministic)."""
    signing_input, head, sign = _signer(key, typ, header)
    return head + _b64(sign(signing_input + _b64(payload))).decode()


def verify_detached(
    token: Any, payload: bytes, keys: Mapping[str, OKPKey], typ: str | tuple[str | None, ...]
) -> dict[str, Any]:
    """The protected header of `token`, a valid signature of `payload` by one of `keys`
    (kid → public key) of type `typ` (or one of several); SignatureError otherwise."""
    if not isinstance(token, str) or token.count(".") != 2 or len(token) > 4096:
        raise SignatureError("the signature is not a detached compact JWS")
    head, middle, signature = token.split(".")
    if middle:
        # joserfc would verify the payload the token carries and ignore `payload`: any one
        # signature seen with its envelope would then vouch for every other envelope.
        raise SignatureError("the signature carries a payload: not a detached JWS")
    header = _HEADERS.get(head)
    if header is not None:  # checked by joserfc when a signature with it last verified
        return _verify_known(header, head, signature, payload, keys, typ)
    try:
        obj = jws.extract_compact(token.encode(), payload, _REGISTRY)
        header = obj.headers()
    except (JoseError, ValueError, TypeError) as exc:
        raise SignatureError(f"the signature cannot be read: {exc}") from None
    kid = header.get("kid")
    if not isinstance(kid, str) or not kid:
        raise SignatureError("the signature names no key (kid)")
    key = _typed_key(header, kid, keys, typ)
    try:
        valid = jws.validate_compact(obj, key, registry=_REGISTRY)
    except (JoseError, ValueError, TypeError) as exc:
        raise SignatureError(f"the signature does not verify: {exc}") from None
    if not valid:
        raise SignatureError(f"the signature does not verify with key {kid!r}")
    if "b64" not in header:  # RFC 7797's unencoded payloads always take joserfc's path
        _remember(_HEADERS, head, dict(header))
    return dict(header)


def _typed_key(
    header: Mapping[str, Any],
    kid: str,
    keys: Mapping[str, OKPKey],
    typ: str | tuple[str | None, ...],
) -> OKPKey:
    """The key `kid` names, once the header's type is one `typ` accepts: else SignatureError
    (an unknown kid named in it, for the caller to refresh its keys)."""
    accepted = (typ,) if isinstance(typ, str) else typ
    if header.get("typ") not in accepted:
        raise SignatureError(f"the signature is of type {header.get('typ')!r}, not {typ!r}")
    key = keys.get(kid)
    if key is None:
        raise SignatureError(f"unknown key id {kid!r}", unknown_kid=kid)
    return key


def _verify_known(
    header: dict[str, Any],
    head: str,
    signature: str,
    payload: bytes,
    keys: Mapping[str, OKPKey],
    typ: str | tuple[str | None, ...],
) -> dict[str, Any]:
    """`verify_detached` for a header joserfc read and checked before: the same checks in
    the same order, the key's checks once per key, then the signature itself."""
    kid = header["kid"]
    key = _typed_key(header, kid, keys, typ)
    alg = header["alg"]
    known = _VERIFIERS.get((id(key), alg))
    if known is None or known[0] is not key:
        try:
            _REGISTRY.get_alg(alg).check_key(key)
            native = key.get_op_key("verify")
        except (JoseError, ValueError, TypeError) as exc:
            raise SignatureError(f"the signature does not verify: {exc}") from None
        if not isinstance(native, ed25519.Ed25519PublicKey | ed448.Ed448PublicKey):
            raise SignatureError("the signature does not verify: not an Ed25519 or Ed448 key")
        known = (key, _sodium_verifier(native))
        _remember(_VERIFIERS, (id(key), alg), known)
    try:
        raw = urlsafe_b64decode(signature.encode())  # joserfc's strict decoding
        known[1](raw, (head + ".").encode() + _b64(payload))
    except (InvalidSignature, ValueError, TypeError):
        raise SignatureError(f"the signature does not verify with key {kid!r}") from None
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
