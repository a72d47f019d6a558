"""GrpcTransport: the calls of `AgentClient` to an agent whose card offers gRPC alone.

A call leaves as the A2A 1.0 gRPC method of the same name (`lf.a2a.v1.A2AService`), its
params — the JSON-RPC params the client built, which are the request's ProtoJSON — parsed
into the protobuf request, and comes back as the answer the JSON-RPC face would have given:
`(200, {"result": …})`, the result the response's ProtoJSON, or the error object its status
maps to. So everything above reads one kind of answer whichever binding carried it — the
retries, the breaker, the reading of a handoff's created task, the classification of a try.

The mapping, as the specification's (§5.4) read back:

- a status carrying a `google.rpc.ErrorInfo` in its details is the error that reason names
  (`errors.rpc_error_named`: -32001 TASK_NOT_FOUND, -32102 HANDOFF_PROCESSING, …), with its
  metadata; without one, the code names it (INVALID_ARGUMENT -32602, NOT_FOUND -32001,
  UNIMPLEMENTED -32601, UNAUTHENTICATED -32101, RESOURCE_EXHAUSTED -32100, else -32603);
- answered with the HTTP status the JSON-RPC face gives the same error: 503 for UNAVAILABLE
  (a store down, too many streams: retried), 401, 413, else 200;
- a connection that cannot be made is `httpx.ConnectError` (or `ConnectTimeout`): the
  request never left, as over HTTP, so it may go to another replica; UNAVAILABLE or
  CANCELLED without details once connected is `httpx.ReadError` (the connection broke: the
  request may have arrived), DEADLINE_EXCEEDED `httpx.ReadTimeout`.

A connection is made before each call that finds none ready (a channel whose last attempt
failed is replaced, so a restarted agent is reached at once rather than after gRPC's
reconnect backoff). Unary calls have the client's read timeout as their deadline, but a
blocking SendMessage, which waits for the task as long as it runs (the server pings the
connection meanwhile); streams have none.

The protocol's state enum has no TRANSFERRED: a task handed off arrives COMPLETED with the
pointer in its metadata (`metadata[URI].state == "TRANSFERRED"`). When the server said, in
its initial metadata, that the handoff extension is active for the call, such a task (or
status update) is given back TRANSFERRED, as the JSON-RPC face shows it to an extension
client.

This module imports grpcio and protobuf (the `grpc` extra): `AgentClient` imports it only
when a card offers gRPC alone.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any

import grpc
import grpc.aio
import httpx
from google.protobuf import json_format
from google.protobuf.message import DecodeError

from a2a_handoff.client.retry import Answer
from a2a_handoff.errors import (
    ERROR_INFO_TYPE,
    AuthenticationError,
    InternalError,
    InvalidParamsError,
    MethodNotFoundError,
    PayloadTooLargeError,
    RpcError,
    TaskNotFoundError,
    rpc_error_named,
)
from a2a_handoff.protocol.extension import HANDOFF_EXTENSION_URI, parse_extensions
from a2a_handoff.protocol.protobuf import proto
from a2a_handoff.protocol.states import TaskState

STATUS_DETAILS_KEY = "grpc-status-details-bin"
MAX_ANSWER_BYTES = 16 * 1024 * 1024
"""The largest answer read (a task with its history and artifacts): gRPC's default is 4 MiB."""

Metadata = Sequence[tuple[str, str]]

_BY_CODE: dict[grpc.StatusCode, type[RpcError]] = {
    grpc.StatusCode.INVALID_ARGUMENT: InvalidParamsError,
    grpc.StatusCode.NOT_FOUND: TaskNotFoundError,
    grpc.StatusCode.UNIMPLEMENTED: MethodNotFoundError,
    grpc.StatusCode.UNAUTHENTICATED: AuthenticationError,
    grpc.StatusCode.RESOURCE_EXHAUSTED: PayloadTooLargeError,
}
_BROKEN = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED)
_TRANSFERRED = TaskState.TRANSFERRED.value
_COMPLETED = TaskState.COMPLETED.value


class StatusAnswer(Exception):
    """A stream ended by an error status: the JSON-RPC answer it maps to."""

    def __init__(self, answer: Answer) -> None:
        super().__init__(answer[1].decode(errors="replace"))
        self.answer = answer


@dataclass(frozen=True, slots=True)
class Endpoint:
    """Where a call goes: the `host:port` the card names, over TLS or not."""

    target: str
    secure: bool


