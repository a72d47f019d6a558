"""Detached JWS over canonical JSON, with the RFC 8037 Ed25519 test key (known vectors)."""

from __future__ import annotations

import base64
import json

import pytest
from joserfc import jws
from joserfc.jwk import OKPKey

from a2a_handoff.canonical import canonical
from a2a_handoff.errors import SignatureError
from a2a_handoff.trust.signing import (
    DECISION_TYP,
    ENVELOPE_TYP,
    sign_claims,
    sign_detached,
    verify_claims,
    verify_detached,
)

# RFC 8037 Appendix A.1 (the private key) and A.3 (its RFC 7638 thumbprint).
RFC_JWK = {
    "kty": "OKP",
    "crv": "Ed25519",
    "d": "nWGxne_9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A",
    "x": "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo",
}
RFC_KID = "kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k"
# RFC 8037 Appendix A.4: the JWS of "Example of Ed25519 signing" with {"alg":"EdDSA"}.
RFC_JWS = (
    "eyJhbGciOiJFZERTQSJ9.RXhhbXBsZSBvZiBFZDI1NTE5IHNpZ25pbmc."
    "hgyY0il_MGCjP0JzlnLWG1PPOt7-09PGcvMg3AIbQR6dWbhijcNR4ki4iylGjg5BhVsPt9g7sVvpAr_MuM0KAg"
)
ENVELOPE = {"handoffId": "h-1", "hop": 1, "visited": ["triage"], "amount": 49.99}
# Ed25519 is deterministic: our envelope signature with the RFC key, as made once.
ENVELOPE_JWS = (
    "eyJhbGciOiJFZERTQSIsInR5cCI6ImEyYS1oYW5kb2ZmLWVudmVsb3BlK2p3cyIsImtpZCI6ImtQcktfcW14Vld"
    "hWVZBOXd3QkY2SXVvM3ZWeno3VHhIQ1R3WEJ5Z3JTNGsifQ..Nt_tXUbYbltQj9xlbz1Y4DVIQVVos20Om97V2"
    "mBCvtU2U9Ga1GJf7tYtQt0RIK-_p_s9aeBUL4tWydbmmGDaAQ"
)


def rfc_key() -> OKPKey:
    key = OKPKey.import_key(RFC_JWK)
    key.ensure_kid()
    return key


def public(key: OKPKey) -> dict[str, OKPKey]:
    pub = OKPKey.import_key(key.as_dict(private=False))
    assert pub.kid is not None
    return {pub.kid: pub}


def b64(data: dict[str, str]) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).decode().rstrip("=")


def test_the_rfc_8037_key_and_signature() -> None:
    key = rfc_key()
    assert key.kid == RFC_KID
    made = jws.serialize_compact(
        {"alg": "EdDSA"}, b"Example of Ed25519 signing", key, algorithms=["EdDSA"]
    )
    assert made == RFC_JWS


def test_an_envelope_signature_is_the_known_vector_and_verifies() -> None:
    key = rfc_key()
    token = sign_detached(canonical(ENVELOPE), key, ENVELOPE_TYP)
    assert token == ENVELOPE_JWS
    header = verify_detached(
        token, canonical(dict(reversed(ENVELOPE.items()))), public(key), ENVELOPE_TYP
    )
    assert header == {"alg": "EdDSA", "typ": ENVELOPE_TYP, "kid": RFC_KID}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"hop": 2}, "does not verify"),
        ({"visited": []}, "does not verify"),
        ({"amount": 49.98}, "does not verify"),
    ],
)
def test_any_change_to_the_envelope_breaks_the_signature(
    change: dict[str, object], message: str
) -> None:
    key = rfc_key()
    with pytest.raises(SignatureError, match=message):
        verify_detached(ENVELOPE_JWS, canonical({**ENVELOPE, **change}), public(key), ENVELOPE_TYP)


def test_a_signature_without_kid_is_refused_even_against_one_key() -> None:
    # joserfc alone would accept it: a one-key set answers any kid-less token.
    key = rfc_key()
    token = jws.detach_content(
        jws.serialize_compact(
            {"alg": "EdDSA", "typ": ENVELOPE_TYP}, canonical(ENVELOPE), key, algorithms=["EdDSA"]
        )
    )
    with pytest.raises(SignatureError, match="names no key"):
        verify_detached(token, canonical(ENVELOPE), public(key), ENVELOPE_TYP)


