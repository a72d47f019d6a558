"""The wire models against golden JSON from the A2A 1.0 specification.

Every golden object below is copied from the released A2A 1.0.0 specification
(`docs/specification.md` of a2aproject/A2A, section numbers cited per object) or, where the spec
only has a table, built from `specification/a2a.proto`. Where an example still carries 0.3-era
or draft members, or leaves out a member that 1.0 marks REQUIRED, it is adapted to 1.0 ProtoJSON
and the comment says how. Each adapted golden is also checked against the official `a2a-sdk`
protobuf types with a strict ProtoJSON parser (unknown members are an error), so the adaptation
itself is known to be valid 1.0.

For each golden: `Model.model_validate(golden).dump() == golden`, after dropping the members our
models deliberately ignore (named where it happens).
"""

from __future__ import annotations

import copy
import pickle
from typing import Any

import pytest
from a2a.types import a2a_pb2
from google.protobuf import json_format
from google.protobuf.message import Message as ProtoMessage
from pydantic import BaseModel, ValidationError

from a2a_handoff.protocol.agent_card import AgentCard, SecurityScheme
from a2a_handoff.protocol.models import (
    JSON_NULL,
    Artifact,
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    ListTasksResponse,
    Message,
    Part,
    Role,
    SendMessageRequest,
    SendMessageResponse,
    StreamResponse,
    SubscribeToTaskRequest,
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatusUpdateEvent,
    WireModel,
)
from a2a_handoff.protocol.rpc_envelopes import JsonRpcRequest, JsonRpcResponse

Json = dict[str, Any]


def assert_protojson(golden: Json, proto: type[ProtoMessage]) -> None:
    """The official 1.0 types parse `golden` strictly: it is valid 1.0 ProtoJSON."""
    json_format.ParseDict(copy.deepcopy(golden), proto(), ignore_unknown_fields=False)


def round_trip(model: type[WireModel], golden: Json) -> Json:
    return model.model_validate(copy.deepcopy(golden)).dump()


# -- Task ---------------------------------------------------------------------------------

# §6.1 Basic Task Execution, response `task` (verbatim).
TASK_BASIC: Json = {
    "id": "task-uuid",
    "contextId": "context-uuid",
    "status": {"state": "TASK_STATE_COMPLETED"},
    "artifacts": [
        {
            "artifactId": "artifact-uuid",
            "name": "Weather Report",
            "parts": [{"text": "Today will be sunny with a high of 75°F"}],
        }
    ],
}

# §6.7 File Exchange, "Response with File Reference" `task` (verbatim): a `url` part with
# `filename` and `mediaType`.
TASK_WITH_URL_ARTIFACT: Json = {
    "id": "43667960-d455-4453-b0cf-1bae4955270d",
    "contextId": "c295ea44-7543-4f78-b524-7a38915ad6e4",
    "status": {"state": "TASK_STATE_COMPLETED", "timestamp": "2024-03-15T12:05:00Z"},
    "artifacts": [
        {
            "artifactId": "9b6934dd-37e3-4eb1-8766-962efaab63a1",
            "name": "processed_image_with_faces.png",
            "parts": [
                {
                    "url": "https://storage.example.com/processed/task-bbb/output.png?token=xyz",
                    "filename": "output.png",
                    "mediaType": "image/png",
                }
            ],
        }
    ],
}

# §6.8 Structured Data Exchange, "Response with Structured Data" `task` (verbatim): a timestamp
# with microseconds, kept as the string it was sent as.
TASK_STRUCTURED: Json = {
    "id": "d8c6243f-5f7a-4f6f-821d-957ce51e856c",
    "contextId": "c295ea44-7543-4f78-b524-7a38915ad6e4",
    "status": {"state": "TASK_STATE_COMPLETED", "timestamp": "2025-04-17T17:47:09.680794Z"},
    "artifacts": [
        {
            "artifactId": "c5e0382f-b57f-4da7-87d8-b85171fad17c",
            "parts": [
                {
                    "text": '[{"ticketNumber":"REQ12312","description":"request for VPN access"},'
                    '{"ticketNumber":"REQ23422","description":"Add to DL - team-gcp-onboarding"}]'
                }
            ],
        }
    ],
}

# §6.5 Task Listing, "All working tasks across all contexts" response (verbatim): a
# ListTasksResponse whose task has a status message.
LIST_TASKS_RESPONSE: Json = {
    "tasks": [
        {
            "id": "789abc-def0-1234-5678-9abcdef01234",
            "contextId": "another-context-id",
            "status": {
                "state": "TASK_STATE_WORKING",
                "message": {
                    "role": "ROLE_AGENT",
                    "parts": [{"text": "Processing your document analysis..."}],
                    "messageId": "msg-status-update",
                },
                "timestamp": "2024-03-15T10:20:00Z",
            },
        }
    ],
    "totalSize": 1,
    "pageSize": 20,
    "nextPageToken": "",
}

