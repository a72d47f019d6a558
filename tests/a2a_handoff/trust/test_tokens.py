"""A bearer token checked against its issuer's keys: the three algorithms accepted, every way
of choosing one's own key or algorithm refused before a signature is checked, and the claims'
times with a leeway of at most 60 seconds."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from typing import Any

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding
from joserfc import jws
from joserfc.jwk import ECKey, OKPKey, RSAKey

from a2a_handoff.trust.tokens import (
    IssuerKeys,
    TokenError,
    TokenRules,
    UnknownKeyError,
    header_of,
    verify,
)

ISSUER = "https://issuer.example"
AUDIENCE = "https://agent.example/"
NOW = 1_800_000_000.0
RULES = TokenRules(ISSUER, AUDIENCE)
RSA = RSAKey.generate_key(2048, parameters={"kid": "rsa"})
EC = ECKey.generate_key("P-256", parameters={"kid": "ec"})
OKP = OKPKey.generate_key("Ed25519", parameters={"kid": "okp"})
KEYS = IssuerKeys({"keys": [k.as_dict(private=False) for k in (RSA, EC, OKP)]})


def claims(**changes: Any) -> dict[str, Any]:
    return {"iss": ISSUER, "aud": AUDIENCE, "sub": "alice", "exp": NOW + 300, **changes}


def signed(key: RSAKey | ECKey | OKPKey, alg: str, body: dict[str, Any], **header: Any) -> str:
    head = {"alg": alg, "kid": key.kid, "typ": "at+jwt", **header}
    return jws.serialize_compact(head, json.dumps(body), key, algorithms=[alg])


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def rsa_signed(header: dict[str, Any], body: dict[str, Any]) -> str:
    """Signed RS256 by the issuer's key with any header at all (joserfc would refuse to
    write some of them)."""
    data = f"{b64(json.dumps(header).encode())}.{b64(json.dumps(body).encode())}"
    private = RSA.get_op_key("sign")
    signature = private.sign(data.encode(), padding.PKCS1v15(), hashes.SHA256())
    return f"{data}.{b64(signature)}"


@pytest.mark.parametrize(
    ("key", "alg"), [(RSA, "RS256"), (EC, "ES256"), (OKP, "EdDSA")], ids=["RS256", "ES256", "EdDSA"]
)
def test_each_algorithm_verifies_with_the_issuers_key(key: Any, alg: str) -> None:
    verified = verify(signed(key, alg, claims()), KEYS, RULES, NOW)
    assert (verified.subject, verified.expires) == ("alice", NOW + 300)


@pytest.mark.parametrize("typ", [None, "JWT", "at+jwt", "application/at+jwt"])
def test_plain_and_access_token_types_are_accepted(typ: str | None) -> None:
    header = (
        {"alg": "RS256", "kid": "rsa"}
        if typ is None
        else {"alg": "RS256", "kid": "rsa", "typ": typ}
    )
    token = rsa_signed(header, claims())
    assert verify(token, KEYS, RULES, NOW).subject == "alice"


def test_another_type_is_refused() -> None:
    with pytest.raises(TokenError, match="token type"):
        verify(signed(RSA, "RS256", claims(), typ="dpop+jwt"), KEYS, RULES, NOW)


@pytest.mark.parametrize("name", ["jwk", "jku", "x5u", "x5c", "crit"])
def test_a_token_naming_its_own_key_is_refused_before_any_key_is_looked_at(name: str) -> None:
    header = {"alg": "RS256", "kid": "rsa", name: "anything"}
    token = rsa_signed(header, claims())  # signed by the issuer, even
    with pytest.raises(TokenError, match="names its own key"):
        header_of(token)
    with pytest.raises(TokenError, match="names its own key"):
        verify(token, KEYS, RULES, NOW)


@pytest.mark.parametrize("alg", ["none", "HS256", "HS384", "HS512", "PS256", "ES384", None])
def test_none_hmac_and_other_algorithms_are_refused(alg: str | None) -> None:
    head = b64(json.dumps({"alg": alg, "kid": "rsa"}).encode())
    body = b64(json.dumps(claims()).encode())
    secret = RSA.as_pem(private=False)  # HMAC keyed with the public key: the classic confusion
    mac = hmac.new(secret, f"{head}.{body}".encode(), hashlib.sha256).digest()
    with pytest.raises(TokenError, match="algorithm"):
        verify(f"{head}.{body}.{b64(mac)}", KEYS, RULES, NOW)


def test_an_algorithm_that_does_not_fit_the_named_key_is_refused() -> None:
    # ES256 claimed with the RSA key's id: the key decides, not the token.
    token = signed(EC, "ES256", claims(), kid="rsa")
    with pytest.raises(TokenError, match="not for ES256"):
        verify(token, KEYS, RULES, NOW)


def test_a_p384_key_cannot_pass_for_es256() -> None:
    p384 = ECKey.generate_key("P-384", parameters={"kid": "p384"})
    keys = IssuerKeys({"keys": [p384.as_dict(private=False)]})
    body = jws.serialize_compact(
        {"alg": "ES384", "kid": "p384"}, json.dumps(claims()), p384, algorithms=["ES384"]
    ).split(".", 1)[1]
    token = b64(json.dumps({"alg": "ES256", "kid": "p384"}).encode()) + "." + body
    with pytest.raises(TokenError):
        verify(token, keys, RULES, NOW)


def test_an_unknown_key_id_is_told_apart() -> None:
    stranger = RSAKey.generate_key(2048, parameters={"kid": "stranger"})
    with pytest.raises(UnknownKeyError):
        verify(signed(stranger, "RS256", claims()), KEYS, RULES, NOW)


def test_a_key_id_of_the_issuer_on_another_keys_signature_is_refused() -> None:
    stranger = RSAKey.generate_key(2048, parameters={"kid": "rsa"})  # the issuer's kid, faked
    with pytest.raises(TokenError, match="signature does not verify"):
        verify(signed(stranger, "RS256", claims()), KEYS, RULES, NOW)


def test_a_token_without_a_key_id_or_a_signature_is_refused() -> None:
    no_kid = jws.serialize_compact({"alg": "RS256"}, json.dumps(claims()), RSA)
    with pytest.raises(TokenError, match="no key id"):
        verify(no_kid, KEYS, RULES, NOW)
    unsigned = signed(RSA, "RS256", claims()).rsplit(".", 1)[0] + "."
    with pytest.raises(TokenError, match="not signed"):
        verify(unsigned, KEYS, RULES, NOW)


def test_times_are_checked_with_the_leeway_and_no_more() -> None:
    assert verify(signed(RSA, "RS256", claims(exp=NOW - 59)), KEYS, RULES, NOW)
    with pytest.raises(TokenError, match="expired"):
        verify(signed(RSA, "RS256", claims(exp=NOW - 61)), KEYS, RULES, NOW)
    assert verify(signed(RSA, "RS256", claims(nbf=NOW + 59)), KEYS, RULES, NOW)
    with pytest.raises(TokenError, match="not valid yet"):
        verify(signed(RSA, "RS256", claims(nbf=NOW + 61)), KEYS, RULES, NOW)
    strict = TokenRules(ISSUER, AUDIENCE, leeway=0)
    with pytest.raises(TokenError, match="expired"):
        verify(signed(RSA, "RS256", claims(exp=NOW - 1)), KEYS, strict, NOW)
    with pytest.raises(ValueError, match="leeway"):
        TokenRules(ISSUER, AUDIENCE, leeway=61)


@pytest.mark.parametrize(
    ("changes", "why"),
    [
        ({"exp": None}, "no expiry"),
        ({"exp": "soon"}, "not a time"),
        ({"exp": True}, "not a time"),
        ({"iss": "https://issuer.example/"}, "another issuer"),  # not the same string
        ({"aud": "https://agent.example"}, "not for this agent"),
        ({"aud": ["https://other.example/"]}, "not for this agent"),
        ({"sub": ""}, "no subject"),
        ({"sub": None}, "no subject"),
        ({"sub": "\x1fother\x1falice"}, "control character"),  # a stored owner's shape
    ],
)
def test_the_claims_must_say_what_the_rules_ask(changes: dict[str, Any], why: str) -> None:
    body = {k: v for k, v in claims(**changes).items() if v is not None}
    with pytest.raises(TokenError, match=why):
        verify(signed(RSA, "RS256", body), KEYS, RULES, NOW)


def test_an_audience_list_naming_this_agent_is_accepted() -> None:
    body = claims(aud=["https://other.example/", AUDIENCE])
    assert verify(signed(RSA, "RS256", body), KEYS, RULES, NOW).subject == "alice"


def test_the_jwks_keeps_signing_keys_only() -> None:
    encryption = RSAKey.generate_key(2048, parameters={"kid": "enc", "use": "enc"})
    private = RSAKey.generate_key(2048, parameters={"kid": "leaked"})
    keys = IssuerKeys(
        {
            "keys": [
                encryption.as_dict(private=False),
                private.as_dict(private=True),
                {"kid": "broken", "kty": "RSA", "n": "x"},
                {"kty": "RSA"},
                RSA.as_dict(private=False),
            ]
        }
    )
    assert set(keys.keys) == {"rsa"}
    with pytest.raises(TokenError):
        IssuerKeys({"keys": "none"})
    with pytest.raises(TokenError):  # a document of another shape than an object
        IssuerKeys([])  # type: ignore[arg-type]


_DEEP = base64.urlsafe_b64encode(b"[" * 5000).rstrip(b"=").decode()  # past json's depth


@pytest.mark.parametrize(
    "token",
    ["", "a.b", "a.b.c.d", "!!!.e30.c2ln", "W10.e30.c2ln", "x" * 20000, f"{_DEEP}.e30.c2ln"],
)
def test_garbage_is_refused_with_a_reason(token: str) -> None:
    with pytest.raises(TokenError):
        verify(token, KEYS, RULES, NOW)
