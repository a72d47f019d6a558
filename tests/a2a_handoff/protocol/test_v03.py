"""A2A 0.3 shapes ↔ 1.0: what a 0.3 client sends becomes the 1.0 request, and 1.0 answers
become what a 0.3 client parses."""

from __future__ import annotations

from a2a_handoff.protocol.agent_card import AgentCard, build_card
from a2a_handoff.protocol.models import Message, SendMessageRequest
from a2a_handoff.protocol.v03 import (
    card_v03,
    message_from_v03,
    result_to_v03,
    send_params_from_v03,
    state_to_v03,
    stream_item_to_v03,
)


def test_states_are_lowercase_and_transferred_is_completed() -> None:
    assert state_to_v03("TASK_STATE_INPUT_REQUIRED") == "input-required"
    assert state_to_v03("TASK_STATE_AUTH_REQUIRED") == "auth-required"
    assert state_to_v03("TASK_STATE_CANCELED") == "canceled"
    assert state_to_v03("TASK_STATE_TRANSFERRED") == "completed"
    assert state_to_v03("TASK_STATE_UNSPECIFIED") == "unknown"


def test_a_0_3_send_becomes_a_valid_1_0_request() -> None:
    params = {
        "message": {
            "kind": "message",
            "messageId": "m1",
            "role": "user",
            "contextId": "c1",
            "parts": [
                {"kind": "text", "text": "hello", "metadata": {"k": 1}},
                {"kind": "file", "file": {"bytes": "aGk=", "mimeType": "text/plain", "name": "a"}},
                {"kind": "file", "file": {"uri": "https://x.test/f"}},
                {"kind": "data", "data": {"a": 1}},
                {"kind": "data", "data": {"value": [1, 2]}, "metadata": {"data_part_compat": True}},
            ],
        },
        "configuration": {"blocking": False, "historyLength": 2, "acceptedOutputModes": []},
    }
    request = SendMessageRequest.model_validate(send_params_from_v03(params))
    message = request.message
    assert message.role.value == "ROLE_USER"
    assert message.context_id == "c1"
    parts = [p.dump() for p in message.parts]
    assert parts == [
        {"text": "hello", "metadata": {"k": 1}},
        {"raw": "aGk=", "mediaType": "text/plain", "filename": "a"},
        {"url": "https://x.test/f"},
        {"data": {"a": 1}},
        {"data": [1, 2]},
    ]
    assert request.configuration is not None
    assert request.configuration.return_immediately is True
    assert request.configuration.history_length == 2
    blocking = send_params_from_v03({"message": params["message"], "configuration": {}})
    assert "returnImmediately" not in blocking["configuration"]
    pushed = send_params_from_v03(
        {"message": params["message"], "configuration": {"pushNotificationConfig": {"url": "u"}}}
    )
    assert pushed["configuration"]["taskPushNotificationConfig"] == {"url": "u"}


def test_odd_0_3_input_is_left_for_the_model_to_refuse() -> None:
    assert message_from_v03("nope") == "nope"
    odd = message_from_v03({"messageId": "m", "role": 3, "parts": [{"kind": "video"}, 7]})
    assert odd["parts"] == [{"kind": "video"}, 7]
    assert odd["role"] == 3