# §6.3 Multi-Turn Interaction, "Response (Input Required)" `task`. Adapted: the example leaves
# out `contextId` (REQUIRED on Task) and the status message's `messageId` (REQUIRED on Message);
# both added.
TASK_INPUT_REQUIRED: Json = {
    "id": "task-uuid",
    "contextId": "context-uuid",
    "status": {
        "state": "TASK_STATE_INPUT_REQUIRED",
        "message": {
            "messageId": "msg-agent-1",
            "role": "ROLE_AGENT",
            "parts": [{"text": "I need more details. Where would you like to fly from and to?"}],
        },
    },
}


@pytest.mark.parametrize(
    "golden",
    [TASK_BASIC, TASK_WITH_URL_ARTIFACT, TASK_STRUCTURED, TASK_INPUT_REQUIRED],
    ids=["s6.1", "s6.7-url", "s6.8", "s6.3"],
)
def test_task_round_trips(golden: Json) -> None:
    assert_protojson(golden, a2a_pb2.Task)
    assert round_trip(Task, golden) == golden


def test_list_tasks_response_round_trips() -> None:
    assert_protojson(LIST_TASKS_RESPONSE, a2a_pb2.ListTasksResponse)
    assert round_trip(ListTasksResponse, LIST_TASKS_RESPONSE) == LIST_TASKS_RESPONSE


# -- Message and Part ---------------------------------------------------------------------

# §6.1 request `message` (verbatim): one text part.
MESSAGE_TEXT: Json = {
    "role": "ROLE_USER",
    "parts": [{"text": "What is the weather today?"}],
    "messageId": "msg-uuid",
}

# §6.3 "Follow-up Request" `message` (verbatim): a follow-up naming its task.
MESSAGE_FOLLOW_UP: Json = {
    "taskId": "task-uuid",
    "role": "ROLE_USER",
    "parts": [{"text": "From San Francisco to New York"}],
    "messageId": "msg-2",
}

# §6.7 "Request with File Upload" `message`: a text part and a `raw` file part. Adapted: the
# spec's JSON is not well-formed (a comma missing after `raw`, a trailing comma) and its bytes
# are truncated with "..." (not base64); the "..." is dropped, leaving valid base64 of the
# first 21 bytes of a PNG.
MESSAGE_TEXT_AND_RAW: Json = {
    "role": "ROLE_USER",
    "parts": [
        {"text": "Analyze this image and highlight any faces."},
        {
            "raw": "iVBORw0KGgoAAAANSUhEUgAAAAUA",
            "filename": "input_image.png",
            "mediaType": "image/png",
        },
    ],
    "messageId": "6dbc13b5-bd57-4c2b-b503-24e381b6c8d6",
}

# §6.8 request `message` (verbatim): a text part with part-level metadata.
MESSAGE_TEXT_WITH_METADATA: Json = {
    "role": "ROLE_USER",
    "parts": [
        {
            "text": "Show me a list of my open IT tickets",
            "metadata": {
                "mediaType": "application/json",
                "schema": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "ticketNumber": {"type": "string"},
                            "description": {"type": "string"},
                        },
                    },
                },
            },
        }
    ],
    "messageId": "85b26db5-ffbb-4278-a5da-a7b09dea1b47",
}

# §4.6.2 "Message Extensions" example: `extensions` and extension metadata. Adapted: the example
# has no `messageId` (REQUIRED); one is added.
MESSAGE_WITH_EXTENSION: Json = {
    "messageId": "msg-geo-1",
    "role": "ROLE_USER",
    "parts": [{"text": "Find restaurants near me"}],
    "extensions": ["https://example.com/extensions/geolocation/v1"],
    "metadata": {
        "https://example.com/extensions/geolocation/v1": {
            "latitude": 37.7749,
            "longitude": -122.4194,
            "accuracy": 10.0,
            "timestamp": "2025-10-21T14:30:00Z",
        }
    },
}

# A message with every member, from the proto's `Message` (the spec has no such example):
# contextId, taskId and referenceTaskIds, with a `data` part.
MESSAGE_FULL: Json = {
    "messageId": "m-full",
    "contextId": "ctx-1",
    "taskId": "task-2",
    "role": "ROLE_AGENT",
    "parts": [{"data": {"answer": 42, "tags": ["a", "b"]}, "mediaType": "application/json"}],
    "metadata": {"k": "v"},
    "extensions": ["urn:example:ext"],
    "referenceTaskIds": ["task-1"],
}


@pytest.mark.parametrize(
    "golden",
    [
        MESSAGE_TEXT,
        MESSAGE_FOLLOW_UP,
        MESSAGE_TEXT_AND_RAW,
        MESSAGE_TEXT_WITH_METADATA,
        MESSAGE_WITH_EXTENSION,
        MESSAGE_FULL,
    ],
    ids=["s6.1", "s6.3", "s6.7-raw", "s6.8", "s4.6.2", "proto-full"],
)
def test_message_round_trips(golden: Json) -> None:
    assert_protojson(golden, a2a_pb2.Message)
    assert round_trip(Message, golden) == golden


