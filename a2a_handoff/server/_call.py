"""One A2A call being served by an HTTP face, and how its binding answers.

A binding (JSON-RPC 1.0, HTTP+JSON, JSON-RPC for A2A 0.3 clients) parses a request into a
`Call` — params as the 1.0 request object, the `Caller` (principal, active extensions) — and
hands it to a method of `server._http_methods`, which parses the params into the operation's
typed request, asks the service (`server.service`) and hands its domain result to the call's
`Binding`. The binding encodes and frames it: A2A 1.0's ProtoJSON in a JSON-RPC envelope or
as a bare REST body, or the 0.3 shapes. So the methods exist once, and every face serves the
same service.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from pydantic import BaseModel, ValidationError
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response

from a2a_handoff.errors import (
    InvalidParamsError,
    PayloadTooLargeError,
    RpcError,
)
from a2a_handoff.protocol.extension import HANDOFF_EXTENSION_URI
from a2a_handoff.protocol.models import Message, StreamResponse
from a2a_handoff.protocol.wire_ids import ID_REFUSED
from a2a_handoff.server._authentication import Authentication
from a2a_handoff.server._tls_peer import peer_of
from a2a_handoff.server.results import Caller, TaskView

PROTOCOL_VERSION = "1.0"
SUPPORTED_EXTENSIONS = frozenset({HANDOFF_EXTENSION_URI})


class Binding(Protocol):
    """How one binding encodes and frames what the service answered."""

    def answer(self, call: Call, result_json: str) -> Response:
        """The answer carrying `result_json`: a result as this binding shows it."""
        ...

    def sent(self, call: Call, result: TaskView | Message) -> Response:
        """SendMessage's answer: the task, or the handler's direct Message."""
        ...

    def task(self, call: Call, view: TaskView) -> Response:
        """A task's answer (GetTask, CancelTask)."""
        ...

    def event(self, call: Call, seq: int | None, item: StreamResponse) -> bytes:
        """One SSE event carrying a (rendered) stream item."""
        ...

    def stream_error(self, call: Call, error: RpcError) -> bytes:
        """The SSE event that ends a stream which failed after it started."""
        ...


class ProtoJsonAnswers:
    """What the A2A 1.0 bindings share: a result is its ProtoJSON, a task's as the view
    made it (written as it is, never parsed again); `answer` frames it."""

    def answer(self, call: Call, result_json: str) -> Response:
        raise NotImplementedError

    def sent(self, call: Call, result: TaskView | Message) -> Response:
        if isinstance(result, TaskView):
            return self.answer(call, f'{{"task":{result.json()}}}')
        return self.answer(call, f'{{"message":{result.dump_json()}}}')

    def task(self, call: Call, view: TaskView) -> Response:
        return self.answer(call, view.json())


@dataclass(slots=True)
class Call:
    """One call being served."""

    id: str | int | None
    params: dict[str, Any]
    caller: Caller
    request: Request
    binding: Binding


Handler = Callable[[Call], Awaitable[Response]]
"""An A2A method: the call in, the answer out (JSON, or an SSE stream)."""

M = TypeVar("M", bound=BaseModel)


def validate(model: type[M], params: dict[str, Any]) -> M:
    """Params as `model`, or -32602 naming the first offending field."""
    try:
        # `model_validate`, its validator called directly (no Python frame between).
        validated: M = model.__pydantic_validator__.validate_python(params)
        return validated
    except ValidationError as exc:
        first = exc.errors(include_url=False, include_context=False, include_input=False)[0]
        field = ".".join(str(part) for part in first["loc"]) or "params"
        more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        said = ID_REFUSED if first["type"] == "string_pattern_mismatch" else first["msg"]
        raise InvalidParamsError(f"{field}: {said}{more}") from None


def protocol_headers(extensions: frozenset[str]) -> dict[str, str]:
    """The A2A headers of an answer: the version, and the extensions active for it."""
    headers = {"A2A-Version": PROTOCOL_VERSION}
    if extensions:
        headers["A2A-Extensions"] = ",".join(sorted(extensions))
    return headers


def supported_version(version: str) -> bool:
    """Whether an `A2A-Version` value names 1.0 (`1.0`, `1.0.x`)."""
    if version == PROTOCOL_VERSION:  # what nearly every call sends
        return True
    parts = version.strip().split(".")
    return len(parts) >= 2 and parts[0] == "1" and parts[1] == "0"


