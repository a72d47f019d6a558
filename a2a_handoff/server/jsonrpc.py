"""The JSON-RPC 2.0 binding: one POST endpoint, a dispatch table, errors as error objects.

Input is checked in this order — body size, credentials, JSON, JSON-RPC shape, protocol
version, method, params — and every failure is a JSON-RPC error object: never an HTTP 500,
never a traceback. The methods themselves are `server.methods`'; this module only frames
calls and answers.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response

from a2a_handoff.auth import ApiKeyAuth
from a2a_handoff.errors import (
    AuthenticationError,
    InternalError,
    InvalidParamsError,
    InvalidRequestError,
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
from a2a_handoff.protocol.extension import HANDOFF_EXTENSION_URI, parse_extensions

log = logging.getLogger("a2a_handoff.server")

PROTOCOL_VERSION = "1.0"
DEFAULT_MAX_BODY = 1024 * 1024
SUPPORTED_EXTENSIONS = frozenset({HANDOFF_EXTENSION_URI})
_PUSH_METHODS = frozenset(
    {
        "CreateTaskPushNotificationConfig",
        "GetTaskPushNotificationConfig",
        "ListTaskPushNotificationConfigs",
        "DeleteTaskPushNotificationConfig",
    }
)


@dataclass(slots=True)
class Call:
    """One JSON-RPC call being served."""

    id: str | int | None
    params: dict[str, Any]
    principal: str
    extensions: frozenset[str]
    request: Request

    @property
    def transfers_visible(self) -> bool:
        return HANDOFF_EXTENSION_URI in self.extensions


Handler = Callable[[Call], Awaitable[Response]]
"""A JSON-RPC method: the call in, the HTTP response out (JSON, or an SSE stream)."""

M = TypeVar("M", bound=BaseModel)


def validate(model: type[M], params: dict[str, Any]) -> M:
    """Params as `model`, or -32602 naming the first offending field."""
    try:
        return model.model_validate(params)
    except ValidationError as exc:
        first = exc.errors(include_url=False, include_context=False, include_input=False)[0]
        field = ".".join(str(part) for part in first["loc"]) or "params"
        more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        raise InvalidParamsError(f"{field}: {first['msg']}{more}") from None


def protocol_headers(extensions: frozenset[str]) -> dict[str, str]:
    """The A2A headers of an answer: the version, and the extensions active for it."""
    headers = {"A2A-Version": PROTOCOL_VERSION}
    if extensions:
        headers["A2A-Extensions"] = ",".join(sorted(extensions))
    return headers


def result_body(call_id: str | int | None, result_json: str) -> bytes:
    return (
        '{"jsonrpc":"2.0","id":' + json.dumps(call_id) + ',"result":' + result_json + "}"
    ).encode()


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


def answer(call: Call, result_json: str) -> Response:
    """The JSON-RPC answer carrying `result_json`, with the protocol headers."""
    raw = _RAW_HEADERS.get(call.extensions)
    if raw is None:  # one list per set of active extensions (a subset of ours)
        headers = protocol_headers(call.extensions).items()
        raw = [(k.lower().encode(), v.encode()) for k, v in headers]
        _RAW_HEADERS[call.extensions] = raw
    return JsonAnswer(result_body(call.id, result_json), raw)


class JsonRpcEndpoint:
    """`POST /`: authenticates, parses and dispatches a call to its method."""

    def __init__(
        self, methods: Mapping[str, Handler], auth: ApiKeyAuth | None, max_body: int
    ) -> None:
        self.methods = methods
        self.auth = auth
        self.max_body = max_body

    async def _body(self, request: Request) -> bytes:
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_body:
            raise PayloadTooLargeError(f"request body over {self.max_body} bytes")
        chunks: list[bytes] = []
        size = 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > self.max_body:
                raise PayloadTooLargeError(f"request body over {self.max_body} bytes")
            chunks.append(chunk)
        return b"".join(chunks)

    async def rpc(self, request: Request) -> Response:
        call_id: str | int | None = None
        extensions = SUPPORTED_EXTENSIONS & parse_extensions(request.headers.get("a2a-extensions"))
        try:
            body = await self._body(request)
            principal = ""
            if self.auth is not None:
                found = self.auth.authenticate(request.headers)
                if found is None:
                    raise AuthenticationError()
                principal = found
            payload = _parse_json(body)
            call_id = _call_id(payload)
            method, params = _parse_envelope(payload)
            version = request.headers.get("a2a-version")
            if version is None or not _supported_version(version):
                raise VersionNotSupportedError(
                    f"A2A-Version {version!r} is not supported; this server speaks"
                    f" {PROTOCOL_VERSION} (send the header 'A2A-Version: {PROTOCOL_VERSION}')"
                )
            handler = self.methods.get(method)
            if handler is None:
                if method in _PUSH_METHODS:
                    raise PushNotificationNotSupportedError()
                raise MethodNotFoundError(f"method {_printable(method)!r} not found")
            if b"\\ud" in body or b"\\uD" in body:  # JSON escapes that may be lone surrogates
                _refuse_lone_surrogates(params, "params")
            return await handler(Call(call_id, params, principal, extensions, request))
        except RpcError as error:
            return error_response(call_id, error, extensions)
        except StoreError as exc:  # unreachable, or failing writes: the caller may retry
            _store_failures.note(exc)
            return error_response(call_id, StoreUnavailableError(str(exc)), extensions)
        except ClientDisconnect:  # the body never came (the server's body timeout): no answer
            return Response(status_code=400)
        except Exception:
            log.exception("internal error serving a JSON-RPC call")
            return error_response(call_id, InternalError(), extensions)


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
    if isinstance(error, AuthenticationError):
        status = 401
        headers["WWW-Authenticate"] = 'Bearer realm="a2a"'
    elif isinstance(error, PayloadTooLargeError):
        status = 413
    elif isinstance(error, StoreUnavailableError | TooManyStreamsError):
        status = 503
        headers["Retry-After"] = "1"
    # ensure_ascii: an id holding a lone surrogate still encodes (as an escape).
    body = json.dumps(error_body(call_id, error), separators=(",", ":"))
    return Response(body, status_code=status, headers=headers, media_type="application/json")


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON: numbers must be finite")


def _finite(text: str) -> float:
    value = float(text)
    if math.isinf(value):  # 1e999: valid JSON syntax, but no double holds it
        raise ValueError(f"{text[:40]} is not JSON: numbers must be finite")
    return value


def _parse_json(body: bytes) -> Any:
    """Strict JSON: no NaN or Infinity, nor a number that overflows to it (1e999 was stored
    as null); too deep a nesting is a parse error too."""
    try:
        return json.loads(body, parse_constant=_refuse_constant, parse_float=_finite)
    except RecursionError:
        raise ParseError("Parse error: the JSON is nested too deeply") from None
    except (ValueError, UnicodeDecodeError) as exc:
        detail = str(exc) if "not JSON" in str(exc) else "the body is not valid JSON"
        raise ParseError(f"Parse error: {detail}") from None


def _call_id(payload: Any) -> str | int | None:
    """The request's id when it has a usable one, so that errors can carry it."""
    if isinstance(payload, dict):
        call_id = payload.get("id")
        if isinstance(call_id, str | int) and not isinstance(call_id, bool):
            return call_id
    return None


def _printable(text: str) -> str:
    return text.encode("utf-8", "backslashreplace").decode("utf-8")[:100]


def _refuse_lone_surrogates(value: Any, where: str) -> None:
    """Strings that cannot be stored as UTF-8 are refused, naming where they are."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidParamsError(f"{where}: a string holds a lone surrogate") from None
    elif isinstance(value, dict):
        for key, item in value.items():
            _refuse_lone_surrogates(key, where)
            _refuse_lone_surrogates(item, f"{where}.{_printable(str(key))}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _refuse_lone_surrogates(item, f"{where}.{index}")


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


def _supported_version(version: str) -> bool:
    parts = version.strip().split(".")
    return len(parts) >= 2 and parts[0] == "1" and parts[1] == "0"