# Appendix A.2.1, "Current Pattern (v1.0)" parts. Adapted: the FilePart's bytes are truncated
# with "..." in the spec ("iVBORw0KGgo..."); completed to the valid base64 of the 8-byte PNG
# signature. The DataPart's `{...}` placeholder is filled with the first ticket of §6.8.
PART_TEXT: Json = {"text": "Hello, world!"}
PART_RAW: Json = {"raw": "iVBORw0KGgo=", "filename": "diagram.png", "mediaType": "image/png"}
PART_DATA: Json = {
    "data": {"ticketNumber": "REQ12312", "description": "request for VPN access"},
    "mediaType": "application/json",
}
# §6.7 response artifact part (verbatim).
PART_URL: Json = {
    "url": "https://storage.example.com/processed/task-bbb/output.png?token=xyz",
    "filename": "output.png",
    "mediaType": "image/png",
}


@pytest.mark.parametrize(
    "golden",
    [
        PART_TEXT,
        PART_RAW,
        PART_DATA,
        PART_URL,
        # `data` is a google.protobuf.Value: any JSON value, not only objects.
        {"data": [1, "two", {"three": 3.5}]},
        {"data": "a string"},
        {"data": 0},
        {"data": False},
    ],
    ids=["text", "raw", "data", "url", "data-list", "data-str", "data-zero", "data-false"],
)
def test_part_round_trips(golden: Json) -> None:
    assert_protojson(golden, a2a_pb2.Part)
    assert round_trip(Part, golden) == golden


def test_part_with_null_data_is_a_data_part() -> None:
    # `data` is `google.protobuf.Value data = 4` inside the `content` oneof; in ProtoJSON
    # `{"data": null}` sets that member to the null Value (the official SDK parses it as a data
    # part). It holds one content, so it must be accepted and written back unchanged.
    golden: Json = {"data": None}
    parsed = json_format.ParseDict(golden, a2a_pb2.Part())
    assert parsed.WhichOneof("content") == "data"
    assert round_trip(Part, golden) == golden


def test_null_data_stays_a_value_when_nested_and_copied() -> None:
    part = Part(data=None)  # explicitly null: a data part, unlike Part(text=...)
    assert part.data is JSON_NULL
    assert Part(text="a").data is None
    message = Message(message_id="m", role=Role.USER, parts=[part, Part(text="b")])
    again = Message.model_validate_json(message.dump_json())
    assert again.parts[0].data is JSON_NULL
    assert again.dump()["parts"] == [{"data": None}, {"text": "b"}]
    assert copy.deepcopy(part).data is JSON_NULL
    assert pickle.loads(pickle.dumps(part)).data is JSON_NULL
    assert part.model_copy().dump() == {"data": None}
    assert not part.data  # falsy, as the null it stands for


@pytest.mark.parametrize(
    "bad",
    [
        {"text": "a", "url": "https://example.com/a"},
        {"text": "a", "data": {"b": 1}},
        {"raw": "iVBORw0KGgo=", "url": "https://example.com/a"},
        {"text": "a", "raw": "iVBORw0KGgo=", "url": "u", "data": 1},
    ],
    ids=["text+url", "text+data", "raw+url", "all-four"],
)
def test_part_with_two_contents_is_refused(bad: Json) -> None:
    with pytest.raises(ValidationError, match="exactly one"):
        Part.model_validate(bad)


@pytest.mark.parametrize(
    "bad",
    [
        {},
        {"mediaType": "text/plain", "filename": "a.txt"},
        {"metadata": {"k": "v"}},
        # The 0.3 FilePart: `kind` and `file` are unknown in 1.0, so this part has no content.
        {"kind": "file", "file": {"name": "a.png", "mimeType": "image/png", "bytes": "AAAA"}},
    ],
    ids=["empty", "only-file-metadata", "only-metadata", "v0.3-file-part"],
)
def test_part_without_content_is_refused(bad: Json) -> None:
    with pytest.raises(ValidationError, match="exactly one"):
        Part.model_validate(bad)


def test_raw_must_be_base64() -> None:
    with pytest.raises(ValidationError, match="base64"):
        Part.model_validate({"raw": "iVBORw0KGgoAAAANSUhEUgAAAAUA..."})


# -- Artifact -----------------------------------------------------------------------------

# §4.6.2 "Artifact Extensions" example (verbatim).
ARTIFACT_WITH_EXTENSION: Json = {
    "artifactId": "research-summary-001",
    "name": "Climate Change Summary",
    "parts": [
        {
            "text": "Global temperatures have risen by 1.1°C since pre-industrial times, with "
            "significant impacts on weather patterns and sea levels."
        }
    ],
    "extensions": ["https://standards.org/extensions/citations/v1"],
    "metadata": {
        "https://standards.org/extensions/citations/v1": {
            "sources": [
                {
                    "title": "Global Temperature Anomalies - 2023 Report",
                    "authors": ["Smith, J.", "Johnson, M."],
                    "url": "https://climate.gov/reports/2023-temperature",
                    "accessDate": "2025-10-21",
                    "relevantText": "Global temperatures have risen by 1.1°C",
                }
            ]
        }
    },
}


def test_artifact_round_trips() -> None:
    assert_protojson(ARTIFACT_WITH_EXTENSION, a2a_pb2.Artifact)
    assert round_trip(Artifact, ARTIFACT_WITH_EXTENSION) == ARTIFACT_WITH_EXTENSION


