"""`create_app()`: an agent served as an A2A 1.0 JSON-RPC service on Starlette.

Routes: `POST /` (JSON-RPC; SSE for the streaming methods), `GET /.well-known/agent-card.json`
and `GET /health`. Input is checked in this order — body size, credentials, JSON, JSON-RPC
shape, protocol version, method, params — and every failure is a JSON-RPC error object:
never an HTTP 500, never a traceback. The store is opened, and tasks a previous process left
running are recovered, in the lifespan before the first request is served.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import hashlib
import json
import logging
import time
import urllib.request
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, TypeVar

import httpx
from pydantic import BaseModel, ValidationError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from a2a_handoff._handoffs import HandoffSettings, with_ext_metadata
from a2a_handoff._runtime import TaskManager
from a2a_handoff.agent import Agent
from a2a_handoff.auth import ApiKeyAuth
from a2a_handoff.client import AgentClient
from a2a_handoff.envelope import DEFAULT_MAX_HOPS, DEFAULT_TTL_SECONDS, parse_time
from a2a_handoff.errors import (
    AuthenticationError,
    ExtendedCardNotConfiguredError,
    InternalError,
    InvalidParamsError,
    InvalidRequestError,
    MethodNotFoundError,
    ParseError,
    PayloadTooLargeError,
    PushNotificationNotSupportedError,
    RpcError,
    UnsupportedOperationError,
    VersionNotSupportedError,
)
from a2a_handoff.escalation import EscalationPolicy

if TYPE_CHECKING:
    from a2a_handoff.contracts.catalog import Catalog
from a2a_handoff.extension import HANDOFF_EXTENSION_URI, parse_extensions, render_item, render_task
from a2a_handoff.models import (
    AgentCard,
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    SendMessageRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    Task,
    WireModel,
)
from a2a_handoff.sse import SseResponse, frame
from a2a_handoff.states import TaskState
from a2a_handoff.stores.base import Store, TaskEvent, TaskQuery
from a2a_handoff.transport import Http11Transport

log = logging.getLogger("a2a_handoff.server")

PROTOCOL_VERSION = "1.0"
STALE_AFTER_SECONDS = 60
DEFAULT_MAX_BODY = 1024 * 1024
CARD_PATH = "/.well-known/agent-card.json"
SUPPORTED_EXTENSIONS = frozenset({HANDOFF_EXTENSION_URI})
_PUSH_METHODS = frozenset(
    {
        "CreateTaskPushNotificationConfig",
        "GetTaskPushNotificationConfig",
        "ListTaskPushNotificationConfigs",
        "DeleteTaskPushNotificationConfig",
    }
)


class ListHandoffsRequest(WireModel):
    context_id: str | None = None


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


M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")


def validate(model: type[M], params: dict[str, Any]) -> M:
    """Params as `model`, or -32602 naming the first offending field."""
    try:
        return model.model_validate(params)
    except ValidationError as exc:
        first = exc.errors(include_url=False, include_context=False, include_input=False)[0]
        field = ".".join(str(part) for part in first["loc"]) or "params"
        more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        raise InvalidParamsError(f"{field}: {first['msg']}{more}") from None


def trim_history(task: Task, history_length: int | None) -> Task:
    if history_length is None or task.history is None:
        return task
    history = task.history[-history_length:] if history_length else []
    return task.model_copy(update={"history": history or None})


def _result_body(call_id: str | int | None, result_json: str) -> bytes:
    return (
        '{"jsonrpc":"2.0","id":' + json.dumps(call_id) + ',"result":' + result_json + "}"
    ).encode()


def error_body(call_id: str | int | None, error: RpcError) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": call_id, "error": error.to_dict()}


class _JsonResponse(Response):
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


class _App:
    """The handlers behind the routes; one per Starlette app."""

    def __init__(
        self,
        agent: Agent,
        card: AgentCard,
        store: Store,
        *,
        settings: HandoffSettings,
        client: AgentClient,
        auth: ApiKeyAuth | None,
        max_body: int,
        sse_ping: float,
        stale_after: float = STALE_AFTER_SECONDS,
        escalation: EscalationPolicy | None = None,
    ) -> None:
        self.stale_after = stale_after
        self.card = card
        self.store = store
        self.client = client
        self.manager = TaskManager(agent, store, settings, client, escalation)
        self.auth = auth
        self.max_body = max_body
        self.sse_ping = sse_ping
        self.card_body = card.dump_json().encode()
        self.card_etag = '"' + hashlib.sha256(self.card_body).hexdigest()[:32] + '"'
        self.card_modified = email.utils.formatdate(time.time(), usegmt=True)
        self._raw: dict[frozenset[str], list[tuple[bytes, bytes]]] = {}
        self.methods: dict[str, Callable[[Call], Awaitable[Response]]] = {
            "SendMessage": self.send_message,
            "SendStreamingMessage": self.send_streaming_message,
            "GetTask": self.get_task,
            "ListTasks": self.list_tasks,
            "CancelTask": self.cancel_task,
            "SubscribeToTask": self.subscribe_to_task,
            "GetExtendedAgentCard": self.get_extended_card,
            "ListHandoffs": self.list_handoffs,
        }

    # -- plumbing -------------------------------------------------------------------------

    def _headers(self, extensions: frozenset[str]) -> dict[str, str]:
        headers = {"A2A-Version": PROTOCOL_VERSION}
        if extensions:
            headers["A2A-Extensions"] = ",".join(sorted(extensions))
        return headers

    def _answer(self, call: Call, result_json: str) -> Response:
        """The JSON-RPC answer carrying `result_json`, with the protocol headers."""
        raw = self._raw.get(call.extensions)
        if raw is None:  # one list per set of active extensions (a subset of ours)
            raw = [
                (k.lower().encode(), v.encode()) for k, v in self._headers(call.extensions).items()
            ]
            self._raw[call.extensions] = raw
        return _JsonResponse(_result_body(call.id, result_json), raw)

    def _error(
        self, call_id: str | int | None, error: RpcError, extensions: frozenset[str] = frozenset()
    ) -> Response:
        status = 200
        if isinstance(error, AuthenticationError):
            status = 401
        elif isinstance(error, PayloadTooLargeError):
            status = 413
        headers = self._headers(extensions)
        if status == 401:
            headers["WWW-Authenticate"] = 'Bearer realm="a2a"'
        # ensure_ascii: an id holding a lone surrogate still encodes (as an escape).
        body = json.dumps(error_body(call_id, error), separators=(",", ":"))
        return Response(body, status_code=status, headers=headers, media_type="application/json")

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
            return self._error(call_id, error, extensions)
        except Exception:
            log.exception("internal error serving a JSON-RPC call")
            return self._error(call_id, InternalError(), extensions)

    def _task_response(
        self,
        call: Call,
        task: Task,
        history_length: int | None,
        *,
        wrap: bool = False,
        json_as_is: str = "",
    ) -> Response:
        """A Task result; `wrap` makes it a SendMessageResponse (`{"task": …}`).

        `json_as_is`: the task's JSON, used when nothing about it is to be changed.
        """
        unchanged = history_length is None and (
            call.transfers_visible or task.status.state is not TaskState.TRANSFERRED
        )
        if json_as_is and unchanged:
            shown = json_as_is
        else:
            rendered = render_task(task, call.transfers_visible)
            shown = trim_history(rendered, history_length).dump_json()
        return self._answer(call, '{"task":' + shown + "}" if wrap else shown)

    def _sse(
        self, call: Call, items: AsyncGenerator[tuple[int, StreamResponse], None]
    ) -> SseResponse:
        visible = call.transfers_visible
        call_id = call.id

        async def frames() -> AsyncIterator[bytes]:
            try:
                async for seq, item in items:
                    result = render_item(item, visible).dump_json()
                    yield frame(_result_body(call_id, result).decode(), seq)
            except RpcError as error:
                yield frame(json.dumps(error_body(call_id, error)))
            except Exception:
                log.exception("stream of a task failed")
                yield frame(json.dumps(error_body(call_id, InternalError())))
            finally:
                await items.aclose()

        return SseResponse(frames(), ping=self.sse_ping, headers=self._headers(call.extensions))

    async def _task_stream(
        self, task_id: str, head: Task | None, after: int
    ) -> AsyncGenerator[tuple[int, StreamResponse], None]:
        """`head` (if any) then the task's events after `after`, until it ends or pauses."""
        if head is not None:
            done = head.status.state.terminal or head.status.state.interrupted
            first = StreamResponse(task=head)
            head = None  # an open stream keeps no snapshot alive
            yield after, first
            if done:
                return
        event: TaskEvent
        async with contextlib.aclosing(self.store.follow(task_id, after)) as events:
            async for event in events:
                yield event.seq, event.item
                if _pauses(event.item):
                    return

    # -- methods --------------------------------------------------------------------------

    async def send_message(self, call: Call) -> Response:
        request = validate(SendMessageRequest, call.params)
        config = request.configuration
        if config is not None and config.task_push_notification_config is not None:
            raise PushNotificationNotSupportedError()
        submission = await self.manager.send(request.message, call.principal)
        waiting = submission.created if config and config.return_immediately else submission.settled
        record = await _shielded(waiting)
        task = record.task
        if submission.duplicate:
            task = with_ext_metadata(task, duplicate=True)
        history_length = config.history_length if config else None
        as_is = "" if submission.duplicate else record.json
        return self._task_response(call, task, history_length, wrap=True, json_as_is=as_is)

    async def send_streaming_message(self, call: Call) -> Response:
        request = validate(SendMessageRequest, call.params)
        config = request.configuration
        if config is not None and config.task_push_notification_config is not None:
            raise PushNotificationNotSupportedError()
        submission = await self.manager.send(request.message, call.principal)
        await _shielded(submission.created)
        return self._sse(
            call, self._task_stream(submission.task_id, submission.head, submission.after)
        )

    async def get_task(self, call: Call) -> Response:
        request = validate(GetTaskRequest, call.params)
        record = await self.manager.owned(request.id, call.principal)
        return self._task_response(call, record.task, request.history_length)

    async def list_tasks(self, call: Call) -> Response:
        request = validate(ListTasksRequest, call.params)
        page_size = request.page_size or 50
        page = await self.store.list_tasks(
            TaskQuery(
                owner=call.principal,
                context_id=request.context_id,
                state=request.status,
                page_size=page_size,
                page_token=request.page_token or None,
            )
        )
        tasks = []
        for record in page.records:
            task = trim_history(
                render_task(record.task, call.transfers_visible), request.history_length or 0
            )
            if not request.include_artifacts:
                task = task.model_copy(update={"artifacts": None})
            tasks.append(task.dump_json())
        result = (
            '{"tasks":['
            + ",".join(tasks)
            + '],"nextPageToken":'
            + json.dumps(page.next_page_token)
            + f',"pageSize":{page_size},"totalSize":{page.total_size}}}'
        )
        return self._answer(call, result)

    async def cancel_task(self, call: Call) -> Response:
        request = validate(CancelTaskRequest, call.params)
        record = await self.manager.cancel(request.id, call.principal)
        return self._task_response(call, record.task, None)

    async def subscribe_to_task(self, call: Call) -> Response:
        request = validate(SubscribeToTaskRequest, call.params)
        record = await self.manager.owned(request.id, call.principal)
        if record.state.terminal:
            raise UnsupportedOperationError(
                f"task {record.id} is {record.state.name}: a terminal task has no updates"
            )
        resume = _last_event_id(call.request)
        if resume is not None:
            stream = self._task_stream(record.id, None, resume)
        else:
            stream = self._task_stream(record.id, record.task, record.version)
        return self._sse(call, stream)

    async def get_extended_card(self, call: Call) -> Response:
        raise ExtendedCardNotConfiguredError()

    async def _visible(self, task_id: str, principal: str) -> bool:
        record = await self.store.get(task_id)
        return record is not None and record.visible_to(principal)

    async def list_handoffs(self, call: Call) -> Response:
        """Ours: the handoff ledger of a context — sent (the outbox) and received."""
        request = validate(ListHandoffsRequest, call.params)
        sent = [
            {
                "handoffId": e.handoff_id,
                "taskId": e.task_id,
                "contextId": e.context_id,
                "target": {"agent": e.target_name, "url": e.target_url},
                "status": e.status,
                "detail": e.detail,
                "createdAt": e.created_at,
                "updatedAt": e.updated_at,
                **self._contract_of(e.envelope),
                **_latency(e.created_at, e.updated_at, e.status),
            }
            for e in await self.store.outbox(context_id=request.context_id)
            if e.owner == call.principal
        ]
        received = [
            {
                "handoffId": e.handoff_id,
                "contextId": e.context_id,
                "source": {"agent": e.source_agent, "taskId": e.source_task_id},
                "taskId": e.task_id,
                "outcome": e.outcome,
                "reason": e.reason,
                "at": e.at,
            }
            for e in await self.store.received(request.context_id)
            if await self._visible(e.task_id, call.principal)
        ]
        result = json.dumps({"sent": sent, "received": received}, separators=(",", ":"))
        return self._answer(call, result)

    def _contract_of(self, envelope_json: str) -> dict[str, Any]:
        """The contract a sent handoff went under, and the audit event it names."""
        try:
            ref = json.loads(envelope_json).get("contract")
        except (ValueError, AttributeError):
            return {}
        if not ref:
            return {}
        found: dict[str, Any] = {"contract": ref}
        catalog = self.manager.handoffs.settings.contracts
        contract = catalog.by_id(ref) if catalog is not None else None
        if contract is not None and contract.observability is not None:
            found["auditEvent"] = contract.observability.audit_event
            found["metrics"] = list(contract.observability.metrics)
        return found

    # -- other routes ---------------------------------------------------------------------

    async def agent_card(self, request: Request) -> Response:
        headers = {
            "ETag": self.card_etag,
            "Cache-Control": "public, max-age=300",
            "Last-Modified": self.card_modified,
        }
        if self.card_etag in request.headers.get("if-none-match", ""):
            return Response(status_code=304, headers=headers)
        return Response(self.card_body, media_type="application/json", headers=headers)

    async def health(self, request: Request) -> Response:
        """Store reachable, stale pending handoffs, last completed handoff: 200 or 503."""
        store_ok = await self.store.ping()
        stale: list[str] = []
        last_done: str | None = None
        if store_ok:
            cutoff = (datetime.now(UTC) - timedelta(seconds=self.stale_after)).isoformat()
            pending = await self.store.outbox(status="pending")
            stale = [e.handoff_id for e in pending if parse_time(e.created_at).isoformat() < cutoff]
            done = await self.store.outbox(status="done")
            last_done = max((e.updated_at for e in done), default=None)
        healthy = store_ok and not stale
        body = {
            "status": "healthy" if healthy else "degraded",
            "store": "ok" if store_ok else "unreachable",
            "stalePendingHandoffs": len(stale),
            "lastCompletedHandoff": last_done,
            "breakers": self.client.breakers(),
        }
        return JSONResponse(body, status_code=200 if healthy else 503)


