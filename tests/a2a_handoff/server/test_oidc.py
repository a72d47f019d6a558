"""The issuer's keys fetched, refetched and the verified tokens kept: what the OIDC verifier
asks the issuer and when, on clocks of the test's own (no waiting). The issuer is a table of
documents the test serves; what is under test — when to ask, what to keep — is the
verifier's own."""

from __future__ import annotations

import json
from typing import Any

import anyio
import anyio.lowlevel
import httpx
import pytest
from joserfc import jws
from joserfc.jwk import RSAKey

from a2a_handoff.errors import AuthenticationError, IssuerUnavailableError
from a2a_handoff.server import _oidc
from a2a_handoff.server._oidc import OidcVerifier
from a2a_handoff.trust.tokens import TokenRules

pytestmark = pytest.mark.anyio

ISSUER = "https://issuer.example"
AUDIENCE = "https://agent.example/"
DISCOVERY = ISSUER + "/.well-known/openid-configuration"
JWKS = ISSUER + "/jwks"
NOW = 1_800_000_000.0


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class Issuer:
    """The issuer's documents, the requests made for them, and whether it answers."""

    def __init__(self) -> None:
        self.keys = [RSAKey.generate_key(2048, parameters={"kid": "k1"})]
        self.up = True
        self.asked: list[str] = []
        self.asked_once = anyio.Event()
        self.discovery: dict[str, Any] = {"issuer": ISSUER, "jwks_uri": JWKS}

    async def fetch(self, url: str) -> Any:
        self.asked.append(url)
        await anyio.lowlevel.checkpoint()  # a request takes a while: other calls run meanwhile
        self.asked_once.set()  # answered (or refused) as `up` says now
        if not self.up:
            raise httpx.ConnectError("connection refused")
        if url == DISCOVERY:
            return self.discovery
        assert url == JWKS
        return {"keys": [k.as_dict(private=False) for k in self.keys]}

    def token(self, subject: str = "alice", key: RSAKey | None = None, **claims: Any) -> str:
        key = key or self.keys[0]
        body = {"iss": ISSUER, "aud": AUDIENCE, "sub": subject, "exp": NOW + 300, **claims}
        head = {"alg": "RS256", "kid": key.kid, "typ": "at+jwt"}
        return jws.serialize_compact(head, json.dumps(body), key, algorithms=["RS256"])


def verifier(issuer: Issuer, clock: Clock, wall: Clock, **options: Any) -> OidcVerifier:
    rules = TokenRules(ISSUER, AUDIENCE)
    return OidcVerifier(rules, fetch=issuer.fetch, clock=clock, wall=wall, **options)