def test_artifact_needs_a_part() -> None:
    with pytest.raises(ValidationError, match="parts"):
        Artifact.model_validate({"artifactId": "a", "parts": []})


# -- Streaming events and StreamResponse --------------------------------------------------

# §6.6 "Later: Server POSTs Notification to Webhook" body (verbatim): a StreamResponse holding
# a TaskStatusUpdateEvent.
STREAM_STATUS_UPDATE: Json = {
    "statusUpdate": {
        "taskId": "43667960-d455-4453-b0cf-1bae4955270d",
        "contextId": "c295ea44-7543-4f78-b524-7a38915ad6e4",
        "status": {"state": "TASK_STATE_COMPLETED", "timestamp": "2024-03-15T18:30:00Z"},
    }
}

# §6.2 Streaming Task Execution, the three SSE `data:` items. Adapted: the spec's items leave
# out `contextId` (REQUIRED on Task and on both events) and `artifact.artifactId` (REQUIRED);
# they are added. The artifact update also sets `append`/`lastChunk` (proto fields 4 and 5).
STREAM_TASK: Json = {
    "task": {
        "id": "task-uuid",
        "contextId": "context-uuid",
        "status": {"state": "TASK_STATE_WORKING"},
    }
}
STREAM_ARTIFACT_UPDATE: Json = {
    "artifactUpdate": {
        "taskId": "task-uuid",
        "contextId": "context-uuid",
        "artifact": {
            "artifactId": "report",
            "parts": [{"text": "# Climate Change Report\n\n"}],
        },
        "append": False,
        "lastChunk": True,
    }
}
STREAM_FINAL_STATUS: Json = {
    "statusUpdate": {
        "taskId": "task-uuid",
        "contextId": "context-uuid",
        "status": {"state": "TASK_STATE_COMPLETED"},
    }
}
# §3.1.2 / §4.3.3: a stream may carry a single Message; the message is §6.5's status message.
STREAM_MESSAGE: Json = {"message": LIST_TASKS_RESPONSE["tasks"][0]["status"]["message"]}


def test_status_update_event_round_trips() -> None:
    event = STREAM_STATUS_UPDATE["statusUpdate"]
    assert_protojson(event, a2a_pb2.TaskStatusUpdateEvent)
    assert round_trip(TaskStatusUpdateEvent, event) == event


def test_artifact_update_event_round_trips() -> None:
    event = STREAM_ARTIFACT_UPDATE["artifactUpdate"]
    assert_protojson(event, a2a_pb2.TaskArtifactUpdateEvent)
    assert round_trip(TaskArtifactUpdateEvent, event) == event


@pytest.mark.parametrize(
    "golden",
    [
        STREAM_STATUS_UPDATE,
        STREAM_TASK,
        STREAM_ARTIFACT_UPDATE,
        STREAM_FINAL_STATUS,
        STREAM_MESSAGE,
    ],
    ids=["s6.6-status", "s6.2-task", "s6.2-artifact", "s6.2-status", "message"],
)
def test_stream_response_round_trips(golden: Json) -> None:
    assert_protojson(golden, a2a_pb2.StreamResponse)
    assert round_trip(StreamResponse, golden) == golden


def test_stream_response_holds_exactly_one_member() -> None:
    with pytest.raises(ValidationError, match="exactly one"):
        StreamResponse.model_validate({})
    with pytest.raises(ValidationError, match="exactly one"):
        StreamResponse.model_validate({**STREAM_TASK, **STREAM_FINAL_STATUS})


def test_v03_kind_discriminated_event_is_not_a_stream_item() -> None:
    # Appendix A.2.1: the 0.3 `{"kind": "status-update", ...}` form was replaced by the
    # `statusUpdate` member; read with 1.0 rules it holds no stream item at all.
    legacy = {"kind": "status-update", **STREAM_FINAL_STATUS["statusUpdate"]}
    with pytest.raises(ValidationError, match="exactly one"):
        StreamResponse.model_validate(legacy)


# -- AgentCard ----------------------------------------------------------------------------