def _default_client(credentials: Mapping[str, str] | None) -> AgentClient:
    """The client for this agent's calls to others: over our HTTP/1.1 transport, unless the
    environment names an HTTP proxy (HTTP_PROXY, ALL_PROXY), which only httpx's own honours."""
    timeout = httpx.Timeout(10.0, connect=2.0)
    if urllib.request.getproxies().keys() & {"http", "all"}:
        return AgentClient(httpx.AsyncClient(timeout=timeout), credentials=credentials)
    transport = Http11Transport()
    http = httpx.AsyncClient(timeout=timeout, transport=transport)
    return AgentClient(http, direct=transport, credentials=credentials)


def _latency(created: str, updated: str, status: str) -> dict[str, Any]:
    """handoff.latency_ms of a closed handoff: from its checkpoint to its end."""
    if status == "pending":
        return {}
    elapsed = parse_time(updated) - parse_time(created)
    return {"latencyMs": round(elapsed.total_seconds() * 1000, 1)}


def _with_contracts(card: AgentCard, accepted: list[dict[str, Any]]) -> AgentCard:
    """The card with the handoff extension listing the contracts this agent accepts."""
    extensions = []
    for ext in card.capabilities.extensions or []:
        if ext.uri == HANDOFF_EXTENSION_URI:
            ext = ext.model_copy(update={"params": {**(ext.params or {}), "contracts": accepted}})
        extensions.append(ext)
    capabilities = card.capabilities.model_copy(update={"extensions": extensions})
    return card.model_copy(update={"capabilities": capabilities})


