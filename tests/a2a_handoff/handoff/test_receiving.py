"""The receiving side's shortcuts keep every check: what a handoff's task starts with is a
valid message, an over-deep envelope never reaches it, expiry and address still refuse."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from a2a_handoff import MemoryTaskStore, TrustConfig
from a2a_handoff.handoff.envelope import TargetRef
from a2a_handoff.handoff.receiver import HandoffReceiver, receive_metadata, signed_message
from a2a_handoff.handoff.settings import HandoffSettings
from a2a_handoff.protocol.extension import HANDOFF_EXTENSION_URI as URI
from a2a_handoff.protocol.extension import SIGNATURE_KEY
from a2a_handoff.protocol.models import MAX_JSON_DEPTH, Message, Part, Role
from a2a_handoff.trust.trustlist import TrustList
from tests.a2a_handoff.handoff.test_delivery import envelope
from tests.a2a_handoff.server.test_methods import URL, Recorder, serve
from tests.trust_support import Signer

pytestmark = pytest.mark.anyio

SIGNER = Signer("triage")


def receiver(**settings: Any) -> HandoffReceiver:
    options = {"agent_name": "billing", "agent_url": "http://127.0.0.1:2/", **settings}
    return HandoffReceiver(
        HandoffSettings(**options), MemoryTaskStore(), TrustList([SIGNER.trusted()])
    )


async def test_the_signed_message_is_the_message_validation_would_make() -> None:
    context = {"intent": "refund", "summary": "A refund", "nested": {"a": [1, {"b": None}]}}
    verified = await receiver().verify(SIGNER.metadata(envelope(transfer_context=context)), "")
    made = signed_message(verified)
    env = verified.envelope
    validated = Message(
        message_id=f"handoff-{env.idempotency_key}",
        role=Role.USER,
        parts=[Part(text=env.summary), Part(data=env.transfer_context)],
        context_id=env.context_id,
        extensions=[URI],
        reference_task_ids=[env.source.task_id],
        metadata={URI: verified.signed, SIGNATURE_KEY: verified.signature},
    )
    assert made == validated
    assert made.dump() == validated.dump()
    assert Message.model_validate(made.dump()) == made
    # Each message is its own: the templates it is copied from never change.
    again = signed_message(verified)
    again.parts[0].__dict__["text"] = "changed"
    assert signed_message(verified).parts[0].text == env.summary


def test_the_source_as_recorded_is_its_dump() -> None:
    source = envelope().source
    assert source.as_wire() == source.dump()


async def test_a_received_task_records_the_source_as_the_envelope_names_it() -> None:
    verified = await receiver().verify(SIGNER.metadata(envelope()), "")
    assert receive_metadata(verified)["handoff"]["source"] == verified.envelope.source.dump()


def nested(depth: int) -> Any:
    value: Any = "bottom"
    for _ in range(depth):
        value = {"x": value}
    return value


async def test_an_envelope_nested_too_deep_is_refused_before_any_task() -> None:
    # signed_message no longer validates the envelope again: the depth bound of the message
    # that carried it is what keeps an over-deep transfer context out of the store.
    agent = Recorder()
    for depth, refused in ((MAX_JSON_DEPTH - 8, False), (MAX_JSON_DEPTH + 1, True)):
        env = envelope(
            idempotency_key=uuid.uuid4().hex,
            target=TargetRef(agent="echo", url=URL),
            transfer_context={"summary": "deep", "deep": nested(depth)},
        )
        params = {
            "message": {
                "messageId": f"handoff-{env.idempotency_key}",
                "role": "ROLE_USER",
                "parts": [{"text": "x"}],
                "contextId": env.context_id,
                "metadata": SIGNER.metadata(env),
            }
        }
        async for client in serve(
            agent, MemoryTaskStore(), trust=TrustConfig(trusted=[SIGNER.trusted()])
        ):
            answer = await client.call("SendMessage", params)
            if refused:
                assert answer["error"]["code"] == -32602, answer
                assert "nested deeper" in answer["error"]["message"]
                listed = await client.call("ListTasks", {})
                assert listed["result"]["tasks"] == []
            else:
                assert "result" in answer, answer
    assert agent.runs == 1


async def test_an_expired_envelope_is_still_refused() -> None:
    receiving = receiver()
    old = (datetime.now(UTC) - timedelta(seconds=301)).isoformat().replace("+00:00", "Z")
    fresh = await receiving.verify(SIGNER.metadata(envelope(ttl_seconds=300)), "")
    stale = await receiving.verify(SIGNER.metadata(envelope(created_at=old, ttl_seconds=300)), "")
    assert receiving.refusal(fresh) is None
    assert receiving.refusal(stale) == ("envelope_expired", "envelope expired after 300 s")
    assert stale.envelope.expired()
    assert not fresh.envelope.expired()
    now = datetime.now(UTC)
    assert stale.envelope.expired(now)
    assert not fresh.envelope.expired(now)


async def test_a_misaddressed_envelope_is_refused_every_time_not_only_the_first() -> None:
    receiving = receiver()
    elsewhere = TargetRef(agent="billing", url="http://127.0.0.1:9/")
    right = await receiving.verify(SIGNER.metadata(envelope()), "")
    wrong = await receiving.verify(SIGNER.metadata(envelope(target=elsewhere)), "")
    for _ in range(2):  # the second answer comes from the memo
        assert receiving.refusal(right) is None
        refusal = receiving.refusal(wrong)
        assert refusal is not None
        assert refusal[0] == "misaddressed"
    # Other settings (another address) are never answered from the memo of the first.
    receiving.settings = HandoffSettings(agent_name="billing", agent_url="http://127.0.0.1:9/")
    refusal = receiving.refusal(right)
    assert refusal is not None
    assert refusal[0] == "misaddressed"
    assert receiving.refusal(wrong) is None