# §8.5 Sample Agent Card. Adapted to 1.0: the sample's `"security": [{"google": [...]}]` is the
# 0.3 shape of what 1.0 calls `securityRequirements` (a list of `{"schemes": {NAME:
# StringList}}`), so it is rewritten in the 1.0 shape. The sample also sets
# `capabilities.stateTransitionHistory`, a capability 1.0 removed (proto field 4 is reserved):
# our model deliberately ignores it, so it is in the input and not in the expected dump.
CARD_SAMPLE: Json = {
    "name": "GeoSpatial Route Planner Agent",
    "description": "Provides advanced route planning, traffic analysis, and custom map "
    "generation services. This agent can calculate optimal routes, estimate travel times "
    "considering real-time traffic, and create personalized maps with points of interest.",
    "supportedInterfaces": [
        {
            "url": "https://georoute-agent.example.com/a2a/v1",
            "protocolBinding": "JSONRPC",
            "protocolVersion": "1.0",
        },
        {
            "url": "https://georoute-agent.example.com/a2a/grpc",
            "protocolBinding": "GRPC",
            "protocolVersion": "1.0",
        },
        {
            "url": "https://georoute-agent.example.com/a2a/json",
            "protocolBinding": "HTTP+JSON",
            "protocolVersion": "1.0",
        },
    ],
    "provider": {
        "organization": "Example Geo Services Inc.",
        "url": "https://www.examplegeoservices.com",
    },
    "iconUrl": "https://georoute-agent.example.com/icon.png",
    "version": "1.2.0",
    "documentationUrl": "https://docs.examplegeoservices.com/georoute-agent/api",
    "capabilities": {"streaming": True, "pushNotifications": True, "extendedAgentCard": True},
    "securitySchemes": {
        "google": {
            "openIdConnectSecurityScheme": {
                "openIdConnectUrl": "https://accounts.google.com/.well-known/openid-configuration"
            }
        }
    },
    "securityRequirements": [{"schemes": {"google": {"list": ["openid", "profile", "email"]}}}],
    "defaultInputModes": ["application/json", "text/plain"],
    "defaultOutputModes": ["application/json", "image/png"],
    "skills": [
        {
            "id": "route-optimizer-traffic",
            "name": "Traffic-Aware Route Optimizer",
            "description": "Calculates the optimal driving route between two or more locations, "
            "taking into account real-time traffic conditions, road closures, and user "
            "preferences (e.g., avoid tolls, prefer highways).",
            "tags": ["maps", "routing", "navigation", "directions", "traffic"],
            "examples": [
                "Plan a route from '1600 Amphitheatre Parkway, Mountain View, CA' to "
                "'San Francisco International Airport' avoiding tolls.",
                '{"origin": {"lat": 37.422, "lng": -122.084}, "destination": {"lat": 37.7749, '
                '"lng": -122.4194}, "preferences": ["avoid_ferries"]}',
            ],
            "inputModes": ["application/json", "text/plain"],
            "outputModes": ["application/json", "application/vnd.geo+json", "text/html"],
        },
        {
            "id": "custom-map-generator",
            "name": "Personalized Map Generator",
            "description": "Creates custom map images or interactive map views based on "
            "user-defined points of interest, routes, and style preferences. Can overlay data "
            "layers.",
            "tags": ["maps", "customization", "visualization", "cartography"],
            "examples": [
                "Generate a map of my upcoming road trip with all planned stops highlighted.",
                "Show me a map visualizing all coffee shops within a 1-mile radius of my "
                "current location.",
            ],
            "inputModes": ["application/json"],
            "outputModes": ["image/png", "image/jpeg", "application/json", "text/html"],
        },
    ],
    "signatures": [
        {
            "protected": "eyJhbGciOiJFUzI1NiIsInR5cCI6IkpPU0UiLCJraWQiOiJrZXktMSIsImprdSI6Imh0"
            "dHBzOi8vZXhhbXBsZS5jb20vYWdlbnQvandrcy5qc29uIn0",
            "signature": "QFdkNLNszlGj3z3u0YQGt_T9LixY3qtdQpZmsTdDHDe3fXV9y9-B3m2-XgCpzuhiLt8E0tV6"
            "HXoZKHv4GtHgKQ",
        }
    ],
}

# §4.6.1 "Agent declaring extension support in AgentCard" (capabilities.extensions, skills).
# Adapted: the example has no `version` (REQUIRED on AgentCard); one is added. (Its interface's
# trailing comma, not valid JSON, is gone in a Python literal.)
CARD_WITH_EXTENSIONS: Json = {
    "name": "Research Assistant Agent",
    "description": "AI agent for academic research and fact-checking",
    "version": "1.0.0",
    "supportedInterfaces": [
        {
            "url": "https://research-agent.example.com/a2a/v1",
            "protocolBinding": "HTTP+JSON",
            "protocolVersion": "0.3",
        }
    ],
    "capabilities": {
        "streaming": False,
        "pushNotifications": False,
        "extensions": [
            {
                "uri": "https://standards.org/extensions/citations/v1",
                "description": "Provides citation formatting and source verification",
                "required": False,
            },
            {
                "uri": "https://example.com/extensions/geolocation/v1",
                "description": "Location-based search capabilities",
                "required": False,
            },
        ],
    },
    "defaultInputModes": ["text/plain"],
    "defaultOutputModes": ["text/plain"],
    "skills": [
        {
            "id": "academic-research",
            "name": "Academic Research Assistant",
            "description": "Provides research assistance with citations and source verification",
            "tags": ["research", "citations", "academic"],
            "examples": ["Find peer-reviewed articles on climate change"],
            "inputModes": ["text/plain"],
            "outputModes": ["text/plain"],
        }
    ],
}

