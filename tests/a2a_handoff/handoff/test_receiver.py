"""Receiver pieces that need no agents: what a received task records about its handoff."""

from __future__ import annotations

from a2a_handoff.handoff.receiver import receive_metadata
from tests.a2a_handoff.handoff.test_delivery import envelope


def test_a_received_task_records_its_envelope_digest() -> None:
    env = envelope()
    assert receive_metadata(env)["envelopeDigest"] == env.digest()
    assert env.digest() != envelope(reason="something else").digest()