async def test_a_repeated_token_is_verified_once_until_it_expires(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    issuer, wall = Issuer(), Clock(NOW)
    tokens = verifier(issuer, Clock(0), wall)
    checked: list[str] = []
    real = _oidc.verify

    def counted(token: str, *args: Any) -> Any:
        checked.append(token)
        return real(token, *args)

    monkeypatch.setattr(_oidc, "verify", counted)
    token = issuer.token()
    assert [await tokens.principal(token) for _ in range(100)] == ["alice"] * 100
    assert len(checked) == 1
    assert issuer.asked == [DISCOVERY, JWKS]
    wall.now = NOW + 300 + 61  # past exp and the leeway: no longer answered from the cache
    with pytest.raises(AuthenticationError, match="expired"):
        await tokens.principal(token)
    assert tokens.cached(token) is None


async def test_the_cache_is_bounded() -> None:
    issuer = Issuer()
    tokens = verifier(issuer, Clock(0), Clock(NOW), cache_size=3)
    for n in range(10):
        await tokens.principal(issuer.token(f"user-{n}"))
    assert [tokens.cached(issuer.token(f"user-{n}")) is not None for n in range(10)].count(
        True
    ) <= 3


async def test_an_unknown_key_id_refetches_the_keys_at_most_once_per_interval() -> None:
    issuer, clock = Issuer(), Clock(1000.0)
    tokens = verifier(issuer, clock, Clock(NOW), retry=30)
    assert await tokens.principal(issuer.token()) == "alice"
    assert issuer.asked == [DISCOVERY, JWKS]
    clock.now += 31
    issuer.keys.insert(0, RSAKey.generate_key(2048, parameters={"kid": "k2"}))  # a rotation
    assert await tokens.principal(issuer.token("bob")) == "bob"  # k2: fetched again
    assert issuer.asked == [DISCOVERY, JWKS, JWKS]
    stranger = RSAKey.generate_key(2048, parameters={"kid": "forged"})
    for n in range(20):  # a flood of unknown key ids costs the issuer one request per interval
        with pytest.raises(AuthenticationError, match="does not publish"):
            await tokens.principal(issuer.token(f"m{n}", key=stranger))
    assert issuer.asked == [DISCOVERY, JWKS, JWKS]
    clock.now += 30
    with pytest.raises(AuthenticationError, match="does not publish"):
        await tokens.principal(issuer.token("late", key=stranger))
    assert issuer.asked == [DISCOVERY, JWKS, JWKS, JWKS]


async def test_an_issuer_down_is_asked_again_after_the_interval_and_then_serves(
    caplog: pytest.LogCaptureFixture,
) -> None:
    issuer, clock = Issuer(), Clock(1000.0)
    issuer.up = False
    tokens = verifier(issuer, clock, Clock(NOW), retry=30)
    token = issuer.token()
    with pytest.raises(IssuerUnavailableError, match="has not answered yet") as down:
        await tokens.principal(token)
    assert down.value.http_status == 503
    # why is the operator's to read, not the caller's (it may name internal hosts)
    assert "connection refused" not in str(down.value)
    assert "connection refused" in caplog.text
    issuer.up = True
    clock.now += 29  # within the interval: not asked again, still 503
    with pytest.raises(IssuerUnavailableError):
        await tokens.principal(token)
    assert issuer.asked == [DISCOVERY]
    clock.now += 1
    assert await tokens.principal(token) == "alice"
    assert issuer.asked == [DISCOVERY, DISCOVERY, JWKS]


async def test_a_forged_header_is_refused_without_asking_the_issuer() -> None:
    issuer = Issuer()
    tokens = verifier(issuer, Clock(0), Clock(NOW))
    head, body, _ = issuer.token().split(".")
    with pytest.raises(AuthenticationError, match="algorithm 'none'"):
        await tokens.principal(f"eyJhbGciOiJub25lIiwia2lkIjoiazEifQ.{body}.")
    assert issuer.asked == []
    assert head  # the real header was a real token's


async def test_a_discovery_document_naming_another_issuer_is_not_used(
    caplog: pytest.LogCaptureFixture,
) -> None:
    issuer = Issuer()
    issuer.discovery = {"issuer": "https://evil.example", "jwks_uri": JWKS}
    tokens = verifier(issuer, Clock(0), Clock(NOW), retry=0)
    with pytest.raises(IssuerUnavailableError):
        await tokens.principal(issuer.token())
    assert "another issuer" in caplog.text
    assert JWKS not in issuer.asked
    for uri in ("file:///etc/keys", "http://keys.internal/jwks", "https:///jwks"):
        caplog.clear()
        issuer.discovery = {"issuer": ISSUER, "jwks_uri": uri}
        with pytest.raises(IssuerUnavailableError):
            await tokens.principal(issuer.token())
        assert "no usable jwks_uri" in caplog.text, uri
    assert issuer.asked.count(JWKS) == 0


async def test_keys_come_over_https_or_from_the_issuers_own_origin() -> None:
    assert _oidc._fit_for_keys("https://keys.example/jwks", "https://issuer.example")
    assert _oidc._fit_for_keys("http://127.0.0.1:9/jwks", "http://127.0.0.1:9")
    assert not _oidc._fit_for_keys("http://127.0.0.1:10/jwks", "http://127.0.0.1:9")
    assert not _oidc._fit_for_keys("http://keys.example/jwks", "https://issuer.example")


@pytest.mark.parametrize("jwks", [[], "keys", 7, {"keys": {"k1": {}}}])
async def test_a_jwks_of_the_wrong_shape_is_an_issuer_not_answering(jwks: Any) -> None:
    issuer = Issuer()

    async def fetch(url: str) -> Any:
        issuer.asked.append(url)
        return issuer.discovery if url == DISCOVERY else jwks

    tokens = OidcVerifier(
        TokenRules(ISSUER, AUDIENCE), fetch=fetch, clock=Clock(0), wall=Clock(NOW)
    )
    with pytest.raises(IssuerUnavailableError):  # 503, not a crash (HTTP 500)
        await tokens.principal(issuer.token())
    assert issuer.asked == [DISCOVERY, JWKS]


async def test_a_full_cache_drops_its_oldest_token_without_a_scan() -> None:
    issuer = Issuer()
    tokens = verifier(issuer, Clock(0), Clock(NOW), cache_size=3)
    minted = [issuer.token(f"user-{n}") for n in range(4)]
    for token in minted:
        await tokens.principal(token)
    assert [tokens.cached(token) for token in minted] == [None, "user-1", "user-2", "user-3"]


async def test_concurrent_first_calls_ask_the_issuer_once() -> None:
    issuer = Issuer()
    tokens = verifier(issuer, Clock(0), Clock(NOW))
    subjects: list[str] = []

    async def one(n: int) -> None:
        subjects.append(await tokens.principal(issuer.token(f"u{n}")))

    async with anyio.create_task_group() as group:
        for n in range(20):
            group.start_soon(one, n)
    assert sorted(subjects) == sorted(f"u{n}" for n in range(20))
    assert issuer.asked == [DISCOVERY, JWKS]


async def test_started_it_keeps_asking_a_down_issuer_until_it_answers() -> None:
    issuer, clock = Issuer(), Clock(1000.0)
    issuer.up = False
    tokens = verifier(issuer, clock, Clock(NOW), retry=0)  # asked every second at least
    with anyio.fail_after(10):
        async with anyio.create_task_group() as group:
            group.start_soon(tokens.keep_trying)
            await issuer.asked_once.wait()
            issuer.up = True  # the next try finds it: no call was needed
    assert issuer.asked[-2:] == [DISCOVERY, JWKS]
    assert issuer.asked.count(DISCOVERY) >= 2
    before = len(issuer.asked)
    assert await tokens.principal(issuer.token()) == "alice"
    assert len(issuer.asked) == before  # the keys were there already
