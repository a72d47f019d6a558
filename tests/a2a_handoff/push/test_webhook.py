"""One delivery's request: cut off at its deadline, signed for its receiver, on a share of the
connections that is its receiver's own."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest
from joserfc.jwk import OKPKey

from a2a_handoff.errors import SignatureError
from a2a_handoff.push import (
    DELIVERY_SIGNATURE_HEADER,
    DELIVERY_TYP,
    PushSettings,
    delivery_claims,
    parse_config,
)
from a2a_handoff.push._receivers import ReceiverGates, origin_of
from a2a_handoff.push._webhook import Webhook
from a2a_handoff.trust.signing import verify_detached
from tests.push_receiver import SlowReceiver

pytestmark = pytest.mark.anyio

KEY = OKPKey.generate_key("Ed25519", parameters={"kid": "agent-key"})
PUBLIC = {"agent-key": OKPKey.import_key(KEY.as_dict(private=False))}


@pytest.fixture
def slow() -> Iterator[SlowReceiver]:
    receiver = SlowReceiver(interval=0.5).start()  # its whole answer: over 20 s
    yield receiver
    receiver.close()


async def test_an_answer_trickled_byte_by_byte_is_cut_off_at_the_deadline(
    slow: SlowReceiver,
) -> None:
    # Each byte comes well within the 2 s read timeout: only the deadline ends the attempt.
    settings = PushSettings(allow=("127.0.0.1",), timeout=2.0, deadline=1.0)
    webhook = Webhook(settings, lambda: KEY)
    config = parse_config({"url": slow.url}, "task-1")
    started = time.monotonic()
    try:
        error = await webhook.attempt(config, b"{}", "task-1:c:1")
    finally:
        await webhook.aclose()
    assert error is not None
    assert "deadline" in error
    assert time.monotonic() - started < 5  # not the 20 s the receiver would have taken
    assert slow.answered == 0


def test_the_delivery_signature_binds_the_url_the_delivery_id_and_the_body() -> None:
    webhook = Webhook(PushSettings(), lambda: KEY)
    config = parse_config({"url": "https://hooks.example.com/a2a"}, "task-1")
    body, did = b'{"statusUpdate":{}}', "task-1:c:3"
    signature = webhook.headers(config, body, did)[DELIVERY_SIGNATURE_HEADER]
    verify_detached(signature, delivery_claims(config.url, did, body), PUBLIC, DELIVERY_TYP)
    for claims in (
        delivery_claims("https://other.example.com/a2a", did, body),
        delivery_claims(config.url, "task-1:c:4", body),
        delivery_claims(config.url, did, b'{"statusUpdate":{"x":1}}'),
    ):
        with pytest.raises(SignatureError):
            verify_detached(signature, claims, PUBLIC, DELIVERY_TYP)


def test_a_receiver_is_its_origin_with_the_port_made_explicit() -> None:
    assert origin_of("https://Hooks.Example.com/a") == origin_of("https://hooks.example.com:443/b")
    assert origin_of("http://127.0.0.1/a") == "http://127.0.0.1:80"
    assert origin_of("http://127.0.0.1:8080/a") != origin_of("http://127.0.0.1:8081/a")


async def test_a_busy_receiver_makes_only_its_own_deliveries_wait() -> None:
    gates = ReceiverGates(limit=2)
    release, two_seated = asyncio.Event(), asyncio.Event()
    seated: list[str] = []

    async def deliver(url: str) -> None:
        async with gates.seat(url):
            seated.append(url)
            if len(seated) == 2:
                two_seated.set()
            if "slow" in url:
                await release.wait()

    slow = [asyncio.create_task(deliver("http://slow.example:1/h")) for _ in range(3)]
    await two_seated.wait()
    await asyncio.wait_for(deliver("http://fast.example:1/h"), timeout=1)  # not kept waiting
    assert seated.count("http://slow.example:1/h") == 2  # the third waits for a seat
    release.set()
    await asyncio.gather(*slow)
    assert len(seated) == 4
    assert len(gates) == 0  # every gate gone once unused
