"""Delivery pieces that need no agents: the params of the call creating the successor."""

from __future__ import annotations

import datetime
import decimal
import json
import uuid

from a2a_handoff.canonical import canonical
from a2a_handoff.handoff.envelope import (
    HandoffEnvelope,
    SourceRef,
    TargetRef,
    derive_key,
    root_key_for,
)
from a2a_handoff.handoff.wire import create_params
from a2a_handoff.protocol.extension import HANDOFF_EXTENSION_URI as URI
from a2a_handoff.protocol.extension import SIGNATURE_KEY
from a2a_handoff.protocol.models import SendMessageRequest, utc_now


def envelope(**changes: object) -> HandoffEnvelope:
    root = root_key_for("http://127.0.0.1:1/", "t0")
    made = HandoffEnvelope(
        handoff_id="h1",
        idempotency_key=derive_key(root, 1),
        root_key=root,
        context_id="c1",
        source=SourceRef(agent="triage", url="http://127.0.0.1:1/", task_id="t0"),
        target=TargetRef(agent="billing", url="http://127.0.0.1:2/"),
        reason="refund request",
        transfer_context={"intent": "refund", "summary": "A refund on order 12345", "n": [1]},
        hop=1,
        visited=["triage"],
        trace_id="0" * 32,
        created_at=utc_now(),
    )
    return made.model_copy(update=changes)


def test_create_params_carry_the_envelope_and_point_back_at_the_source() -> None:
    env = envelope()
    params = json.loads(create_params(env, canonical(env.dump()).decode(), "a.b.c"))
    request = SendMessageRequest.model_validate(params)  # a valid A2A SendMessage
    message = request.message
    assert message.metadata is not None
    assert HandoffEnvelope.model_validate(message.metadata[URI]) == env
    assert message.metadata[SIGNATURE_KEY] == "a.b.c"  # the signature travels beside it
    assert message.reference_task_ids == ["t0"]
    assert message.context_id == "c1"
    assert [p.text for p in message.parts] == ["A refund on order 12345", None]
    assert message.parts[1].data == env.transfer_context
    assert request.configuration is not None
    assert request.configuration.return_immediately is True
    assert request.configuration.history_length == 0


def test_context_values_json_lacks_are_sent_as_the_envelope_holds_them() -> None:
    # A handler's context may hold dates, UUIDs and decimals: pydantic writes them in the
    # envelope, and the data part of the create message must say the same.
    env = envelope(
        transfer_context={
            "when": datetime.date(2026, 11, 23),
            "id": uuid.UUID(int=7),
            "amount": decimal.Decimal("49.99"),
        }
    )
    stored = canonical(env.dump()).decode()
    message = json.loads(create_params(env, stored, "a.b.c"))["message"]
    assert message["parts"][1]["data"] == json.loads(stored)["transferContext"]
    assert message["parts"][1]["data"]["when"] == "2026-11-23"
