"""Protobuf in, domain values out and back: what the gRPC face parses and encodes.

A request arrives as an `lf.a2a.v1` message and leaves this module as the typed request the
HTTP faces make from their JSON (`protocol.models`), through the message's ProtoJSON — the
mapping the specification defines between the two — so that a field is checked once, by the
same model, whichever binding it came by (-32602, here INVALID_ARGUMENT, naming it). A domain
value (`server.results`) leaves as its protobuf message, made from the ProtoJSON the
service already has (a stored task's JSON is not serialised again).

The protocol's `TaskState` has no TRANSFERRED: a task handed off is COMPLETED in a protobuf
message, for every client. A client that activated the handoff extension is otherwise shown
what the extension shows (a follow-up to the task is refused rather than told where the
conversation went); every client finds the transfer pointer in the task's metadata, under
the extension's URI (`{"state": "TRANSFERRED", "transfer": {…}}`).

An error leaves as a gRPC status: the code the specification maps it to (§5.4; ours by the
`status` of `errors`), its message, and a `google.rpc.Status` in the trailers
(`grpc-status-details-bin`) carrying its `ErrorInfo` (reason, domain, metadata).
"""

from __future__ import annotations

from typing import Any, TypeVar

import grpc
from google.protobuf import json_format
from pydantic import BaseModel

from a2a_handoff.errors import RpcError
from a2a_handoff.protocol.extension import render_item, render_task
from a2a_handoff.protocol.models import Message, StreamResponse
from a2a_handoff.protocol.protobuf import proto
from a2a_handoff.protocol.states import TaskState
from a2a_handoff.server._call import validate
from a2a_handoff.server.results import TaskPage, TaskView

M = TypeVar("M", bound=BaseModel)

STATUS_DETAILS_KEY = "grpc-status-details-bin"


def params(request: Any) -> dict[str, Any]:
    """A request message as the 1.0 request object (ProtoJSON: camelCase, enums by name)."""
    given: dict[str, Any] = json_format.MessageToDict(request)
    return given


def parsed(model: type[M], request: Any) -> M:
    """A request message as `model` (-32602 naming the first offending field)."""
    return validate(model, params(request))


def _message(cls: Any, json: str) -> Any:
    return json_format.Parse(json, cls(), ignore_unknown_fields=True)


def task_json(view: TaskView) -> str:
    """The task's JSON as a protobuf `Task` can hold it (TRANSFERRED as COMPLETED)."""
    if view.task.status.state is TaskState.TRANSFERRED:
        return render_task(view.task, False).dump_json()
    return view.json()


def task(view: TaskView) -> Any:
    return _message(proto.Task, task_json(view))


def sent(result: TaskView | Message) -> Any:
    """SendMessage's answer: the task, or the handler's direct Message."""
    if isinstance(result, TaskView):
        return _message(proto.SendMessageResponse, f'{{"task":{task_json(result)}}}')
    return _message(proto.SendMessageResponse, f'{{"message":{result.dump_json()}}}')


def page(found: TaskPage) -> Any:
    """ListTasks' answer."""
    answer = proto.ListTasksResponse(
        next_page_token=found.next_page_token or "",
        page_size=found.page_size,
        total_size=found.total_size,
    )
    for view in found.tasks:
        json_format.Parse(task_json(view), answer.tasks.add(), ignore_unknown_fields=True)
    return answer


def item(streamed: StreamResponse) -> Any:
    """One stream item (already rendered for its caller) as a protobuf `StreamResponse`."""
    return _message(proto.StreamResponse, render_item(streamed, False).dump_json())


def card(json: str) -> Any:
    """An agent card's JSON (as served over HTTP) as a protobuf `AgentCard`."""
    return _message(proto.AgentCard, json)


def push_config(config: dict[str, Any]) -> Any:
    return json_format.ParseDict(
        config, proto.TaskPushNotificationConfig(), ignore_unknown_fields=True
    )


def push_configs(configs: list[dict[str, Any]]) -> Any:
    answer = proto.ListTaskPushNotificationConfigsResponse()
    for config in configs:
        json_format.ParseDict(config, answer.configs.add(), ignore_unknown_fields=True)
    return answer


def status_of(error: RpcError) -> tuple[grpc.StatusCode, str, tuple[tuple[str, bytes], ...]]:
    """The gRPC status of `error`: its code, its message, and the trailers carrying the
    `google.rpc.Status` with its `ErrorInfo` (when it has a reason)."""
    code = grpc.StatusCode[error.status]
    status = proto.Status(code=code.value[0], message=error.message)
    if error.reason:
        info = proto.ErrorInfo(reason=error.reason, domain=error.domain)
        info.metadata.update(error.metadata or {})
        status.details.add().Pack(info)
    return code, error.message, ((STATUS_DETAILS_KEY, status.SerializeToString()),)
