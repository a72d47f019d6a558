"""The HTTP+JSON (REST) binding of A2A 1.0 (spec §11), beside JSON-RPC on the same base URL.

`POST /message:send`, `POST /message:stream` (SSE), `GET /tasks/{id}`, `GET /tasks`,
`POST /tasks/{id}:cancel`, `GET|POST /tasks/{id}:subscribe` (SSE), the push-notification
config routes (PushNotificationNotSupported unless push is on) and `GET /extendedAgentCard`. Each is
the method of `server._http_methods` — the same service as JSON-RPC's — with its params
taken from the path, the query and the body. Answers are the 1.0 objects in ProtoJSON as
`application/json`; stream events are bare StreamResponse objects (no JSON-RPC envelope);
errors are AIP-193 `google.rpc.Status` bodies whose `code` is the HTTP status of spec §5.4,
with the `ErrorInfo` in `details` — an error before a stream's first event is such an answer
too, one after it an `event: error`. Checked in order: body size, credentials, version
(`A2A-Version: 1.0`, header or query parameter), content type (a body must be JSON: 415
otherwise; `text/plain` and form types, which a web page may send unasked, even with no body),
JSON, params.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from a2a_handoff.errors import (
    AuthenticationError,
    ContentTypeNotSupportedError,
    InternalError,
    InvalidParamsError,
    MethodNotFoundError,
    ParseError,
    PushNotificationNotSupportedError,
    RpcError,
    VersionNotSupportedError,
)
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
    principal_of,
    protocol_headers,
    read_body,
    supported_version,
    tenant_of,
)
from a2a_handoff.server._jsonrpc import finite, refuse_constant, refuse_lone_surrogates
from a2a_handoff.server._push import PUSH_METHODS
from a2a_handoff.server.results import Caller

log = logging.getLogger("a2a_handoff.server")

Params = Callable[[Request, dict[str, Any]], dict[str, Any]]
"""Builds a method's params from the request (path, query) and its JSON body."""


class RestBinding(ProtoJsonAnswers):
    """HTTP+JSON framing: the bare 1.0 objects, AIP-193 errors."""

    def answer(self, call: Call, result_json: str) -> Response:
        return Response(
            result_json,
            media_type="application/json",
            headers=protocol_headers(call.caller.extensions),
        )

    def event(self, call: Call, seq: int | None, item: StreamResponse) -> bytes:
        return frame(item.dump_json(), seq)

    def stream_error(self, call: Call, error: RpcError) -> bytes:
        return b"event: error\n" + frame(json.dumps(error.to_status()))


REST = RestBinding()


def error_answer(error: RpcError, extensions: frozenset[str] = frozenset()) -> Response:
    """An AIP-193 error answer with the error's HTTP status."""
    headers = protocol_headers(extensions)
    if isinstance(error, AuthenticationError):
        headers["WWW-Authenticate"] = 'Bearer realm="a2a"'
    elif error.http_status == 503:  # the store, the stream cap, a drain: retry shortly
        headers["Retry-After"] = "1"
    return Response(
        json.dumps(error.to_status(), separators=(",", ":")),
        status_code=error.http_status,
        media_type="application/json",
        headers=headers,
    )


async def not_found(request: Request, exc: Exception) -> Response:
    """Starlette's 404 and 405 as AIP-193 errors (a REST client reads them as JSON)."""
    status = exc.status_code if isinstance(exc, HTTPException) else 404
    if status == 405:
        error: RpcError = MethodNotFoundError(
            f"{request.method} is not served on {request.url.path[:200]}"
        )
        body = error.to_status()
        body["error"].update(code=405, status="UNIMPLEMENTED")
        return Response(json.dumps(body), status_code=405, media_type="application/json")
    return error_answer(MethodNotFoundError(f"no A2A operation at {request.url.path[:200]}"))


# -- params ---------------------------------------------------------------------------------


def _int(request: Request, name: str) -> int | None:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return None
    try:
        return int(raw)
    except ValueError:
        raise InvalidParamsError(f"{name}: must be an integer, not {raw[:40]!r}") from None


def _state(raw: str) -> str:
    """`working`, `input-required`, `TASK_STATE_WORKING` → the 1.0 enum name."""
    name = raw.strip().upper().replace("-", "_")
    return name if name.startswith("TASK_STATE_") else f"TASK_STATE_{name}"


def _bool(request: Request, name: str) -> bool | None:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return None
    if raw.lower() in ("true", "1"):
        return True
    if raw.lower() in ("false", "0"):
        return False
    raise InvalidParamsError(f"{name}: must be true or false, not {raw[:40]!r}")


def _body_params(request: Request, body: dict[str, Any]) -> dict[str, Any]:
    return body


def _task_params(request: Request, body: dict[str, Any]) -> dict[str, Any]:
    params: dict[str, Any] = {**body, "id": request.path_params["id"]}
    history = _int(request, "historyLength")
    if history is not None:
        params["historyLength"] = history
    return params


def _push_params(request: Request, body: dict[str, Any]) -> dict[str, Any]:
    """A push config route's params: the body (a config), the task and config ids from the
    path, the page from the query."""
    params: dict[str, Any] = {**body, "taskId": request.path_params["id"]}
    if "cid" in request.path_params:
        params["id"] = request.path_params["cid"]
    size = _int(request, "pageSize")
    if size is not None:
        params["pageSize"] = size
    if request.query_params.get("pageToken"):
        params["pageToken"] = request.query_params["pageToken"]
    return params