class GrpcTransport:
    """Channels to the agents that offer gRPC alone, one per endpoint (see the module doc)."""

    def __init__(
        self,
        *,
        max_answer: int = MAX_ANSWER_BYTES,
        tls: tuple[bytes | None, bytes | None, bytes | None] | None = None,
    ) -> None:
        self._max_answer = max_answer
        self._tls = tls or (None, None, None)  # roots, key, chain (PEM): the secure channels'
        self._channels: dict[Endpoint, grpc.aio.Channel] = {}
        self._closed = False

    # -- calls ----------------------------------------------------------------------------

    async def call(
        self,
        endpoint: Endpoint,
        method: str,
        params_json: str,
        metadata: Metadata,
        limits: httpx.Timeout,
    ) -> Answer:
        """One unary call: the JSON-RPC answer it maps to; httpx's transport errors when
        the connection could not be made or broke."""
        request = _request(method, params_json)
        if isinstance(request, RpcError):
            return _error_answer(200, request.to_dict())
        deadline = limits.read
        if method == "SendMessage" and not request.configuration.return_immediately:
            deadline = None  # blocking: as long as the task runs
        channel = await self._ready(endpoint, limits.connect)
        call = channel.unary_unary(
            _path(method),
            request_serializer=_serialize,
            response_deserializer=_response_class(method).FromString,
        )(request, metadata=tuple(metadata), timeout=deadline)
        try:
            response = await call
            active = _extension_active(await call.initial_metadata())
        except grpc.aio.AioRpcError as exc:
            return answer_of(exc)
        result = json_format.MessageToDict(response)
        return 200, json.dumps({"result": _rendered(result, active)}).encode()

    async def open(self, endpoint: Endpoint, connect: float | None) -> None:
        """A ready connection to `endpoint` (httpx.ConnectError: none could be made)."""
        await self._ready(endpoint, connect)

    async def stream(
        self, endpoint: Endpoint, method: str, params_json: str, metadata: Metadata
    ) -> AsyncIterator[dict[str, Any]]:
        """A server stream's items, as their ProtoJSON; an error status raises
        `StatusAnswer`, a broken connection httpx's transport errors. Call `open` first."""
        request = _request(method, params_json)
        if isinstance(request, RpcError):
            raise StatusAnswer(_error_answer(200, request.to_dict()))
        channel = await self._ready(endpoint, None)
        call = channel.unary_stream(
            _path(method),
            request_serializer=_serialize,
            response_deserializer=_response_class(method).FromString,
        )(request, metadata=tuple(metadata))
        try:
            active: bool | None = None
            async for response in call:
                if active is None:
                    active = _extension_active(await call.initial_metadata())
                yield _rendered(json_format.MessageToDict(response), active)
        except grpc.aio.AioRpcError as exc:
            raise StatusAnswer(answer_of(exc)) from None
        finally:
            call.cancel()

    # -- channels -------------------------------------------------------------------------

    async def _ready(self, endpoint: Endpoint, within: float | None) -> grpc.aio.Channel:
        """The endpoint's channel once connected: one whose last attempt failed is replaced
        and tried at once; a failed attempt is httpx.ConnectError, none in time
        ConnectTimeout."""
        if self._closed:
            raise httpx.ConnectError("the gRPC transport is closed")
        channel = self._channels.get(endpoint)
        if channel is not None and channel.get_state(try_to_connect=True) in (_FAILURE, _SHUTDOWN):
            del self._channels[endpoint]  # before the await: a call beside this one sees it gone
            await channel.close()  # no call runs on it: they failed as the connection did
            channel = self._channels.get(endpoint)  # one such call may have made the next
        if channel is None:
            channel = self._channel(endpoint)
            self._channels[endpoint] = channel
        state = channel.get_state(try_to_connect=True)
        try:
            async with asyncio.timeout(within):
                while state is not _READY:
                    if state in (_FAILURE, _SHUTDOWN):
                        raise httpx.ConnectError(f"no gRPC connection to {endpoint.target}")
                    await channel.wait_for_state_change(state)
                    state = channel.get_state(try_to_connect=True)
        except TimeoutError:
            raise httpx.ConnectTimeout(f"connecting to {endpoint.target} timed out") from None
        return channel

    def _channel(self, endpoint: Endpoint) -> grpc.aio.Channel:
        options = [
            ("grpc.max_receive_message_length", self._max_answer),
            ("grpc.enable_retries", 0),  # the client retries, with its breaker and budget
        ]
        if endpoint.secure:
            credentials = grpc.ssl_channel_credentials(*self._tls)
            return grpc.aio.secure_channel(endpoint.target, credentials, options=options)
        return grpc.aio.insecure_channel(endpoint.target, options=options)

    async def aclose(self) -> None:
        self._closed = True
        channels, self._channels = list(self._channels.values()), {}
        for channel in channels:
            await channel.close()


