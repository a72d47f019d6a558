"""The trust list: pinned keys, trust on first use, refreshes, and the trust file."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from a2a_handoff.errors import TrustError
from a2a_handoff.trust.keys import Identity
from a2a_handoff.trust.pins import PinFile
from a2a_handoff.trust.trustlist import (
    TrustedAgent,
    TrustList,
    load_trust_file,
    parse_trust,
)

pytestmark = pytest.mark.anyio


class Jwks:
    """A JWKS endpoint as the trust list sees it: what it was asked, what it answers."""

    def __init__(self, identity: Identity) -> None:
        self.identity = identity
        self.asked: list[tuple[str, str]] = []

    async def __call__(self, address: str, path: str) -> Any:
        self.asked.append((address, path))
        return self.identity.jwks()


class Clock:
    now = 100.0

    def __call__(self) -> float:
        return self.now


async def test_keys_are_fetched_on_first_use_pinned_and_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    triage = Identity.generate("triage")
    jwks = Jwks(triage)
    trust = TrustList([TrustedAgent("triage", "http://t/")], jwks)
    with caplog.at_level(logging.WARNING, "a2a_handoff.trust"):
        keys = await trust.keys("triage")
    assert set(keys) == set(triage.public_keys)
    assert jwks.asked == [("http://t/", ".well-known/jwks.json")]
    assert "pinned triage's keys" in caplog.text
    assert "trust on first use" in caplog.text
    await trust.keys("triage")
    assert len(jwks.asked) == 1  # pinned: not fetched again


async def test_an_unknown_kid_fetches_again_once_and_old_pins_expire() -> None:
    clock = Clock()
    triage = Identity.generate("triage")
    jwks = Jwks(triage)
    trust = TrustList([TrustedAgent("triage", "http://t/")], jwks, max_age=60, clock=clock)
    await trust.keys("triage")
    jwks.identity = triage.rotated()
    new = str(jwks.identity.signing_key.kid)
    clock.now += 0.5  # too soon: one refresh per min_refresh, whatever signatures claim
    assert new not in await trust.keys("triage", unknown_kid=new)
    clock.now += 5
    assert new in await trust.keys("triage", unknown_kid=new)
    # A retirement is learnt when the pin is older than max_age.
    jwks.identity = jwks.identity.retired(str(triage.signing_key.kid))
    assert triage.signing_key.kid in await trust.keys("triage")
    clock.now += 61
    assert set(await trust.keys("triage")) == {new}


async def test_pinned_keys_are_never_fetched_and_strangers_have_none() -> None:
    triage = Identity.generate("triage")
    jwks = Jwks(Identity.generate("mallory"))
    trust = TrustList([TrustedAgent("triage", "http://t/", pinned=triage.public_keys)], jwks)
    assert set(await trust.keys("triage", unknown_kid="other")) == set(triage.public_keys)
    assert jwks.asked == []
    with pytest.raises(TrustError, match="not on the trust list"):
        await trust.keys("mallory")


async def test_keys_past_their_age_are_never_extended_by_a_failed_fetch() -> None:
    # A retired key must stop verifying within max_age, whether or not the JWKS answers.
    clock = Clock()
    triage = Identity.generate("triage")
    answers: list[Any] = [triage.jwks(), triage.jwks()]

    async def flaky(address: str, path: str) -> Any:
        if not answers:
            raise ConnectionError("down")
        return answers.pop()

    trust = TrustList([TrustedAgent("triage", "http://t/")], flaky, clock=clock)
    await trust.keys("triage")
    clock.now += 30
    answers.clear()  # down, but what was fetched 30 s ago still holds (a passing failure)
    assert set(await trust.keys("triage", unknown_kid="x")) == set(triage.public_keys)
    clock.now += 31
    with pytest.raises(TrustError, match="cannot fetch"):
        await trust.keys("triage")
    answers.append(triage.jwks())  # back: the pin held, the same keys verify again
    assert set(await trust.keys("triage")) == set(triage.public_keys)
    other = TrustList([TrustedAgent("triage", "http://t/")], flaky)
    with pytest.raises(TrustError, match="cannot fetch"):
        await other.keys("triage")


async def test_a_pin_follows_rotations_and_refuses_an_impostor(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    clock = Clock()
    triage = Identity.generate("triage")
    jwks = Jwks(triage)
    pins = PinFile(tmp_path / "billing.pins.json")
    agents = [TrustedAgent("triage", "http://t/")]
    trust = TrustList(agents, jwks, max_age=60, clock=clock, pins=pins)
    await trust.keys("triage")
    # Whoever takes triage's port serves keys of its own: refused, however often asked.
    jwks.identity = Identity.generate("triage")
    clock.now += 61
    with caplog.at_level(logging.ERROR, "a2a_handoff.trust"):
        assert await trust.keys("triage") == {}
    assert "REFUSED triage's keys" in caplog.text
    assert "trust forget triage" in caplog.text
    # A restart of this agent keeps the pin: the impostor is refused by a new process too.
    again = TrustList(agents, jwks, max_age=60, clock=clock, pins=PinFile(pins.path))
    assert await again.keys("triage") == {}
    # Triage's own rotations, each vouched for by the key before: followed, pin updated.
    jwks.identity = triage.rotated().rotated()
    jwks.identity = jwks.identity.retired(str(triage.signing_key.kid))
    clock.now += 61
    assert set(await trust.keys("triage")) == set(jwks.identity.public_keys)
    assert set(pins.names()["triage"]) == set(jwks.identity.public_keys)
    # An operator's act: forget the pin, and the next keys served are pinned.
    stranger = Identity.generate("triage")
    jwks.identity = stranger
    assert pins.forget("triage")
    clock.now += 61
    assert set(await trust.keys("triage")) == set(stranger.public_keys)


def test_trust_arguments_and_the_trust_file(tmp_path: Path) -> None:
    assert parse_trust("triage=http://t/") == TrustedAgent("triage", "http://t/")
    with pytest.raises(TrustError):
        parse_trust("triage")
    human = Identity.generate("human")
    (tmp_path / "human.jwks.json").write_text(json.dumps(human.jwks()))
    (tmp_path / "trust.yaml").write_text(
        "agents:\n"
        "  - {name: triage, url: 'http://t/', principal: svc-triage}\n"
        "  - {name: human, url: 'http://h/', jwks_file: human.jwks.json, approvals: true}\n"
    )
    triage, loaded = load_trust_file(tmp_path / "trust.yaml")
    assert triage.caller == "svc-triage"
    assert triage.pinned is None
    assert loaded.approvals
    assert set(loaded.pinned or {}) == set(human.public_keys)
    (tmp_path / "bad.yaml").write_text("agents: [{name: x}]\n")
    with pytest.raises(TrustError, match="name and a url"):
        load_trust_file(tmp_path / "bad.yaml")


def test_urls_and_lookup_by_url() -> None:
    trust = TrustList([TrustedAgent("billing", "http://b1/,http://b2/")])
    assert trust.urls() == ["http://b1/", "http://b2/"]
    by_url = trust.by_url("http://b2")
    assert by_url is not None
    assert by_url.name == "billing"
    assert trust.by_url("http://elsewhere/") is None
