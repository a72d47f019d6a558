"""Receiver pieces that need no agents: what a received task records about its handoff."""

from __future__ import annotations

import hashlib

import pytest

from a2a_handoff.handoff.receiver import receive_metadata
from a2a_handoff.handoff.verified import verify
from a2a_handoff.trust.canonical import canonical
from a2a_handoff.trust.trustlist import TrustList
from tests.a2a_handoff.handoff.test_delivery import envelope
from tests.trust_support import Signer

pytestmark = pytest.mark.anyio


async def test_a_received_task_records_its_envelope_digest_and_signer() -> None:
    signer = Signer("triage")
    trust = TrustList([signer.trusted()])
    env = envelope()
    signed = signer.metadata(env)
    verified = await verify(*signed.values(), "", trust, "billing")
    recorded = receive_metadata(verified)
    assert recorded["envelopeDigest"] == hashlib.sha256(canonical(env.dump())).hexdigest()
    assert recorded["handoff"]["signer"] == "triage"
    assert recorded["handoff"]["kid"] == signer.key.kid
    other = signer.metadata(envelope(reason="something else"))
    assert (await verify(*other.values(), "", trust, "billing")).digest != verified.digest
