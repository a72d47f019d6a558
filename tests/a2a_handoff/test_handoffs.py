"""Pieces of the handoff module that need no agents: the create call's params, digests."""

from __future__ import annotations

import json

from a2a_handoff._handoffs import _create_params, envelope_digest, receive_metadata
from a2a_handoff.envelope import HandoffEnvelope, SourceRef, TargetRef, derive_key, root_key_for
from a2a_handoff.extension import HANDOFF_EXTENSION_URI as URI
from a2a_handoff.models import (
    Message,
    Part,
    Role,
    SendMessageRequest,
    Task,
    TaskStatus,
    utc_now,
)
from a2a_handoff.states import TaskState


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


def received_task(env: HandoffEnvelope, **metadata: object) -> Task:
    """A task as the target stores it: the handoff message first in its history."""
    params = json.loads(_create_params(env, env.dump_json()))
    message = SendMessageRequest.model_validate(params).message
    return Task(
        id="t1",
        context_id=env.context_id,
        status=TaskStatus(state=TaskState.WORKING),
        history=[message, Message(message_id="m2", role=Role.AGENT, parts=[Part(text="ok")])],
        metadata={URI: {**receive_metadata(env), **metadata}},
    )


def test_create_params_carry_the_envelope_and_point_back_at_the_source() -> None:
    env = envelope()
    params = json.loads(_create_params(env, env.dump_json()))
    request = SendMessageRequest.model_validate(params)  # a valid A2A SendMessage
    message = request.message
    assert message.metadata is not None
    assert HandoffEnvelope.model_validate(message.metadata[URI]) == env
    assert message.reference_task_ids == ["t0"]
    assert message.context_id == "c1"
    assert [p.text for p in message.parts] == ["A refund on order 12345", None]
    assert message.parts[1].data == env.transfer_context
    assert request.configuration is not None
    assert request.configuration.return_immediately is True
    assert request.configuration.history_length == 0


def test_a_replay_digest_is_derived_from_the_envelope_the_task_keeps() -> None:
    env = envelope()
    task = received_task(env)
    assert envelope_digest(task) == env.digest()
    assert envelope_digest(task) != envelope(reason="something else").digest()


def test_a_digest_recorded_by_an_earlier_version_is_used_as_it_is() -> None:
    task = received_task(envelope(), envelopeDigest="recorded")
    assert envelope_digest(task) == "recorded"


def test_a_task_without_a_readable_envelope_has_no_digest() -> None:
    task = received_task(envelope()).model_copy(update={"history": None})
    assert envelope_digest(task) is None