def is_v03(version: str | None) -> bool:
    """Whether an `A2A-Version` value (None: no header) means A2A 0.3 (spec §3.6.2)."""
    return version is None or not version.strip() or version.strip().startswith("0.")


def is_json_media_type(content_type: str | None) -> bool:
    """`application/json`, or any `+json` type (`application/a2a+json`), parameters aside."""
    if content_type is None:
        return False
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or media.endswith("+json")


# The body types a web page may send to any address without asking it first (the Fetch
# standard's CORS-safelisted request content types), and no type at all (a Blob's).
_SIMPLE_TYPES = frozenset(
    {"text/plain", "application/x-www-form-urlencoded", "multipart/form-data"}
)


def browser_content_type(content_type: str | None) -> bool:
    """Whether a request body declared so could come from a web page without a CORS
    preflight: those are refused (-32005, HTTP 415) whatever the body holds, as a page could
    make an agent act on them (see `server._browser_guard`)."""
    if content_type is None:
        return True
    if content_type == "application/json":  # what nearly every call sends
        return False
    return content_type.split(";", 1)[0].strip().lower() in _SIMPLE_TYPES


def read_body(request: Request, max_body: int) -> Awaitable[bytes]:
    """The request body, refused (-32100, HTTP 413) as soon as it is over `max_body`."""
    return read_declared_body(request, max_body, request.headers.get("content-length"))


async def read_declared_body(request: Request, max_body: int, declared: str | None) -> bytes:
    """`read_body`, the `Content-Length` it declares (None: none) already read."""
    if declared is not None and declared.isdigit() and int(declared) > max_body:
        raise PayloadTooLargeError(f"request body over {max_body} bytes")
    # Starlette's `request.stream()` without its async generator (one per request): the
    # ASGI messages read here, a disconnect raising ClientDisconnect as it does.
    if request._stream_consumed:
        raise RuntimeError("Stream consumed")
    chunks: list[bytes] = []
    size = 0
    receive = request.receive
    while True:
        message = await receive()
        if message["type"] == "http.request":
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > max_body:
                raise PayloadTooLargeError(f"request body over {max_body} bytes")
            if chunk:
                chunks.append(chunk)
            if not message.get("more_body", False):
                request._stream_consumed = True
                return chunks[0] if len(chunks) == 1 else b"".join(chunks)
        elif message["type"] == "http.disconnect":
            request._is_disconnected = True
            raise ClientDisconnect()


async def principal_of(auth: Authentication | None, request: Request) -> str:
    """The caller's principal ("" without auth): its key's or token's, or its client
    certificate's; -32101 (HTTP 401) without valid credentials, (HTTP 503) with a token
    whose issuer has not answered yet."""
    if auth is None:
        return ""
    return await auth.principal(request.headers, peer_of(request.scope))


_TENANT = re.compile(r"[A-Za-z0-9][A-Za-z0-9._~-]{0,127}")
RESERVED_TENANTS = frozenset({"tasks", "extendedAgentCard"})
"""Names an HTTP+JSON path cannot tell from an operation's (`/tasks/{id}` is a task)."""


def tenant_of(params: Any, path_tenant: str | None = None) -> str:
    """The tenant a call names ("": the default tenant): the params' `tenant`, or the
    HTTP+JSON path's or query's, which a `tenant` in the params must then agree with; -32602
    for a name that is not 1-128 letters, digits, `.`, `_`, `~` or `-` (the first a letter or
    digit), or one of `RESERVED_TENANTS`."""
    named = params.get("tenant") if isinstance(params, dict) else None
    if path_tenant is not None:
        if named not in (None, "", path_tenant):
            raise InvalidParamsError(
                "tenant: the body names another tenant than the path or query"
                f" ({_shown(named)} against {_shown(path_tenant)})"
            )
        named = path_tenant
    if named is None or named == "":
        return ""
    if not isinstance(named, str) or not _TENANT.fullmatch(named) or named in RESERVED_TENANTS:
        raise InvalidParamsError(
            f"tenant: {_shown(named)} is not a tenant name (1-128 letters, digits, '.', '_',"
            " '~' or '-', starting with a letter or digit; not 'tasks' or 'extendedAgentCard')"
        )
    return named


def _shown(value: object) -> str:
    return repr(value)[:80]