# API-key and HTTP bearer schemes as a 1.0 card carries them. The spec has no JSON example of
# these two; built from a2a.proto `SecurityScheme` (oneof member names) and §4.5.2/§4.5.3.
# An extension with `params` (a Struct) and a skill-level security requirement are added too.
CARD_API_KEY: Json = {
    "name": "echo",
    "description": "echo",
    "version": "1.0.0",
    "supportedInterfaces": [
        {"url": "http://127.0.0.1:8001/", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
    ],
    "capabilities": {
        "streaming": True,
        "extensions": [
            {
                "uri": "urn:a2a-handoff:ext:handoff:v1",
                "required": False,
                "params": {"capabilities": ["echo"], "contracts": []},
            }
        ],
    },
    "securitySchemes": {
        "apiKey": {
            "apiKeySecurityScheme": {
                "location": "header",
                "name": "X-API-Key",
                "description": "An API key",
            }
        },
        "bearer": {"httpAuthSecurityScheme": {"scheme": "Bearer", "bearerFormat": "opaque"}},
    },
    "securityRequirements": [
        {"schemes": {"apiKey": {"list": []}}},
        {"schemes": {"bearer": {"list": []}}},
    ],
    "defaultInputModes": ["text/plain"],
    "defaultOutputModes": ["text/plain"],
    "skills": [
        {
            "id": "echo",
            "name": "echo",
            "description": "Echo",
            "tags": ["echo"],
            "securityRequirements": [{"schemes": {"apiKey": {"list": ["read"]}}}],
        }
    ],
}


@pytest.mark.parametrize(
    "golden",
    [CARD_SAMPLE, CARD_WITH_EXTENSIONS, CARD_API_KEY],
    ids=["s8.5", "s4.6.1", "api-key"],
)
def test_agent_card_round_trips(golden: Json) -> None:
    assert_protojson(golden, a2a_pb2.AgentCard)
    assert round_trip(AgentCard, golden) == golden


def test_agent_card_ignores_capabilities_removed_in_1_0() -> None:
    # §8.5 verbatim has `capabilities.stateTransitionHistory` (gone in 1.0): ignored.
    sample = copy.deepcopy(CARD_SAMPLE)
    sample["capabilities"]["stateTransitionHistory"] = False
    assert round_trip(AgentCard, sample) == CARD_SAMPLE


def test_agent_card_v03_security_member_is_ignored() -> None:
    # The 0.3 `security` member (as printed in §8.5) is unknown in 1.0: ignored, not mistaken
    # for `securityRequirements`.
    sample = copy.deepcopy(CARD_SAMPLE)
    del sample["securityRequirements"]
    sample["security"] = [{"google": ["openid", "profile", "email"]}]
    dumped = round_trip(AgentCard, sample)
    assert "security" not in dumped
    assert "securityRequirements" not in dumped


def test_security_scheme_from_extended_card_example() -> None:
    # §6.9 Step 1, the public card's `securitySchemes.google` (verbatim).
    golden: Json = {
        "openIdConnectSecurityScheme": {
            "openIdConnectUrl": "https://accounts.google.com/.well-known/openid-configuration"
        }
    }
    assert_protojson(golden, a2a_pb2.SecurityScheme)
    assert round_trip(SecurityScheme, golden) == golden


def test_security_scheme_holds_exactly_one_member() -> None:
    with pytest.raises(ValidationError, match="exactly one"):
        SecurityScheme.model_validate({})
    with pytest.raises(ValidationError, match="exactly one"):
        SecurityScheme.model_validate(
            {
                "apiKeySecurityScheme": {"location": "header", "name": "X-API-Key"},
                "httpAuthSecurityScheme": {"scheme": "Bearer"},
            }
        )


# -- JSON-RPC -----------------------------------------------------------------------------


def rpc_dump(model: BaseModel) -> Json:
    return model.model_dump(mode="json", exclude_none=True)


# §9.4.3-§9.4.6 requests (verbatim) and the params model each is validated with.
RPC_REQUESTS: list[tuple[Json, type[WireModel], type[ProtoMessage]]] = [
    (
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "GetTask",
            "params": {"id": "task-uuid", "historyLength": 10},
        },
        GetTaskRequest,
        a2a_pb2.GetTaskRequest,
    ),
    (
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "ListTasks",
            "params": {
                "contextId": "context-uuid",
                "status": "TASK_STATE_WORKING",
                "pageSize": 50,
                "pageToken": "cursor-token",
            },
        },
        ListTasksRequest,
        a2a_pb2.ListTasksRequest,
    ),
    (
        {"jsonrpc": "2.0", "id": 4, "method": "CancelTask", "params": {"id": "task-uuid"}},
        CancelTaskRequest,
        a2a_pb2.CancelTaskRequest,
    ),
    (
        {"jsonrpc": "2.0", "id": 5, "method": "SubscribeToTask", "params": {"id": "task-uuid"}},
        SubscribeToTaskRequest,
        a2a_pb2.SubscribeToTaskRequest,
    ),
    # §9.4.1's envelope with `params: {/* SendMessageRequest */}` filled with the
    # SendMessageRequest of §11.4 (verbatim).
    (
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "SendMessage",
            "params": {
                "message": {
                    "messageId": "uuid",
                    "role": "ROLE_USER",
                    "parts": [{"text": "Hello"}],
                },
                "configuration": {"acceptedOutputModes": ["text/plain"]},
            },
        },
        SendMessageRequest,
        a2a_pb2.SendMessageRequest,
    ),
]