_READY = grpc.ChannelConnectivity.READY
_FAILURE = grpc.ChannelConnectivity.TRANSIENT_FAILURE
_SHUTDOWN = grpc.ChannelConnectivity.SHUTDOWN


def _path(method: str) -> str:
    return f"/{proto.SERVICE}/{method}"


def _response_class(method: str) -> Any:
    return proto.message_class(proto.service().methods_by_name[method].output_type.full_name)


def _request(method: str, params_json: str) -> Any:
    """The protobuf request of `method` from its params (an error when they have none)."""
    described = proto.service().methods_by_name.get(method)
    if described is None:
        return MethodNotFoundError(f"{method} is not a method of the A2A gRPC service")
    request = proto.message_class(described.input_type.full_name)()
    try:
        json_format.Parse(params_json, request)
    except json_format.ParseError as exc:
        return InvalidParamsError(f"the params of {method} have no gRPC form: {exc}")
    return request


def _serialize(message: Any) -> bytes:
    serialized: bytes = message.SerializeToString()
    return serialized


def _extension_active(metadata: Any) -> bool:
    """Whether the server said the handoff extension is active (`a2a-extensions`)."""
    said = [v for k, v in metadata or () if k == "a2a-extensions" and isinstance(v, str)]
    return any(HANDOFF_EXTENSION_URI in parse_extensions(value) for value in said)


def _rendered(result: dict[str, Any], active: bool) -> dict[str, Any]:
    """The result with each task handed off TRANSFERRED, when the extension is active."""
    if active:
        for item in (result, result.get("task"), result.get("statusUpdate")):
            _restore(item)
        for task in result.get("tasks") or ():
            _restore(task)
    return result


def _restore(item: Any) -> None:
    if not isinstance(item, dict):
        return
    status, metadata = item.get("status"), item.get("metadata")
    pointer = metadata.get(HANDOFF_EXTENSION_URI) if isinstance(metadata, dict) else None
    if (
        isinstance(status, dict)
        and status.get("state") == _COMPLETED
        and isinstance(pointer, dict)
        and pointer.get("state") == "TRANSFERRED"
    ):
        status["state"] = _TRANSFERRED


def answer_of(exc: grpc.aio.AioRpcError) -> Answer:
    """The JSON-RPC answer a failed call's status maps to (see the module doc); httpx's
    ReadError or ReadTimeout for a connection that broke or a deadline passed."""
    code = exc.code()
    message = exc.details() or code.name
    info = _error_info(exc.trailing_metadata())
    if info is None and code in _BROKEN:
        raise httpx.ReadError(f"gRPC {code.name}: {message}")
    if info is None and code is grpc.StatusCode.DEADLINE_EXCEEDED:
        raise httpx.ReadTimeout(f"gRPC {code.name}: {message}")
    known = rpc_error_named(info.domain, info.reason) if info is not None else None
    kind = known or _BY_CODE.get(code, InternalError)
    status = 200
    if code is grpc.StatusCode.UNAVAILABLE:
        status = 503
    elif kind is AuthenticationError:
        status = 401
    elif kind is PayloadTooLargeError:
        status = 413
    if known is not None or info is None:
        error = kind(message, metadata=dict(info.metadata) if info is not None else None)
        return _error_answer(status, error.to_dict())
    detail = {"@type": ERROR_INFO_TYPE, "reason": info.reason, "domain": info.domain}
    if info.metadata:
        detail["metadata"] = dict(info.metadata)
    return _error_answer(status, {"code": kind.code, "message": message, "data": [detail]})


def _error_info(trailers: Any) -> Any:
    """The `google.rpc.ErrorInfo` in a status's details (`grpc-status-details-bin`), if any."""
    for key, value in trailers or ():
        if key != STATUS_DETAILS_KEY or not isinstance(value, bytes):
            continue
        try:
            status = proto.Status.FromString(value)
        except DecodeError:  # details that do not parse: as if none were sent
            return None
        for detail in status.details:
            info = proto.ErrorInfo()
            if detail.Unpack(info):
                return info
    return None


def _error_answer(status: int, error: dict[str, Any]) -> Answer:
    return status, json.dumps({"error": error}).encode()