def test_the_rfc_9864_alg_name_is_accepted_and_none_is_not() -> None:
    key = rfc_key()
    header = {"alg": "Ed25519", "typ": ENVELOPE_TYP, "kid": RFC_KID}
    token = jws.detach_content(
        jws.serialize_compact(header, canonical(ENVELOPE), key, algorithms=["Ed25519"])
    )
    assert verify_detached(token, canonical(ENVELOPE), public(key), ENVELOPE_TYP)["kid"] == RFC_KID
    unsigned = b64({"alg": "none", "typ": ENVELOPE_TYP, "kid": RFC_KID}) + ".."
    with pytest.raises(SignatureError):
        verify_detached(unsigned, canonical(ENVELOPE), public(key), ENVELOPE_TYP)


def test_an_unknown_kid_is_named_and_another_key_under_our_kid_fails() -> None:
    key = rfc_key()
    other = OKPKey.generate_key("Ed25519", auto_kid=True)
    with pytest.raises(SignatureError) as unknown:
        verify_detached(ENVELOPE_JWS, canonical(ENVELOPE), public(other), ENVELOPE_TYP)
    assert unknown.value.unknown_kid == RFC_KID
    impostor = OKPKey.import_key({**other.as_dict(private=False), "kid": RFC_KID})
    with pytest.raises(SignatureError, match="does not verify"):
        verify_detached(ENVELOPE_JWS, canonical(ENVELOPE), {RFC_KID: impostor}, ENVELOPE_TYP)
    del key


def test_a_token_carrying_its_own_payload_never_vouches_for_another() -> None:
    # A signature seen once, with the envelope it signed put back inside it, must not
    # verify a different envelope (nor the same one: a detached JWS carries no payload).
    key = rfc_key()
    header, _, signature = ENVELOPE_JWS.split(".")
    attached = f"{header}.{base64.urlsafe_b64encode(canonical(ENVELOPE)).decode().rstrip('=')}"
    attached += f".{signature}"
    assert jws.deserialize_compact(attached, key, algorithms=["EdDSA"]).payload  # a real JWS
    forged = canonical({**ENVELOPE, "amount": 1_000_000})
    for payload in (forged, canonical(ENVELOPE)):
        with pytest.raises(SignatureError, match="carries a payload"):
            verify_detached(attached, payload, public(key), ENVELOPE_TYP)


@pytest.mark.parametrize("header", [{}, {"jku": "http://127.0.0.1:1/.well-known/jwks.json"}])
def test_signing_makes_joserfc_token_detached_and_both_paths_judge_alike(
    header: dict[str, str],
) -> None:
    # Ed25519 is deterministic: the token is byte for byte joserfc's, detached.
    key = rfc_key()
    for n in range(3):
        payload = canonical({**ENVELOPE, "n": n, "text": "é" * n})
        protected = {"alg": "EdDSA", "typ": ENVELOPE_TYP, "kid": RFC_KID, **header}
        made = jws.detach_content(jws.serialize_compact(protected, payload, key, ["EdDSA"]))
        token = sign_detached(payload, key, ENVELOPE_TYP, **header)
        assert token == made
        # The first verification goes through joserfc, the next ones reuse its checks.
        for _ in range(2):
            assert verify_detached(token, payload, public(key), ENVELOPE_TYP)["kid"] == RFC_KID
            with pytest.raises(SignatureError, match="does not verify"):
                verify_detached(token, payload + b" ", public(key), ENVELOPE_TYP)
            with pytest.raises(SignatureError, match="type"):
                verify_detached(token, payload, public(key), DECISION_TYP)
            with pytest.raises(SignatureError, match="unknown key"):
                verify_detached(token, payload, {"other": public(key)[RFC_KID]}, ENVELOPE_TYP)
            for bad in (token[:-2] + "A=", token[:-1] + "+", token + "AA"):
                with pytest.raises(SignatureError):
                    verify_detached(bad, payload, public(key), ENVELOPE_TYP)
            x25519 = OKPKey.generate_key("X25519", parameters={"kid": RFC_KID}, private=False)
            with pytest.raises(SignatureError):
                verify_detached(token, payload, {RFC_KID: x25519}, ENVELOPE_TYP)
            restricted = OKPKey.import_key({**RFC_JWK, "kid": RFC_KID, "use": "enc"})
            with pytest.raises(SignatureError):
                verify_detached(token, payload, {RFC_KID: restricted}, ENVELOPE_TYP)