@pytest.mark.parametrize(
    ("golden", "params_model", "proto"),
    RPC_REQUESTS,
    ids=["s9.4.3", "s9.4.4", "s9.4.5", "s9.4.6", "s9.4.1+s11.4"],
)
def test_json_rpc_request_round_trips(
    golden: Json, params_model: type[WireModel], proto: type[ProtoMessage]
) -> None:
    request = JsonRpcRequest.model_validate(copy.deepcopy(golden))
    assert rpc_dump(request) == golden
    assert request.params is not None
    assert_protojson(request.params, proto)
    assert round_trip(params_model, request.params) == golden["params"]


def test_json_rpc_request_without_params() -> None:
    # §9.4.8 GetExtendedAgentCard (verbatim): no params at all.
    golden: Json = {"jsonrpc": "2.0", "id": 6, "method": "GetExtendedAgentCard"}
    request = JsonRpcRequest.model_validate(golden)
    assert request.params is None
    assert rpc_dump(request) == golden


def test_send_message_request_with_push_config() -> None:
    # §6.6 "Initial Request with Push Notification Config". Adapted to 1.0: the spec prints the
    # draft member `pushNotificationConfig` with `authentication.schemes` (a list); 1.0 names
    # it `taskPushNotificationConfig` and AuthenticationInfo has one `scheme`.
    golden: Json = {
        "message": {
            "role": "ROLE_USER",
            "parts": [
                {
                    "text": "Generate the Q1 sales report. This usually takes a while. "
                    "Notify me when it's ready."
                }
            ],
            "messageId": "6dbc13b5-bd57-4c2b-b503-24e381b6c8d6",
        },
        "configuration": {
            "taskPushNotificationConfig": {
                "url": "https://client.example.com/webhook/a2a-notifications",
                "token": "secure-client-token-for-task-aaa",
                "authentication": {"scheme": "Bearer"},
            }
        },
    }
    assert_protojson(golden, a2a_pb2.SendMessageRequest)
    assert round_trip(SendMessageRequest, golden) == golden


def test_send_message_response_round_trips() -> None:
    # §9.4.1's response envelope with `result: {/* SendMessageResponse */}` filled with the
    # `{"task": ...}` of §6.1 (verbatim).
    golden: Json = {"jsonrpc": "2.0", "id": 1, "result": {"task": TASK_BASIC}}
    response = JsonRpcResponse.model_validate(copy.deepcopy(golden))
    assert rpc_dump(response) == golden
    assert_protojson(golden["result"], a2a_pb2.SendMessageResponse)
    assert round_trip(SendMessageResponse, golden["result"]) == golden["result"]


@pytest.mark.parametrize(
    "golden",
    [
        # §9.5 "Error Response Structure" (verbatim).
        {
            "jsonrpc": "2.0",
            "id": 1,
            "error": {
                "code": -32602,
                "message": "Invalid parameters",
                "data": [
                    {
                        "@type": "type.googleapis.com/google.rpc.BadRequest",
                        "fieldViolations": [
                            {
                                "field": "message.parts",
                                "description": "At least one part is required",
                            }
                        ],
                    }
                ],
            },
        },
        # §9.5 "Example A2A-Specific Error Response" (verbatim).
        {
            "jsonrpc": "2.0",
            "id": 2,
            "error": {
                "code": -32001,
                "message": "Task not found",
                "data": [
                    {
                        "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                        "reason": "TASK_NOT_FOUND",
                        "domain": "a2a-protocol.org",
                        "metadata": {
                            "taskId": "nonexistent-task-id",
                            "timestamp": "2025-11-09T10:30:00.000Z",
                        },
                    }
                ],
            },
        },
        # JSON-RPC 2.0 §5: an error before the id could be read has `"id": null`.
        {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}},
    ],
    ids=["s9.5-invalid-params", "s9.5-task-not-found", "null-id"],
)
def test_json_rpc_error_round_trips(golden: Json) -> None:
    response = JsonRpcResponse.model_validate(copy.deepcopy(golden))
    dumped = response.model_dump(mode="json", exclude_none=True)
    # `id: null` is required on the wire even though it is None.
    dumped.setdefault("id", None)
    assert dumped == golden


def test_json_rpc_response_holds_result_or_error() -> None:
    with pytest.raises(ValidationError, match="exactly one"):
        JsonRpcResponse.model_validate({"jsonrpc": "2.0", "id": 1})
    with pytest.raises(ValidationError, match="exactly one"):
        JsonRpcResponse.model_validate(
            {"jsonrpc": "2.0", "id": 1, "result": {}, "error": {"code": -1, "message": "x"}}
        )
    # A null result is still a result.
    assert JsonRpcResponse.model_validate({"jsonrpc": "2.0", "id": 1, "result": None}).error is None


def test_json_rpc_request_shape() -> None:
    with pytest.raises(ValidationError):
        JsonRpcRequest.model_validate({"jsonrpc": "1.0", "id": 1, "method": "GetTask"})
    with pytest.raises(ValidationError):
        JsonRpcRequest.model_validate({"jsonrpc": "2.0", "id": 1, "method": ""})
    with pytest.raises(ValidationError):
        JsonRpcRequest.model_validate({"jsonrpc": "2.0", "id": 1, "method": "GetTask", "x": 1})