def test_a_task_answer_is_kind_tagged_and_unwrapped() -> None:
    task = {
        "id": "t",
        "contextId": "c",
        "status": {
            "state": "TASK_STATE_TRANSFERRED",
            "message": {"messageId": "a", "role": "ROLE_AGENT", "parts": [{"text": "moved"}]},
            "timestamp": "2026-01-01T00:00:00.000Z",
        },
        "artifacts": [
            {"artifactId": "x", "parts": [{"raw": "aGk=", "filename": "f", "mediaType": "a/b"}]},
            {"artifactId": "y", "parts": [{"data": 5}, {"url": "https://x.test"}]},
        ],
        "history": [{"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "hi"}]}],
        "metadata": {"urn:a2a-handoff:ext:handoff:v1": {"state": "TRANSFERRED"}},
    }
    out = result_to_v03({"task": task})
    assert out["kind"] == "task"
    assert out["status"]["state"] == "completed"
    assert out["status"]["message"]["kind"] == "message"
    assert out["status"]["message"]["role"] == "agent"
    assert out["artifacts"][0]["parts"] == [
        {"kind": "file", "file": {"bytes": "aGk=", "mimeType": "a/b", "name": "f"}}
    ]
    assert out["artifacts"][1]["parts"] == [
        {"kind": "data", "data": {"value": 5}, "metadata": {"data_part_compat": True}},
        {"kind": "file", "file": {"uri": "https://x.test"}},
    ]
    assert out["history"][0] == {
        "kind": "message",
        "messageId": "m",
        "role": "user",
        "parts": [{"kind": "text", "text": "hi"}],
    }
    assert out["metadata"] == task["metadata"]
    assert result_to_v03(task) == out  # GetTask answers the Task itself
    reply = result_to_v03({"message": Message.model_validate(task["history"][0]).dump()})
    assert reply["kind"] == "message"


def test_status_events_are_final_where_a_stream_ends() -> None:
    def update(state: str) -> dict[str, object]:
        event = {"taskId": "t", "contextId": "c", "status": {"state": state}}
        return stream_item_to_v03({"statusUpdate": event})

    assert update("TASK_STATE_WORKING")["final"] is False
    assert update("TASK_STATE_COMPLETED")["final"] is True
    assert update("TASK_STATE_INPUT_REQUIRED")["final"] is True
    assert update("TASK_STATE_WORKING")["kind"] == "status-update"
    chunk = stream_item_to_v03(
        {
            "artifactUpdate": {
                "taskId": "t",
                "contextId": "c",
                "artifact": {"artifactId": "a", "parts": [{"text": "x"}]},
                "append": True,
                "lastChunk": False,
            }
        }
    )
    assert chunk["kind"] == "artifact-update"
    assert chunk["append"] is True
    assert chunk["lastChunk"] is False
    assert chunk["artifact"]["parts"] == [{"kind": "text", "text": "x"}]


def test_the_0_3_card_members() -> None:
    card = {
        "supportedInterfaces": [
            {"url": "http://h/", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
            {"url": "http://h", "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"},
        ],
        "securitySchemes": {
            "apiKey": {"apiKeySecurityScheme": {"location": "header", "name": "X-API-Key"}},
            "bearer": {"httpAuthSecurityScheme": {"scheme": "Bearer"}},
        },
        "securityRequirements": [{"schemes": {"apiKey": {"list": []}}}],
    }
    out = card_v03(card)
    assert out["url"] == "http://h/"
    assert out["preferredTransport"] == "JSONRPC"
    assert out["protocolVersion"] == "0.3.0"
    assert out["additionalInterfaces"] == [{"url": "http://h/", "transport": "JSONRPC"}]
    assert out["securitySchemes"] == {
        "apiKey": {"type": "apiKey", "in": "header", "name": "X-API-Key"},
        "bearer": {"type": "http", "scheme": "bearer"},
    }
    assert out["security"] == [{"apiKey": []}]


def test_a_card_carrying_the_0_3_members_reads_back_as_the_1_0_card() -> None:
    """A card that serves 0.3 clients too (a gateway's) has its schemes in 0.3's form: a 1.0
    reader — our client — reads each as its 1.0 member, not as an invalid scheme."""
    schemes = {
        "apiKey": {"apiKeySecurityScheme": {"location": "header", "name": "X-API-Key"}},
        "bearer": {"httpAuthSecurityScheme": {"scheme": "bearer", "bearerFormat": "JWT"}},
        "oauth": {"oauth2SecurityScheme": {"flows": {"clientCredentials": {"tokenUrl": "t"}}}},
        "oidc": {"openIdConnectSecurityScheme": {"openIdConnectUrl": "https://i/.wk"}},
        "mtls": {"mtlsSecurityScheme": {}},
    }
    card = build_card("gateway", "http://h/").dump()
    card["securitySchemes"] = schemes
    served = {**card, **card_v03(card)}
    assert served["securitySchemes"]["apiKey"]["type"] == "apiKey"  # as 0.3 clients read it
    read = AgentCard.model_validate(served).dump()
    assert read["securitySchemes"] == schemes
