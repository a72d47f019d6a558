"""A2A 0.3 clients, served on the JSON-RPC endpoint beside 1.0.

A request without `A2A-Version` (or with `0.x`) is an A2A 0.3 request (spec §3.6.2); the
JSON-RPC endpoint hands its slash-named methods here. Each is the 1.0 method of
`server._http_methods` — the same service — with its params converted from 0.3 and its
result encoded as 0.3 by this face's binding, from the domain values (`protocol.v03`):
`message/send`, `message/stream`, `tasks/get`, `tasks/cancel`, `tasks/resubscribe`, and
with push notifications on `tasks/pushNotificationConfig/set|get|list|delete` (the config
nested in 0.3's `TaskPushNotificationConfig`, `schemes` a list); off, they answer -32003.
The authenticated extended card answers -32007. An error of a streaming method is sent as a
stream of one error event, as 0.3 clients expect. A 0.3 client never sees TRANSFERRED: a handed-off
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
from a2a_handoff.protocol.models import Message, StreamResponse
from a2a_handoff.protocol.sse import frame
from a2a_handoff.protocol.v03 import (
    message_to_v03,
    send_params_from_v03,
    stream_item_to_v03,
    task_to_v03,
)
from a2a_handoff.server._call import Call, Handler, validate
from a2a_handoff.server._jsonrpc import JsonAnswer, error_body, result_body
from a2a_handoff.server._push import ConfigRef, PushConfigs, TaskRef
from a2a_handoff.server._streams import SseResponse
from a2a_handoff.server.results import Caller, TaskView

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


def _push_ref(params: dict[str, Any]) -> dict[str, Any]:
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


async def _push_v03(push: PushConfigs, method: str, params: dict[str, Any], principal: str) -> Any:
    """A 0.3 push config method's result, in 0.3's shapes (`TaskPushNotificationConfig` with
    the config nested; a list for list; null for delete; a get without a config id: the
    task's first config)."""
    if method == "tasks/pushNotificationConfig/set":
        config = params.get("pushNotificationConfig")
        if not isinstance(config, dict):
            raise InvalidParamsError("pushNotificationConfig: Field required")
        task_id = params.get("taskId")
        if not isinstance(task_id, str) or not task_id:
            raise InvalidParamsError("taskId: Field required")
        return _config_to_v03(await push.create(task_id, {**config, "taskId": task_id}, principal))
    ref = _push_ref(params)
    if method == "tasks/pushNotificationConfig/delete":
        await push.delete(validate(ConfigRef, ref), principal)
        return None
    if method == "tasks/pushNotificationConfig/get" and "id" in ref:
        return _config_to_v03(await push.get(validate(ConfigRef, ref), principal))
    shown = [_config_to_v03(c) for c in await push.list(validate(TaskRef, ref), principal)]
    if method == "tasks/pushNotificationConfig/list":
        return shown
    return shown[0] if shown else None


def _json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


_METHODS: dict[str, tuple[str, Callable[[dict[str, Any]], dict[str, Any]]]] = {
    "message/send": ("SendMessage", send_params_from_v03),
    "message/stream": ("SendStreamingMessage", send_params_from_v03),
    "tasks/get": ("GetTask", _task_id_params),
    "tasks/cancel": ("CancelTask", _task_id_params),
    "tasks/resubscribe": ("SubscribeToTask", _task_id_params),
}


class V03Binding:
    """0.3 encoding and framing: JSON-RPC envelopes around 0.3 objects (no A2A headers)."""

    def answer(self, call: Call, result_json: str) -> Response:
        return JsonAnswer(result_body(call.id, result_json), [])

    def sent(self, call: Call, result: TaskView | Message) -> Response:
        if isinstance(result, TaskView):
            return self.task(call, result)
        return self.answer(call, _json(message_to_v03(result.dump())))

    def task(self, call: Call, view: TaskView) -> Response:
        return self.answer(call, _json(task_to_v03(view.task.dump())))

    def event(self, call: Call, seq: int | None, item: StreamResponse) -> bytes:
        result = _json(stream_item_to_v03(item.dump()))
        return frame(result_body(call.id, result).decode(), seq)

    def stream_error(self, call: Call, error: RpcError) -> bytes:
        return frame(json.dumps(error_body(call.id, error)))


V03 = V03Binding()
_NO_EXTENSIONS: frozenset[str] = frozenset()


class V03Methods:
    """The 0.3 method names, dispatched to the 1.0 methods (the push config ones to the
    service's push operations, when push is on)."""

    def __init__(self, methods: Mapping[str, Handler], push: PushConfigs | None = None) -> None:
        self.methods = methods
        self.push = push

    async def dispatch(
        self,
        call_id: str | int | None,
        method: str,
        params: dict[str, Any],
        principal: str,
        request: Request,
    ) -> Response:
        known = _METHODS.get(method)
        if method in _PUSH and self.push is not None:
            result = await _push_v03(self.push, method, params, principal)
            return JsonAnswer(result_body(call_id, _json(result)), [])
        if known is None:
            if method in _PUSH:
                raise PushNotificationNotSupportedError()
            if method == "agent/getAuthenticatedExtendedCard":
                raise ExtendedCardNotConfiguredError()
            raise MethodNotFoundError(f"method {method[:100]!r} not found (A2A 0.3)")
        name, convert = known
        caller = Caller(principal, _NO_EXTENSIONS)
        call = Call(call_id, convert(params), caller, request, V03)
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
