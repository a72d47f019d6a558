"""The agent's A2A 1.0 gRPC service: `lf.a2a.v1.A2AService` on its own port, over the same
service the HTTP faces serve (`server.service`).

Each method takes the protobuf request, makes the operation's typed request of it
(`server._grpc.codec`), asks the service with the `Caller` its metadata names, and answers the
domain value as protobuf; an A2A error is the gRPC status the specification maps it to, with
its `google.rpc.ErrorInfo` in the trailers. Nothing goes through an HTTP answer.

The metadata are the HTTP headers': `x-api-key` or `authorization: Bearer …` under API-key
auth (the same keys, so the same principals, and a caller sees only its own tasks, as over
HTTP; none valid: UNAUTHENTICATED; under mutual TLS, without a key, the client
certificate's principal, as over HTTPS), `a2a-extensions` (the handoff extension, echoed in the
answer's initial metadata when active), `a2a-version` (absent: 1.0; another: UNIMPLEMENTED,
VersionNotSupported) and, on SubscribeToTask, `last-event-id` (the stream resumed after that
event, as over SSE). No browser can call a gRPC service without a proxy of its own, so the
HTTP faces' browser guard has nothing to guard here.

A stream (SendStreamingMessage, SubscribeToTask) ends as over SSE: after the task's terminal
event, or once it waits for its caller. The server pings every connection with a call open
(HTTP/2 PING, `KEEPALIVE_SECONDS`), so a stream or a blocking call waiting minutes for a
task keeps its connection through NATs and proxies, with the client's default settings. A
request larger than the app's `LimitsConfig.max_body` is refused (RESOURCE_EXHAUSTED).

This module is imported only when the gRPC face is on (`create_app(grpc=GrpcConfig(…))`): it
needs `grpcio` and `protobuf` (`pip install '.[grpc]'` in the a2a-handoff clone).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

try:
    import grpc
    import grpc.aio
except ImportError as exc:  # pragma: no cover - the extra is missing
    raise ImportError(
        "the gRPC face needs grpcio and protobuf: pip install '.[grpc]' in the a2a-handoff clone"
    ) from exc

from a2a_handoff.errors import (
    ConfigError,
    InternalError,
    InvalidParamsError,
    PushNotificationNotSupportedError,
    RpcError,
    StoreError,
    StoreUnavailableError,
    VersionNotSupportedError,
)
from a2a_handoff.observe import use
from a2a_handoff.protocol.extension import parse_extensions
from a2a_handoff.protocol.models import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    SendMessageRequest,
    SubscribeToTaskRequest,
)
from a2a_handoff.protocol.protobuf import proto
from a2a_handoff.secrets import check_private
from a2a_handoff.server._call import (
    PROTOCOL_VERSION,
    SUPPORTED_EXTENSIONS,
    supported_version,
    tenant_of,
)
from a2a_handoff.server._grpc import codec
from a2a_handoff.server._push import ConfigRef, PushConfigs, TaskRef
from a2a_handoff.server.app_config import GrpcConfig, TlsConfig
from a2a_handoff.server.results import Caller, EventStream
from a2a_handoff.server.service import AgentService
from a2a_handoff.trust.certificates import certificate_principal

log = logging.getLogger("a2a_handoff.server")

KEEPALIVE_SECONDS = 20.0
"""How often the server pings a connection that has a call open (and waits as long again
for the answer before dropping it)."""
STOP_GRACE_SECONDS = 3.0

Unary = Callable[[Any, Caller], Awaitable[Any]]
Streaming = Callable[[Any, Caller, Any], Awaitable[EventStream]]


class GrpcFace:
    """The gRPC server of one agent's service, run while the service serves (`running`)."""

    def __init__(self, service: AgentService, config: GrpcConfig) -> None:
        self.service = service
        self.config = config
        self.auth = service.auth
        self.port = config.port  # the port bound, once running (config.port 0: any free)
        tls = service.tls
        self.credentials = None if tls is None or not tls.serves else _credentials(tls)
        unary: dict[str, Unary] = {
            "SendMessage": self.send_message,
            "GetTask": self.get_task,
            "ListTasks": self.list_tasks,
            "CancelTask": self.cancel_task,
            "GetExtendedAgentCard": self.get_extended_card,
            "CreateTaskPushNotificationConfig": self.create_push_config,
            "GetTaskPushNotificationConfig": self.get_push_config,
            "ListTaskPushNotificationConfigs": self.list_push_configs,
            "DeleteTaskPushNotificationConfig": self.delete_push_config,
        }
        streaming: dict[str, Streaming] = {
            "SendStreamingMessage": self.send_streaming_message,
            "SubscribeToTask": self.subscribe_to_task,
        }
        handlers = {}
        for method in proto.service().methods:  # every method of the proto, or say which not
            request = proto.message_class(method.input_type.full_name)
            if method.server_streaming:
                handlers[method.name] = grpc.unary_stream_rpc_method_handler(
                    self._streaming(streaming.pop(method.name)),
                    request_deserializer=request.FromString,
                    response_serializer=_serialize,
                )
            else:
                handlers[method.name] = grpc.unary_unary_rpc_method_handler(
                    self._unary(unary.pop(method.name)),
                    request_deserializer=request.FromString,
                    response_serializer=_serialize,
                )
        if unary or streaming:
            raise RuntimeError(f"not in a2a.proto's A2AService: {sorted({*unary, *streaming})}")
        self.handler = grpc.method_handlers_generic_handler(proto.SERVICE, handlers)

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Serve while inside (entered by the service once it serves, left before it stops)."""
        max_body = self.service.limits.max_body
        server = grpc.aio.server(
            options=[
                ("grpc.keepalive_time_ms", int(KEEPALIVE_SECONDS * 1000)),
                ("grpc.keepalive_timeout_ms", int(KEEPALIVE_SECONDS * 1000)),
                ("grpc.http2.max_pings_without_data", 0),  # a quiet stream is pinged on
                ("grpc.max_receive_message_length", max_body),
                ("grpc.so_reuseport", 0),  # a port another agent holds is refused, not shared
            ]
        )
        server.add_generic_rpc_handlers((self.handler,))
        host = f"[{self.config.host}]" if ":" in self.config.host else self.config.host
        address = f"{host}:{self.config.port}"
        if self.credentials is not None:
            self.port = server.add_secure_port(address, self.credentials)
        else:
            self.port = server.add_insecure_port(address)
        await server.start()
        tls = "plaintext" if self.credentials is None else "TLS"
        log.info("gRPC (A2A 1.0, %s) on %s:%d", tls, host, self.port)
        try:
            yield
        finally:
            await server.stop(STOP_GRACE_SECONDS)

    # -- framing ----------------------------------------------------------------------------

    async def _caller(self, request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Caller:
        """Who calls (`x-api-key`, `authorization`), with which extensions, in the tenant
        the request names; the version checked. Raises the RpcError to answer."""
        metadata = _metadata(context)
        version = metadata.get("a2a-version")
        if version is not None and not supported_version(version):
            raise VersionNotSupportedError(
                f"A2A-Version {version!r} is not supported; this service speaks {PROTOCOL_VERSION}"
            )
        principal = ""
        if self.auth is not None:
            peer = _peer(context) if self.auth.certificates else None
            principal = await self.auth.principal(metadata, peer)
        extensions = SUPPORTED_EXTENSIONS & parse_extensions(metadata.get("a2a-extensions"))
        tenant = tenant_of({"tenant": getattr(request, "tenant", "")})
        return Caller(principal, extensions, tenant)

    def _unary(self, operation: Unary) -> Callable[..., Awaitable[Any]]:
        observer = self.service.observer

        async def call(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
            use(observer)
            try:
                caller = await self._caller(request, context)
                await _echo(context, caller)
                return await operation(request, caller)
            except Exception as exc:
                error = _rpc_error(exc)
            await _abort(context, error)  # raises: the call ends with the error's status
            return None

        return call

    def _streaming(self, operation: Streaming) -> Callable[..., AsyncIterator[Any]]:
        observer = self.service.observer

        async def call(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
            use(observer)
            stream: EventStream | None = None
            try:
                caller = await self._caller(request, context)
                stream = await operation(request, caller, context)
                await _echo(context, caller)
                async for _seq, item in stream:
                    yield codec.item(item)
                return
            except Exception as exc:
                error = _rpc_error(exc)
            finally:
                if stream is not None:
                    await stream.aclose()
            await _abort(context, error)

        return call

    # -- the operations ---------------------------------------------------------------------

    async def send_message(self, request: Any, caller: Caller) -> Any:
        sent = codec.parsed(SendMessageRequest, request)
        return codec.sent(await self.service.send_message(sent, caller))

    async def get_task(self, request: Any, caller: Caller) -> Any:
        asked = codec.parsed(GetTaskRequest, request)
        return codec.task(await self.service.get_task(asked, caller))

    async def list_tasks(self, request: Any, caller: Caller) -> Any:
        asked = codec.parsed(ListTasksRequest, request)
        return codec.page(await self.service.list_tasks(asked, caller))

    async def cancel_task(self, request: Any, caller: Caller) -> Any:
        asked = codec.parsed(CancelTaskRequest, request)
        return codec.task(await self.service.cancel_task(asked, caller))

    async def get_extended_card(self, request: Any, caller: Caller) -> Any:
        return codec.card(self.service.get_extended_card())

    async def send_streaming_message(self, request: Any, caller: Caller, context: Any) -> Any:
        sent = codec.parsed(SendMessageRequest, request)
        return await self.service.send_streaming_message(sent, caller)

    async def subscribe_to_task(self, request: Any, caller: Caller, context: Any) -> Any:
        asked = codec.parsed(SubscribeToTaskRequest, request)
        after = _last_event_id(_metadata(context).get("last-event-id"))
        return await self.service.subscribe_to_task(asked, caller, after)

    def _push(self) -> PushConfigs:
        if self.service.push is None:
            raise PushNotificationNotSupportedError()
        return self.service.push

    async def create_push_config(self, request: Any, caller: Caller) -> Any:
        push = self._push()
        given = codec.params(request)
        task_id = given.get("taskId")
        if not isinstance(task_id, str) or not task_id:
            raise InvalidParamsError("taskId: Field required")
        return codec.push_config(await push.create(task_id, given, caller.owner))

    async def get_push_config(self, request: Any, caller: Caller) -> Any:
        push = self._push()
        ref = codec.parsed(ConfigRef, request)
        return codec.push_config(await push.get(ref, caller.owner))

    async def list_push_configs(self, request: Any, caller: Caller) -> Any:
        push = self._push()
        ref = codec.parsed(TaskRef, request)
        return codec.push_configs(await push.list(ref, caller.owner))

    async def delete_push_config(self, request: Any, caller: Caller) -> Any:
        push = self._push()
        await push.delete(codec.parsed(ConfigRef, request), caller.owner)
        return proto.Empty()


def _credentials(tls: TlsConfig) -> grpc.ServerCredentials:
    """The server's TLS: its certificate; under mutual TLS, a client certificate required,
    verified against the client CAs. Read now: a file missing, or a key others can read, is
    said before anything is served."""
    cert, key = Path(str(tls.cert)), Path(str(tls.key))
    check_private(key, "tls key")
    try:
        pair = (key.read_bytes(), cert.read_bytes())
        roots = None if tls.client_ca is None else Path(tls.client_ca).read_bytes()
    except OSError as exc:
        raise ConfigError(f"gRPC TLS: {exc}") from None
    return grpc.ssl_server_credentials(
        [pair], root_certificates=roots, require_client_auth=roots is not None
    )


def _peer(context: grpc.aio.ServicerContext[Any, Any]) -> str | None:
    """The principal of the call's verified client certificate (mutual TLS), or None."""
    for pem in context.auth_context().get("x509_pem_cert") or ():
        return certificate_principal(pem.decode("ascii", "replace"))
    return None