def _pauses(item: StreamResponse) -> bool:
    """Whether a stream ends after this item: the task ended or waits for its caller."""
    status = item.status_update.status if item.status_update else None
    if status is None and item.task is not None:
        status = item.task.status
    return status is not None and (status.state.terminal or status.state.interrupted)


async def _shielded(future: Awaitable[T]) -> T:
    """Await without cancelling the task's run when the caller goes away."""
    return await asyncio.shield(future)


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _parse_json(body: bytes) -> Any:
    """Strict JSON: no NaN or Infinity; too deep a nesting is a parse error too."""
    try:
        return json.loads(body, parse_constant=_refuse_constant)
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


def _last_event_id(request: Request) -> int | None:
    raw = request.headers.get("last-event-id")
    if raw is None:
        return None
    raw = raw.strip()
    if not raw.isdigit():
        raise InvalidParamsError("Last-Event-ID must be an event sequence number")
    return int(raw)


class _A2AStarlette(Starlette):
    """Starlette, with `POST /` dispatched straight to the JSON-RPC handler.

    The handler answers every failure itself, so the error and routing middleware in between
    would only cost time on the hot path (measured: about a tenth of a request's CPU).
    """

    def __init__(self, a2a: _App, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._a2a = a2a

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "POST" and scope["path"] == "/":
            scope["app"] = self
            response = await self._a2a.rpc(Request(scope, receive))
            await response(scope, receive, send)
            return
        await super().__call__(scope, receive, send)


def create_app(
    agent: Agent,
    card: AgentCard,
    store: Store,
    *,
    auth: ApiKeyAuth | None = None,
    routes: Mapping[str, str] | None = None,
    scope: Iterable[str] | None = None,
    credentials: Mapping[str, str] | None = None,
    client: AgentClient | None = None,
    max_hops: int = DEFAULT_MAX_HOPS,
    ttl_seconds: int = DEFAULT_TTL_SECONDS,
    recovery_interval: float = 2.0,
    max_body: int = DEFAULT_MAX_BODY,
    sse_ping: float = 15.0,
    stale_after: float = STALE_AFTER_SECONDS,
    escalation: EscalationPolicy | None = None,
    contracts: Catalog | None = None,
) -> Starlette:
    """Serve `agent` over A2A JSON-RPC; the app opens and closes `store` in its lifespan.

    Handoffs: `routes` maps target names to agent URLs, `scope` lists the capabilities this
    agent may delegate (None: any), `credentials` maps target URLs to the API key presented
    to them. `client` (with an injected httpx client) is built when not given.
    `escalation` sets the rules that escalate to the human agent (route `human` by default).
    `contracts` (a `Catalog`) turns handoff contracts on: every handoff needs one, sent and
    received; the card lists the contracts this agent accepts.
    """
    if auth is not None and not card.security_schemes:
        card = card.model_copy(
            update={
                "security_schemes": auth.security_schemes(),
                "security_requirements": auth.security_requirements(),
            }
        )
    if contracts is not None:
        card = _with_contracts(card, contracts.accepted_by(card.name))
    settings = HandoffSettings(
        agent_name=card.name,
        agent_url=card.url,
        routes=dict(routes or {}),
        scope=frozenset(scope) if scope is not None else None,
        max_hops=max_hops,
        ttl_seconds=ttl_seconds,
        recovery_interval=recovery_interval,
        contracts=contracts,
    )
    own_client = client is None
    if client is None:
        client = _default_client(credentials)
    app_state = _App(
        agent,
        card,
        store,
        settings=settings,
        client=client,
        auth=auth,
        max_body=max_body,
        sse_ping=sse_ping,
        stale_after=stale_after,
        escalation=escalation,
    )

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await store.open()
        manager = app_state.manager
        try:
            # Before serving: finish handoffs a previous process left pending, then fail
            # the tasks it left running (with replicas: those whose runner is gone).
            await manager.leases.start()
            replayed = await manager.handoffs.recover(wait_seconds=5.0)
            if replayed:
                log.warning("replaying %d pending handoff(s)", replayed)
            recovered = await manager.recover()
            if recovered:
                log.warning("failed %d task(s) left running by a previous process", recovered)
            manager.handoffs.start()
            manager.start_background()
            yield
        finally:
            await manager.aclose()
            if own_client:
                await app_state.client.aclose()
            await store.aclose()

    app = _A2AStarlette(
        app_state,
        routes=[
            Route("/", app_state.rpc, methods=["POST"]),
            Route(CARD_PATH, app_state.agent_card, methods=["GET"]),
            Route("/health", app_state.health, methods=["GET"]),
        ],
        lifespan=lifespan,
    )
    app.state.a2a = app_state
    return app
