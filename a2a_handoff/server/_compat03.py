"""A2A 0.3 clients, served on the JSON-RPC endpoint beside 1.0.

A request without `A2A-Version` (or with `0.x`) is an A2A 0.3 request (spec §3.6.2); the
JSON-RPC endpoint hands its slash-named methods here. Each is the 1.0 method of
`server._methods` — the same runtime, the same store — with its params converted from 0.3
and its answer converted to 0.3 (`protocol.v03`): `message/send`, `message/stream`,
`tasks/get`, `tasks/cancel`, `tasks/resubscribe`, and with push notifications on
`tasks/pushNotificationConfig/set|get|list|delete` (the config nested in 0.3's
`TaskPushNotificationConfig`, `schemes` a list); off, they answer -32003. The authenticated
extended card answers -32007. An error of a streaming method is sent as a stream
of one error event, as 0.3 clients expect. A 0.3 client never sees TRANSFERRED: a handed-off
task is `completed`, with the transfer pointer in `metadata` (the handoff extension's).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from a2a_handoff.errors import (
    ExtendedCardNotConfiguredError,
    InvalidParamsError,
    MethodNotFoundError,
    PushNotificationNotSupportedError,
    RpcError,
)
from a2a_handoff.protocol.models import StreamResponse
from a2a_handoff.protocol.sse import frame
from a2a_handoff.protocol.v03 import result_to_v03, send_params_from_v03, stream_item_to_v03
from a2a_handoff.server._call import Call, Handler
from a2a_handoff.server._jsonrpc import JsonAnswer, error_body, result_body
from a2a_handoff.server._streams import SseResponse

_PUSH = frozenset(
    {
        "tasks/pushNotificationConfig/set",
        "tasks/pushNotificationConfig/get",
        "tasks/pushNotificationConfig/list",
        "tasks/pushNotificationConfig/delete",
    }
)


def _task_id_params(params: dict[str, Any]) -> dict[str, Any]:
    if "id" not in params:
        raise InvalidParamsError("id: Field required")
    return {k: v for k, v in params.items() if k in ("id", "historyLength")}


def _push_set_params(params: dict[str, Any]) -> dict[str, Any]:
    config = params.get("pushNotificationConfig")
    if not isinstance(config, dict):
        raise InvalidParamsError("pushNotificationConfig: Field required")
    return {**config, "taskId": params.get("taskId")}


def _push_ref_params(params: dict[str, Any]) -> dict[str, Any]:
    if "id" not in params:
        raise InvalidParamsError("id: Field required")
    ref = {"taskId": params["id"]}
    if params.get("pushNotificationConfigId") is not None:
        ref["id"] = params["pushNotificationConfigId"]
    return ref


def _config_to_v03(config: dict[str, Any]) -> dict[str, Any]:
    inner = {k: v for k, v in config.items() if k in ("id", "url", "token")}
    auth = config.get("authentication")
    if isinstance(auth, dict):
        inner["authentication"] = {"schemes": [auth.get("scheme")]} | (
            {"credentials": auth["credentials"]} if "credentials" in auth else {}
        )
    return {"taskId": config.get("taskId"), "pushNotificationConfig": inner}


class V03PushBinding:
    """0.3 framing of the push config methods' answers (`TaskPushNotificationConfig` with
    the config nested; a list for list; null for delete)."""

    def __init__(self, first: bool = False) -> None:
        self.first = first  # a 0.3 get without a config id: the task's first config

    def answer(self, call: Call, result_json: str) -> Response:
        result = json.loads(result_json)
        if "configs" in result:
            shown: Any = [_config_to_v03(c) for c in result["configs"]]
            if self.first:
                shown = shown[0] if shown else None
        elif "url" in result:
            shown = _config_to_v03(result)
        else:
            shown = None
        return JsonAnswer(result_body(call.id, json.dumps(shown, separators=(",", ":"))), [])

    def event(self, call: Call, seq: int | None, item: StreamResponse) -> bytes:
        raise NotImplementedError  # never streamed

    def stream_error(self, call: Call, error: RpcError) -> bytes:
        return frame(json.dumps(error_body(call.id, error)))


_PUSH_METHODS: dict[str, tuple[str, Callable[[dict[str, Any]], dict[str, Any]]]] = {
    "tasks/pushNotificationConfig/set": ("CreateTaskPushNotificationConfig", _push_set_params),
    "tasks/pushNotificationConfig/get": ("GetTaskPushNotificationConfig", _push_ref_params),
    "tasks/pushNotificationConfig/list": ("ListTaskPushNotificationConfigs", _push_ref_params),
    "tasks/pushNotificationConfig/delete": ("DeleteTaskPushNotificationConfig", _push_ref_params),
}


_METHODS: dict[str, tuple[str, Callable[[dict[str, Any]], dict[str, Any]]]] = {
    "message/send": ("SendMessage", send_params_from_v03),
    "message/stream": ("SendStreamingMessage", send_params_from_v03),
    "tasks/get": ("GetTask", _task_id_params),
    "tasks/cancel": ("CancelTask", _task_id_params),
    "tasks/resubscribe": ("SubscribeToTask", _task_id_params),
}


class V03Binding:
    """0.3 framing: JSON-RPC envelopes around 0.3 objects."""

    def answer(self, call: Call, result_json: str) -> Response:
        result = json.dumps(result_to_v03(json.loads(result_json)), separators=(",", ":"))
        return JsonAnswer(result_body(call.id, result), [])

    def event(self, call: Call, seq: int | None, item: StreamResponse) -> bytes:
        result = json.dumps(stream_item_to_v03(item.dump()), separators=(",", ":"))
        return frame(result_body(call.id, result).decode(), seq)

    def stream_error(self, call: Call, error: RpcError) -> bytes:
        return frame(json.dumps(error_body(call.id, error)))


V03 = V03Binding()
V03_PUSH = V03PushBinding()
V03_PUSH_FIRST = V03PushBinding(first=True)


class V03Methods:
    """The 0.3 method names, dispatched to the 1.0 methods."""

    def __init__(self, methods: Mapping[str, Handler]) -> None:
        self.methods = methods

    async def dispatch(
        self,
        call_id: str | int | None,
        method: str,
        params: dict[str, Any],
        principal: str,
        request: Request,
    ) -> Response:
        known = _METHODS.get(method)
        if method in _PUSH_METHODS and _PUSH_METHODS[method][0] in self.methods:
            name, convert = _PUSH_METHODS[method]
            binding = V03_PUSH
            if name.startswith("Get") and "pushNotificationConfigId" not in params:
                name, binding = "ListTaskPushNotificationConfigs", V03_PUSH_FIRST  # the first
            call = Call(call_id, convert(params), principal, frozenset(), request, binding)
            return await self.methods[name](call)
        if known is None:
            if method in _PUSH:
                raise PushNotificationNotSupportedError()
            if method == "agent/getAuthenticatedExtendedCard":
                raise ExtendedCardNotConfiguredError()
            raise MethodNotFoundError(f"method {method[:100]!r} not found (A2A 0.3)")
        name, convert = known
        call = Call(call_id, convert(params), principal, frozenset(), request, V03)
        if name not in _STREAMING:
            return await self.methods[name](call)
        try:
            return await self.methods[name](call)
        except RpcError as error:
            # A 0.3 client reads a streaming method's answer as SSE whatever it holds: an
            # error before the first event is a stream of that one error.
            return SseResponse(_one(V03.stream_error(call, error)))


_STREAMING = frozenset({"SendStreamingMessage", "SubscribeToTask"})


async def _one(chunk: bytes) -> AsyncIterator[bytes]:
    yield chunk