def _list_params(request: Request, body: dict[str, Any]) -> dict[str, Any]:
    query = request.query_params
    params: dict[str, Any] = {}
    for name in ("contextId", "pageToken", "statusTimestampAfter"):
        if query.get(name):
            params[name] = query[name]
    if query.get("status"):
        params["status"] = _state(query["status"])
    for name in ("pageSize", "historyLength"):
        value = _int(request, name)
        if value is not None:
            params[name] = value
    artifacts = _bool(request, "includeArtifacts")
    if artifacts is not None:
        params["includeArtifacts"] = artifacts
    return params


def _unsupported(error: type[RpcError]) -> Handler:
    async def refuse(call: Call) -> Response:
        raise error()

    return refuse


# -- the endpoint ---------------------------------------------------------------------------


class RestEndpoint:
    """Serves the REST routes through the methods of `server._http_methods`."""

    def __init__(
        self, methods: Mapping[str, Handler], auth: Authentication | None, max_body: int
    ) -> None:
        self.methods = methods
        self.auth = auth
        self.max_body = max_body

    def routes(self, middleware: Sequence[Middleware] = ()) -> list[Route]:
        """The routes, each behind `middleware` (the agent's gate, `server.routes`)."""
        push = _unsupported(PushNotificationNotSupportedError)
        m = self.methods
        create, get, listed, delete = (m.get(name, push) for name in PUSH_METHODS)
        table: list[tuple[str, list[str], Handler, Params]] = [
            ("/message:send", ["POST"], m["SendMessage"], _body_params),
            ("/message:stream", ["POST"], m["SendStreamingMessage"], _body_params),
            ("/tasks", ["GET"], m["ListTasks"], _list_params),
            ("/tasks/{id}:cancel", ["POST"], m["CancelTask"], _task_params),
            ("/tasks/{id}:subscribe", ["GET", "POST"], m["SubscribeToTask"], _task_params),
            ("/tasks/{id}/pushNotificationConfigs", ["POST"], create, _push_params),
            ("/tasks/{id}/pushNotificationConfigs", ["GET"], listed, _push_params),
            ("/tasks/{id}/pushNotificationConfigs/{cid}", ["GET"], get, _push_params),
            ("/tasks/{id}/pushNotificationConfigs/{cid}", ["DELETE"], delete, _push_params),
            ("/extendedAgentCard", ["GET"], m["GetExtendedAgentCard"], _body_params),
            ("/tasks/{id}", ["GET"], m["GetTask"], _task_params),  # after the `:verb` routes
        ]
        # Each also under a tenant (`/{tenant}/tasks/{id}`), after the untenanted ones: a
        # path is a tenant's only when no operation's own path reads it.
        table += [(f"/{{tenant}}{path}", verbs, run, shape) for path, verbs, run, shape in table]
        return [
            Route(path, self._route(handler, params), methods=methods, middleware=middleware)
            for path, methods, handler, params in table
        ]

    def _route(self, handler: Handler, params: Params) -> Callable[[Request], Any]:
        async def serve(request: Request) -> Response:
            return await self.serve(request, handler, params)

        return serve

    async def serve(self, request: Request, handler: Handler, params: Params) -> Response:
        extensions = SUPPORTED_EXTENSIONS & parse_extensions(request.headers.get("a2a-extensions"))
        try:
            body = await read_body(request, self.max_body)
            principal = await principal_of(self.auth, request)
            version = request.headers.get("a2a-version") or request.query_params.get("A2A-Version")
            if version is None or not supported_version(version):
                raise VersionNotSupportedError(
                    f"A2A-Version {version!r} is not supported on HTTP+JSON; send"
                    f" 'A2A-Version: {PROTOCOL_VERSION}'"
                )
            content_type = request.headers.get("content-type")
            if content_type is not None and browser_content_type(content_type):
                raise ContentTypeNotSupportedError(  # even empty: a page's form posts so
                    f"a body with Content-Type {content_type[:100]!r} is not accepted (a web"
                    " page may send one unasked): send Content-Type: application/json"
                )
            payload = _json_object(body, content_type)
            shaped = params(request, payload)
            caller = Caller(principal, extensions, tenant_of(shaped, _named_tenant(request)))
            call = Call(None, shaped, caller, request, REST)
            return await handler(call)
        except RpcError as error:
            return error_answer(error, extensions)
        except Exception:
            log.exception("internal error serving an HTTP+JSON call")
            return error_answer(InternalError(), extensions)


def _named_tenant(request: Request) -> str | None:
    """The tenant the request's path (`/{tenant}/…`) or query (`?tenant=`, as gRPC
    transcoding puts a field the path does not hold) names; -32602 when they differ."""
    path = request.path_params.get("tenant")
    query = request.query_params.get("tenant")
    if path is not None and query is not None and query != path:
        raise InvalidParamsError(
            f"tenant: the query names another tenant than the path ({query[:80]!r})"
        )
    return path if path is not None else query


def _json_object(body: bytes, content_type: str | None) -> dict[str, Any]:
    """The body as a JSON object ({} when empty); a body must be sent as JSON (415)."""
    if not body.strip():
        return {}
    if not is_json_media_type(content_type):
        raise ContentTypeNotSupportedError(
            f"Content-Type {(content_type or '')[:100]!r} is not supported: send application/json"
        )
    try:
        payload = json.loads(body, parse_constant=refuse_constant, parse_float=finite)
    except RecursionError:
        raise ParseError("Parse error: the JSON is nested too deeply") from None
    except (ValueError, UnicodeDecodeError):
        raise ParseError() from None
    if not isinstance(payload, dict):
        raise InvalidParamsError("the body must be a JSON object")
    if b"\\ud" in body or b"\\uD" in body:  # JSON escapes that may be lone surrogates
        refuse_lone_surrogates(payload, "body")
    return payload
