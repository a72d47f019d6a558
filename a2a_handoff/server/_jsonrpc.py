"""The JSON-RPC 2.0 binding: one POST endpoint, a dispatch table, errors as error objects.

Input is checked in this order — body size, credentials, JSON, content type, JSON-RPC shape,
protocol version, method, params — and every failure is a JSON-RPC error object (A2A's
carrying a `google.rpc.ErrorInfo` in `error.data`): never an HTTP 500, never a traceback. A
body that is not JSON is -32005 when its `Content-Type` is not JSON either (-32700
otherwise); a body sent as a type a web page may send unasked (`text/plain`, a form, none)
is -32005 whatever it holds; valid JSON is served under any other type. A request without
`A2A-Version` (or with `0.x`) is an A2A 0.3 request: its slash-named methods
(`message/send`, …) go to the 0.3 binding (`server._compat03`), anything else answers
-32009. The methods themselves are `server._http_methods`' (over the service); this module
only frames calls and answers — nothing of this is on the path of a successful 1.0 call but a
few header look-ups. The route at `/` calls it with no request-response wrapper in between
(`server.routes`).
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response

from a2a_handoff.errors import (
    AuthenticationError,
    ContentTypeNotSupportedError,
    DrainingError,
    InternalError,
    InvalidParamsError,
    InvalidRequestError,
    IssuerUnavailableError,
    MethodNotFoundError,
    ParseError,
    PayloadTooLargeError,
    PushNotificationNotSupportedError,
    RpcError,
    StoreError,
    StoreUnavailableError,
    TooManyStreamsError,
    VersionNotSupportedError,
)
from a2a_handoff.observe import events, tracing
from a2a_handoff.protocol.extension import parse_extensions
from a2a_handoff.protocol.models import StreamResponse
from a2a_handoff.protocol.sse import frame
from a2a_handoff.server._authentication import Authentication
from a2a_handoff.server._call import (
    PROTOCOL_VERSION,
    SUPPORTED_EXTENSIONS,
    Call,
    Handler,
    ProtoJsonAnswers,
    browser_content_type,
    is_json_media_type,
    is_v03,
    principal_of,
    protocol_headers,
    read_declared_body,
    supported_version,
    tenant_of,
)
from a2a_handoff.server._tls_peer import peer_of
from a2a_handoff.server._trace_admission import TraceAdmission
from a2a_handoff.server.results import Caller

log = logging.getLogger("a2a_handoff.server")

DEFAULT_MAX_BODY = 1024 * 1024
_PUSH_METHODS = frozenset(
    {
        "CreateTaskPushNotificationConfig",
        "GetTaskPushNotificationConfig",
        "ListTaskPushNotificationConfigs",
        "DeleteTaskPushNotificationConfig",
    }
)

Legacy = Callable[[str | int | None, str, dict[str, Any], str, Request], Awaitable[Response]]
"""The A2A 0.3 binding: (id, method, params, principal, request) → the answer."""


def result_body(call_id: str | int | None, result_json: str) -> bytes:
    # One f-string: the result (a task's JSON, maybe large) is copied once, not per `+`.
    return f'{{"jsonrpc":"2.0","id":{id_json(call_id)},"result":{result_json}}}'.encode()


def id_json(call_id: str | int | None) -> str:
    """`json.dumps(call_id)`: an int written by `int.__repr__` as json does, without making
    an encoder for it (json.dumps does, for anything but a string)."""
    if type(call_id) is int:
        return repr(call_id)
    return "null" if call_id is None else json.dumps(call_id)


def error_body(call_id: str | int | None, error: RpcError) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": call_id, "error": error.to_dict()}


class JsonAnswer(Response):
    """A JSON-RPC answer with its header list made in one go (Starlette's Response builds
    one, then edits it for each header added: more work than a GetTask's own)."""

    media_type = "application/json"

    def __init__(self, body: bytes, headers: list[tuple[bytes, bytes]]) -> None:
        self.status_code = 200
        self.background = None
        self.body = body
        self.raw_headers = [
            (b"content-length", str(len(body)).encode()),
            (b"content-type", b"application/json"),
            *headers,
        ]


_RAW_HEADERS: dict[frozenset[str], list[tuple[bytes, bytes]]] = {}


def raw_protocol_headers(extensions: frozenset[str]) -> list[tuple[bytes, bytes]]:
    """`protocol_headers()` as raw ASGI headers, made once per set of active extensions."""
    raw = _RAW_HEADERS.get(extensions)
    if raw is None:  # one list per set of active extensions (a subset of ours)
        headers = protocol_headers(extensions).items()
        raw = [(k.lower().encode(), v.encode()) for k, v in headers]
        _RAW_HEADERS[extensions] = raw
    return raw


class JsonRpcBinding(ProtoJsonAnswers):
    """JSON-RPC 2.0 framing: 1.0 results and stream items in a JSON-RPC response envelope."""

    def answer(self, call: Call, result_json: str) -> Response:
        """The JSON-RPC answer carrying `result_json`, with the protocol headers."""
        headers = raw_protocol_headers(call.caller.extensions)
        return JsonAnswer(result_body(call.id, result_json), headers)

    def event(self, call: Call, seq: int | None, item: StreamResponse) -> bytes:
        return frame(result_body(call.id, item.dump_json()).decode(), seq)

    def stream_error(self, call: Call, error: RpcError) -> bytes:
        return frame(json.dumps(error_body(call.id, error)))


JSON_RPC = JsonRpcBinding()


class JsonRpcEndpoint:
    """`POST /`: authenticates, parses and dispatches a call to its method."""

    def __init__(
        self,
        methods: Mapping[str, Handler],
        auth: Authentication | None,
        max_body: int,
        legacy: Legacy | None = None,
        admission: TraceAdmission | None = None,
    ) -> None:
        self.methods = methods
        self.auth = auth
        self.max_body = max_body
        self.legacy = legacy
        self.admission = admission or TraceAdmission(auth, frozenset())

    def serve(
        self, request: Request, headers: Mapping[bytes, bytes] | None = None
    ) -> Awaitable[Response]:
        """`rpc`, without a coroutine of its own in between when there is no trace to take
        part in (tracing off, no `traceparent`): the hot path. `headers`: the request's raw
        headers as a dict (each name's last value), when the caller made one."""
        if headers is None:
            headers = dict(request.scope["headers"])
        if tracing.enabled() or b"traceparent" in headers:
            return self.rpc(request)
        return self._rpc(request, headers)

    async def rpc(self, request: Request) -> Response:
        # A caller's trace context (its sampled flag: whether we record and export spans) is
        # followed for trusted agents and operators, for others within a rate
        # (`server._trace_admission`); otherwise this agent's own sampler decides, anew.
        raw = request.scope["headers"]
        admitted = tracing.traceparent_in(raw) and self.admission.admits(
            request.headers, peer_of(request.scope)
        )
        token = tracing.incoming_raw(raw) if admitted else None
        try:
            if tracing.enabled():
                with tracing.root_span("a2a.receive", "http.route", "/"):
                    return await self._rpc(request)
            return await self._rpc(request)
        finally:
            tracing.leave(token)

    async def _rpc(
        self, request: Request, headers: Mapping[bytes, bytes] | None = None
    ) -> Response:
        call_id: str | int | None = None
        method = "?"
        asked, content_type, version, length = _headers_of(request.scope["headers"], headers)
        extensions = SUPPORTED_EXTENSIONS & parse_extensions(asked) if asked else _NONE
        try:
            body = await read_declared_body(request, self.max_body, length)
            principal = await principal_of(self.auth, request)
            payload = _parse_json(body, request)
            call_id = _call_id(payload)
            if browser_content_type(content_type):
                shown = "no type" if content_type is None else repr(_printable(content_type))
                raise ContentTypeNotSupportedError(
                    f"a body with {shown} is not accepted (a web page may send one unasked):"
                    " send Content-Type: application/json"
                )
            method, params = _parse_envelope(payload)
            if version is None or not supported_version(version):
                if version is None:  # spec §3.6.1: the version may come as a query parameter
                    version = request.query_params.get("A2A-Version")
                if is_v03(version) and self.legacy is not None and "/" in method:
                    if b"\\ud" in body or b"\\uD" in body:
                        refuse_lone_surrogates(params, "params")
                    return await self.legacy(call_id, method, params, principal, request)
                if version is None or not supported_version(version):
                    raise VersionNotSupportedError(
                        f"A2A-Version {version!r} is not supported; this server speaks"
                        f" {PROTOCOL_VERSION} (send the header 'A2A-Version: {PROTOCOL_VERSION}')"
                        " and A2A 0.3 (no header, methods such as 'message/send')"
                    )
            handler = self.methods.get(method)
            if handler is None:
                if method in _PUSH_METHODS:
                    raise PushNotificationNotSupportedError()
                raise MethodNotFoundError(f"method {_printable(method)!r} not found")
            if b"\\ud" in body or b"\\uD" in body:  # JSON escapes that may be lone surrogates
                refuse_lone_surrogates(params, "params")
            caller = Caller(principal, extensions, tenant_of(params))
            call = Call(call_id, params, caller, request, JSON_RPC)
            answer = await handler(call)
            events.request(method, "ok")
            return answer
        except RpcError as error:
            events.request(_known(method, self.methods), type(error).__name__)
            return error_response(call_id, error, extensions)
        except StoreError as exc:  # unreachable, or failing writes: the caller may retry
            _store_failures.note(exc)
            events.request(_known(method, self.methods), "StoreUnavailableError")
            return error_response(call_id, StoreUnavailableError(str(exc)), extensions)
        except ClientDisconnect:  # the body never came (the server's body timeout): no answer
            return Response(status_code=400)
        except Exception:
            log.exception("internal error serving a JSON-RPC call")
            events.request(_known(method, self.methods), "InternalError")
            return error_response(call_id, InternalError(), extensions)


_NONE: frozenset[str] = frozenset()


def _headers_of(
    raw: list[tuple[bytes, bytes]], last: Mapping[bytes, bytes] | None = None
) -> tuple[str | None, str | None, str | None, str | None]:
    """(`A2A-Extensions`, `Content-Type`, `A2A-Version`, `Content-Length`) of a request, each
    its first value. `last`: the raw headers as a dict (each name's last value), when made
    already: the first values too when no name came twice."""
    first = last if last is not None and len(last) == len(raw) else dict(reversed(raw))
    extensions, content_type = first.get(b"a2a-extensions"), first.get(b"content-type")
    version, length = first.get(b"a2a-version"), first.get(b"content-length")
    return (
        None if extensions is None else extensions.decode("latin-1"),
        None if content_type is None else content_type.decode("latin-1"),
        None if version is None else version.decode("latin-1"),
        None if length is None else length.decode("latin-1"),
    )


def _known(method: str, methods: Mapping[str, Handler]) -> str:
    """The method as a metric label: one of ours, else `other` (labels stay bounded)."""
    return method if method in methods else "other"


class _StoreFailures:
    """Calls refused because the store failed: logged once per `every` seconds, with the count
    (under load while the store is down, a line per call would flood the log)."""

    def __init__(self, every: float = 10.0) -> None:
        self.every = every
        self.count = 0
        self.last = -every

    def note(self, exc: Exception) -> None:
        self.count += 1
        now = time.monotonic()
        if now - self.last >= self.every:
            log.warning("%d call(s) refused: the store failed (%s)", self.count, exc)
            self.count, self.last = 0, now


_store_failures = _StoreFailures()


def error_response(
    call_id: str | int | None, error: RpcError, extensions: frozenset[str] = frozenset()
) -> Response:
    """The JSON-RPC error object as an HTTP answer (401, 413 and 503 where HTTP has a
    status: a 503 tells clients and proxies to retry later)."""
    status = 200
    headers = protocol_headers(extensions)
    if isinstance(error, AuthenticationError) and error.http_status == 401:
        status = 401
        headers["WWW-Authenticate"] = 'Bearer realm="a2a"'
    elif isinstance(error, PayloadTooLargeError):
        status = 413
    elif isinstance(
        error, StoreUnavailableError | TooManyStreamsError | IssuerUnavailableError | DrainingError
    ):
        status = 503
        headers["Retry-After"] = "1"
    # ensure_ascii: an id holding a lone surrogate still encodes (as an escape).
    body = json.dumps(error_body(call_id, error), separators=(",", ":"))
    return Response(body, status_code=status, headers=headers, media_type="application/json")


def refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON: numbers must be finite")


def finite(text: str) -> float:
    """A JSON number as a float, refusing one that overflows (1e999: valid JSON syntax, but
    no double holds it; it was stored as null)."""
    value = float(text)
    if math.isinf(value):
        raise ValueError(f"{text[:40]} is not JSON: numbers must be finite")
    return value


_DECODER = json.JSONDecoder(parse_constant=refuse_constant, parse_float=finite)


def _parse_json(body: bytes, request: Request) -> Any:
    """Strict JSON: no NaN or Infinity, nor a number that overflows to it; too deep a nesting
    is a parse error too. A body that is not JSON, sent as something else than JSON, is
    refused for its content type (-32005): the header is read only then, so a valid JSON
    body is served whatever it says."""
    try:  # json.loads(body, …) as it decodes bytes, without making a decoder every call
        return _DECODER.decode(body.decode(_encoding(body), "surrogatepass"))
    except RecursionError:
        raise ParseError("Parse error: the JSON is nested too deeply") from None
    except (ValueError, UnicodeDecodeError) as exc:
        content_type = request.headers.get("content-type")
        if content_type is not None and not is_json_media_type(content_type):
            raise ContentTypeNotSupportedError(
                f"Content-Type {_printable(content_type)!r} is not supported: send application/json"
            ) from None
        detail = str(exc) if "not JSON" in str(exc) else "the body is not valid JSON"
        raise ParseError(f"Parse error: {detail}") from None


def _encoding(body: bytes) -> str:
    """`json.detect_encoding(body)`: UTF-8 at once for an object whose second byte is not 0
    (no BOM starts with `{`, and UTF-16 and UTF-32 put a 0 byte beside an ASCII one)."""
    if body[:1] == b"{" and body[1:2] != b"\x00":
        return "utf-8"
    return json.detect_encoding(body)


def _call_id(payload: Any) -> str | int | None:
    """The request's id when it has a usable one, so that errors can carry it."""
    if isinstance(payload, dict):
        call_id = payload.get("id")
        if isinstance(call_id, str | int) and not isinstance(call_id, bool):
            return call_id
    return None


def _printable(text: str) -> str:
    return text.encode("utf-8", "backslashreplace").decode("utf-8")[:100]


def refuse_lone_surrogates(value: Any, where: str) -> None:
    """Strings that cannot be stored as UTF-8 are refused, naming where they are."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidParamsError(f"{where}: a string holds a lone surrogate") from None
    elif isinstance(value, dict):
        for key, item in value.items():
            refuse_lone_surrogates(key, where)
            refuse_lone_surrogates(item, f"{where}.{_printable(str(key))}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            refuse_lone_surrogates(item, f"{where}.{index}")


def _parse_envelope(payload: Any) -> tuple[str, dict[str, Any]]:
    if isinstance(payload, list):
        raise InvalidRequestError("batch requests are not supported")
    if not isinstance(payload, dict):
        raise InvalidRequestError("the body must be a JSON-RPC request object")
    call_id = payload.get("id")
    if call_id is not None and (isinstance(call_id, bool) or not isinstance(call_id, str | int)):
        raise InvalidRequestError("id must be a string, a number or null")
    if payload.get("jsonrpc") != "2.0":
        raise InvalidRequestError('jsonrpc must be "2.0"')
    method = payload.get("method")
    if not isinstance(method, str) or not method:
        raise InvalidRequestError("method must be a non-empty string")
    params = payload.get("params", {})
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise InvalidParamsError("params must be an object")
    return method, params
