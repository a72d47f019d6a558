"""The gRPC face's messages and their encoding (`server._grpc.proto`, `server._grpc.codec`):
the descriptor set is what the committed proto compiles to, our classes live beside the
official SDK's in one process, and what a domain value and an error become."""

from __future__ import annotations

import grpc
from a2a.types import a2a_pb2 as sdk
from google.rpc import error_details_pb2, status_pb2

from a2a_handoff.errors import TaskNotFoundError, TooManyStreamsError, VersionNotSupportedError
from a2a_handoff.protocol.extension import HANDOFF_EXTENSION_URI as URI
from a2a_handoff.protocol.models import (
    ListTasksRequest,
    StreamResponse,
    Task,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from a2a_handoff.protocol.protobuf import build, proto
from a2a_handoff.protocol.states import TaskState
from a2a_handoff.server._grpc import codec
from a2a_handoff.server.results import TaskView

POINTER = {"agentName": "billing", "agentUrl": "http://127.0.0.1:1/", "taskId": "t-b"}


def transferred() -> Task:
    return Task(
        id="t-a",
        context_id="c",
        status=TaskStatus(state=TaskState.TRANSFERRED, timestamp="2026-01-02T03:04:05.678Z"),
        metadata={URI: {"state": "TRANSFERRED", "transfer": POINTER}},
    )


def test_the_committed_descriptor_set_is_what_the_proto_compiles_to() -> None:
    assert build.DESCRIPTORS.read_bytes() == build.compile_descriptors()


def test_every_method_of_the_service_and_no_clash_with_the_sdk_classes() -> None:
    names = [m.name for m in proto.service().methods]
    assert names == [m.name for m in sdk.DESCRIPTOR.services_by_name["A2AService"].methods]
    assert len(names) == 11
    # Built in a pool of our own, both sets of classes load in one process, and the bytes
    # of one parse as the other.
    ours = codec.task(TaskView(transferred(), visible=False))
    theirs = sdk.Task.FromString(ours.SerializeToString())
    assert theirs.id == "t-a"
    assert type(ours).DESCRIPTOR.file.pool is not sdk.Task.DESCRIPTOR.file.pool


def test_a_transferred_task_is_completed_for_every_client_its_pointer_kept() -> None:
    for visible in (False, True):
        message = sdk.Task.FromString(
            codec.task(TaskView(transferred(), visible)).SerializeToString()
        )
        assert message.status.state == sdk.TaskState.TASK_STATE_COMPLETED
        assert message.metadata[URI]["state"] == "TRANSFERRED"
        assert message.metadata[URI]["transfer"]["taskId"] == "t-b"
        assert message.status.timestamp.ToJsonString() == "2026-01-02T03:04:05.678Z"


def test_a_transferred_status_event_is_completed_too() -> None:
    event = TaskStatusUpdateEvent(
        task_id="t-a", context_id="c", status=TaskStatus(state=TaskState.TRANSFERRED)
    )
    item = sdk.StreamResponse.FromString(
        codec.item(StreamResponse(status_update=event)).SerializeToString()
    )
    assert item.status_update.status.state == sdk.TaskState.TASK_STATE_COMPLETED


def test_a_request_is_parsed_by_the_model_the_http_faces_use() -> None:
    request = sdk.ListTasksRequest(
        context_id="c", status=sdk.TaskState.TASK_STATE_WORKING, page_size=5
    )
    ours = proto.message_class("lf.a2a.v1.ListTasksRequest").FromString(request.SerializeToString())
    parsed = codec.parsed(ListTasksRequest, ours)
    assert (parsed.context_id, parsed.status, parsed.page_size) == ("c", TaskState.WORKING, 5)
    assert parsed.history_length is None  # unset optional fields stay unset


def test_errors_become_the_specification_status_with_their_error_info() -> None:
    cases = [
        (TaskNotFoundError("gone", metadata={"taskId": "t"}), grpc.StatusCode.NOT_FOUND),
        (VersionNotSupportedError(), grpc.StatusCode.UNIMPLEMENTED),
        (TooManyStreamsError(), grpc.StatusCode.UNAVAILABLE),
    ]
    for error, expected in cases:
        code, message, trailers = codec.status_of(error)
        assert (code, message) == (expected, error.message)
        ((key, value),) = trailers
        assert key == "grpc-status-details-bin"
        status = status_pb2.Status.FromString(value)
        assert (status.code, status.message) == (expected.value[0], error.message)
        info = error_details_pb2.ErrorInfo()
        assert status.details[0].Unpack(info)
        assert (info.reason, info.domain) == (error.reason, error.domain)
        assert dict(info.metadata) == (error.metadata or {})