def test_a_signature_of_one_type_is_not_accepted_as_another() -> None:
    key = rfc_key()
    with pytest.raises(SignatureError, match="type"):
        verify_detached(ENVELOPE_JWS, canonical(ENVELOPE), public(key), DECISION_TYP)


@pytest.mark.parametrize("token", [None, 42, "", "a.b", "a.b.c.d", "!!!..!!!", "x" * 5000])
def test_garbage_signatures_are_refused(token: object) -> None:
    with pytest.raises(SignatureError):
        verify_detached(token, canonical(ENVELOPE), public(rfc_key()), ENVELOPE_TYP)


def test_signed_claims_verify_and_any_changed_claim_does_not() -> None:
    key = rfc_key()
    signed = sign_claims({"verdict": "approved", "fp": "abc", "exp": 10}, key, DECISION_TYP)
    claims, kid = verify_claims(signed, public(key), DECISION_TYP)
    assert claims["verdict"] == "approved"
    assert kid == RFC_KID
    forged = {**signed, "claims": {**signed["claims"], "fp": "abd"}}
    with pytest.raises(SignatureError):
        verify_claims(forged, public(key), DECISION_TYP)
    with pytest.raises(SignatureError):
        verify_claims({"claims": "x"}, public(key), DECISION_TYP)


def test_a_malleated_signature_is_refused_on_both_paths() -> None:
    # S + L verifies the same equation as S: accepted, one envelope would have two valid
    # signatures. RFC 8032 requires S < L; the first verification (joserfc) and the later
    # ones (libsodium, for a header seen before) both hold to it.
    order = 2**252 + 27742317777372353535851937790883648493
    key = OKPKey.generate_key("Ed25519", auto_kid=True)  # its header not yet seen: joserfc first
    good = sign_detached(canonical(ENVELOPE), key, ENVELOPE_TYP)
    head, _, signature = good.split(".")
    raw = base64.urlsafe_b64decode(signature + "==")
    s = int.from_bytes(raw[32:], "little") + order
    malleated = raw[:32] + s.to_bytes(32, "little")
    token = f"{head}..{base64.urlsafe_b64encode(malleated).decode().rstrip('=')}"
    for _ in range(2):
        with pytest.raises(SignatureError, match="does not verify"):
            verify_detached(token, canonical(ENVELOPE), public(key), ENVELOPE_TYP)
        assert verify_detached(good, canonical(ENVELOPE), public(key), ENVELOPE_TYP)


def test_an_ed448_key_signs_and_verifies_on_both_paths() -> None:
    key = OKPKey.generate_key("Ed448", auto_kid=True)
    payload = canonical(ENVELOPE)
    token = sign_detached(payload, key, ENVELOPE_TYP)
    protected = {"alg": "EdDSA", "typ": ENVELOPE_TYP, "kid": key.kid}
    made = jws.detach_content(jws.serialize_compact(protected, payload, key, ["EdDSA"]))
    assert token == made
    for _ in range(2):
        assert verify_detached(token, payload, public(key), ENVELOPE_TYP)["kid"] == key.kid
        with pytest.raises(SignatureError, match="does not verify"):
            verify_detached(token, payload + b" ", public(key), ENVELOPE_TYP)


@pytest.mark.parametrize("cut", [slice(0, 63), slice(0, 65)])
def test_a_signature_of_another_length_is_refused_on_both_paths(cut: slice) -> None:
    # libsodium is handed the signature and the signed bytes as one: a signature one byte
    # short would borrow the first byte of the data. Its length is checked before.
    key = OKPKey.generate_key("Ed25519", auto_kid=True)  # its header not yet seen: joserfc first
    good = sign_detached(canonical(ENVELOPE), key, ENVELOPE_TYP)
    head, _, signature = good.split(".")
    raw = base64.urlsafe_b64decode(signature + "==")
    bad = (raw + b"e")[cut]
    token = f"{head}..{base64.urlsafe_b64encode(bad).decode().rstrip('=')}"
    for _ in range(2):
        with pytest.raises(SignatureError, match="does not verify"):
            verify_detached(token, canonical(ENVELOPE), public(key), ENVELOPE_TYP)
        assert verify_detached(good, canonical(ENVELOPE), public(key), ENVELOPE_TYP)
