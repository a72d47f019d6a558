"""The `SendMessage` that carries a signed envelope to its target: a handoff's, a
delegation's, or its sender's withdrawal of one (`protocol.extension.WITHDRAW_KEY`)."""

from __future__ import annotations

import json

import pydantic_core

from a2a_handoff.handoff.envelope import HandoffEnvelope
from a2a_handoff.protocol.extension import HANDOFF_EXTENSION_URI as URI
from a2a_handoff.protocol.extension import SIGNATURE_KEY, WITHDRAW_KEY
from a2a_handoff.protocol.models import Role


def handoff_message_id(envelope: HandoffEnvelope) -> str:
    return f"handoff-{envelope.idempotency_key}"


def create_params(
    envelope: HandoffEnvelope, envelope_json: str, signature: str, *, withdraw: bool = False
) -> str:
    """The SendMessage params that create the successor, as JSON.

    The message carries the envelope in its metadata (`envelope_json`: the canonical JSON
    the outbox holds, so it is not encoded again) with its `signature` beside it, and points
    back at the source task. The source needs only the successor's id and status back:
    `historyLength: 0`. `withdraw`: the same message, withdrawing the handoff instead.
    """
    message = {
        "messageId": handoff_message_id(envelope),
        "role": _USER,
        "parts": [{"text": envelope.summary}, {"data": envelope.transfer_context}],
        "contextId": envelope.context_id,
        "extensions": [URI],
        "referenceTaskIds": [envelope.source.task_id],
    }
    # Encoded as pydantic encodes the envelope: a context may hold dates, UUIDs, decimals.
    head = pydantic_core.to_json(message).decode()[:-1]  # open: the metadata follows
    withdrawing = _WITHDRAW_MEMBER if withdraw else ""
    return (
        f'{{"message":{head}{_ENVELOPE_MEMBER}{envelope_json}{_SIGNATURE_MEMBER}'
        f"{json.dumps(signature)}{withdrawing}{_CONFIGURATION}"
    )


# The constant parts of `create_params`, encoded once.
_USER = Role.USER.value
_ENVELOPE_MEMBER = f',"metadata":{{{json.dumps(URI)}:'
_SIGNATURE_MEMBER = f",{json.dumps(SIGNATURE_KEY)}:"
_WITHDRAW_MEMBER = f",{json.dumps(WITHDRAW_KEY)}:true"
_CONFIGURATION = '}},"configuration":{"returnImmediately":true,"historyLength":0}}'