def _serialize(message: Any) -> bytes:
    serialized: bytes = message.SerializeToString()
    return serialized


def _metadata(context: grpc.aio.ServicerContext[Any, Any]) -> dict[str, str]:
    """The call's text metadata, by lower-case key (the first value of each)."""
    found: dict[str, str] = {}
    for key, value in context.invocation_metadata() or ():
        if isinstance(value, str):
            found.setdefault(key.lower(), value)
    return found


async def _echo(context: grpc.aio.ServicerContext[Any, Any], caller: Caller) -> None:
    """The extensions active for the call, said in the answer's initial metadata."""
    if caller.extensions:
        await context.send_initial_metadata(
            (("a2a-extensions", ",".join(sorted(caller.extensions))),)
        )


def _last_event_id(raw: str | None) -> int | None:
    if raw is None:
        return None
    if not raw.strip().isdigit():
        raise InvalidParamsError("last-event-id must be an event sequence number")
    return int(raw.strip())


def _rpc_error(exc: Exception) -> RpcError:
    """What a failed call answers: its A2A error; a store failing is UNAVAILABLE (retry);
    anything else INTERNAL, logged here and never shown."""
    if isinstance(exc, RpcError):
        return exc
    if isinstance(exc, StoreError):
        return StoreUnavailableError(str(exc))
    log.error("internal error serving a gRPC call", exc_info=exc)
    return InternalError()


async def _abort(context: grpc.aio.ServicerContext[Any, Any], error: RpcError) -> None:
    code, message, trailers = codec.status_of(error)
    context.set_trailing_metadata(trailers)
    await context.abort(code, message)