# -- ProtoJSON rules: unknown members, snake_case, enums by name --------------------------


def test_unknown_members_are_ignored_at_every_level() -> None:
    noisy = copy.deepcopy(TASK_WITH_URL_ARTIFACT)
    noisy["kind"] = "task"  # the 0.3 discriminator
    noisy["futureMember"] = {"anything": [1, 2]}
    noisy["status"]["progress"] = 0.5
    noisy["artifacts"][0]["index"] = 0  # a 0.2 member
    noisy["artifacts"][0]["parts"][0]["kind"] = "file"
    assert round_trip(Task, noisy) == TASK_WITH_URL_ARTIFACT


def test_snake_case_names_are_accepted() -> None:
    snake: Json = {
        "message_id": "m-full",
        "context_id": "ctx-1",
        "task_id": "task-2",
        "role": "ROLE_AGENT",
        "parts": [{"data": {"answer": 42, "tags": ["a", "b"]}, "media_type": "application/json"}],
        "metadata": {"k": "v"},
        "extensions": ["urn:example:ext"],
        "reference_task_ids": ["task-1"],
    }
    assert round_trip(Message, snake) == MESSAGE_FULL


def test_snake_case_agent_card_is_accepted() -> None:
    snake: Json = {
        "name": "a",
        "description": "d",
        "version": "1",
        "supported_interfaces": [
            {"url": "http://x/", "protocol_binding": "JSONRPC", "protocol_version": "1.0"}
        ],
        "capabilities": {"push_notifications": False, "extended_agent_card": False},
        "default_input_modes": ["text/plain"],
        "default_output_modes": ["text/plain"],
        "skills": [],
        "icon_url": "http://x/icon.png",
    }
    assert round_trip(AgentCard, snake) == {
        "name": "a",
        "description": "d",
        "version": "1",
        "supportedInterfaces": [
            {"url": "http://x/", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
        ],
        "capabilities": {"pushNotifications": False, "extendedAgentCard": False},
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"],
        "skills": [],
        "iconUrl": "http://x/icon.png",
    }


def test_task_states_are_the_proto_enum_names() -> None:
    proto_states = {
        value.name
        for value in a2a_pb2.TaskState.DESCRIPTOR.values
        if value.name != "TASK_STATE_UNSPECIFIED"
    }
    # TRANSFERRED is internal (rendered per client by the handoff extension); every other
    # state is exactly a 1.0 enum name.
    ours = {state.value for state in TaskState if state is not TaskState.TRANSFERRED}
    assert ours == proto_states
    proto_roles = {
        value.name for value in a2a_pb2.Role.DESCRIPTOR.values if value.name != "ROLE_UNSPECIFIED"
    }
    assert {role.value for role in Role} == proto_roles


@pytest.mark.parametrize("state", sorted(s.value for s in TaskState if s.name != "TRANSFERRED"))
def test_task_state_by_name_round_trips(state: str) -> None:
    golden = {**TASK_BASIC, "status": {"state": state}}
    task = Task.model_validate(golden)
    assert task.status.state is TaskState(state)
    assert task.dump()["status"]["state"] == state


@pytest.mark.parametrize(
    "legacy",
    ["completed", "input-required", "COMPLETED", "TASK_STATE_UNSPECIFIED", "", None],
)
def test_task_state_not_by_1_0_name_is_refused(legacy: str | None) -> None:
    with pytest.raises(ValidationError, match=r"status\.state"):
        Task.model_validate({**TASK_BASIC, "status": {"state": legacy}})


@pytest.mark.parametrize("role", ["ROLE_USER", "ROLE_AGENT"])
def test_role_by_name_round_trips(role: str) -> None:
    message = Message.model_validate({**MESSAGE_TEXT, "role": role})
    assert message.role is Role(role)
    assert message.dump()["role"] == role


@pytest.mark.parametrize("legacy", ["user", "agent", "USER", "ROLE_UNSPECIFIED"])
def test_role_not_by_1_0_name_is_refused(legacy: str) -> None:
    with pytest.raises(ValidationError, match="role"):
        Message.model_validate({**MESSAGE_TEXT, "role": legacy})


@pytest.mark.parametrize(
    ("missing", "field"),
    [("messageId", "messageId"), ("role", "role"), ("parts", "parts")],
)
def test_message_required_members(missing: str, field: str) -> None:
    incomplete = {k: v for k, v in MESSAGE_TEXT.items() if k != missing}
    with pytest.raises(ValidationError, match=field):
        Message.model_validate(incomplete)


def test_dump_leaves_unset_members_out() -> None:
    task = Task.model_validate(TASK_BASIC)
    dumped = task.dump()
    assert "history" not in dumped
    assert "metadata" not in dumped
    assert "timestamp" not in dumped["status"]
    assert task.dump_json().startswith("{")
    assert Task.model_validate_json(task.dump_json()).dump() == TASK_BASIC
