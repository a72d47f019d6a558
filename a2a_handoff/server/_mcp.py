"""The agent as an MCP server: streamable HTTP at `/mcp` on the agent's own port.

A thin face over the same service JSON-RPC and REST serve (`server.service`): every tool
calls the operation a client of the other faces would — with the handoff extension active —
and makes its tool result from the domain value it answers (`server._mcp_results`), so
ownership, deduplication, the handoff receiver's checks and the rendering of tasks are the
same.

Tools: one per skill of the card (sends a message and answers with the task's outcome: its
text, artifacts and state; a task that asks for input answers with the question and its
id), `reply` (continues a task that asked for input), `get_task`, `health_check` (the store,
the handoffs pending for more than 5 minutes, the last completed one) and
`resume_from_handoff` (a signed handoff envelope, received exactly as over A2A). A task
that waits for a human operator answers a normal result saying so, and what `get_task` will
show once the operator decided (`server._mcp_results`).

Retries are safe: a call with an `idempotencyKey` sends a message whose id is derived from
the key, so a retried call finds the task the first one made (the agent deduplicates
message ids); a handoff envelope carries its own key. Under API-key auth `/mcp` takes the
same keys as the other routes and a tool sees only its caller's tasks. A request from a web
page (a `Host` or `Origin` not the agent's own) is refused before it gets here, as on every
route (`server._browser_guard`): a local agent is not to be driven by whatever site its user
visits. A body over the agent's limit (`LimitsConfig.max_body`) is refused with 413 before
the MCP server reads it.

This module is imported only when the MCP face is on (`create_app(mcp_server=True)`): it
needs the `mcp` package (`pip install '.[mcp]'` in the a2a-handoff clone).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

try:
    import mcp_types as types
    from mcp.server.context import ServerRequestContext
    from mcp.server.lowlevel.server import Server
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
except ImportError as exc:  # pragma: no cover - the extra is missing
    raise ImportError(
        "the MCP face needs the mcp package: pip install '.[mcp]' in the a2a-handoff clone"
    ) from exc

from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse
from starlette.types import Message, Receive, Scope, Send

from a2a_handoff.errors import PayloadTooLargeError, RpcError
from a2a_handoff.protocol.extension import HANDOFF_EXTENSION_URI, SIGNATURE_KEY
from a2a_handoff.protocol.models import GetTaskRequest, SendMessageRequest
from a2a_handoff.server._authentication import Authentication
from a2a_handoff.server._call import read_body, validate
from a2a_handoff.server._health import Health
from a2a_handoff.server._mcp_results import error_result, invalid_result, outcome, part_texts
from a2a_handoff.server._tls_peer import peer_of
from a2a_handoff.server.results import Caller, TaskView
from a2a_handoff.server.service import AgentService

MCP_PATH = "/mcp"
HEALTH_STALE_SECONDS = 300.0  # health_check: pending handoffs older than 5 minutes
_FIXED = ("reply", "get_task", "health_check", "resume_from_handoff")
_KEY = {
    "type": "string",
    "maxLength": 200,
    "description": "Any unique string; a retry with the same key returns the same task"
    " instead of starting the work again.",
}
_SEES_TRANSFERS = frozenset({HANDOFF_EXTENSION_URI})  # a tool says where a task went


def tool_name(skill_id: str) -> str:
    """A skill id as an MCP tool name (letters, digits, `_` and `-`; 64 at most)."""
    name = re.sub(r"[^A-Za-z0-9_-]", "_", skill_id)[:64] or "skill"
    return f"skill_{name}"[:64] if name in _FIXED else name


def _message_id(tool: str, key: str | None) -> str:
    if not key:
        return str(uuid.uuid4())
    return "mcp-" + hashlib.sha256(f"{tool}\x1f{key}".encode()).hexdigest()[:32]


def _string(args: dict[str, Any], name: str, *, required: bool = True) -> str | None:
    value = args.get(name)
    if value is None and not required:
        return None
    if not isinstance(value, str) or (required and not value):
        raise ValueError(f"{name}: a non-empty string is required")
    return value


class McpFace:
    """The MCP server of one agent: its tools, and the ASGI app serving `/mcp`."""

    def __init__(
        self, service: AgentService, health: Health, auth: Authentication | None, max_body: int
    ) -> None:
        card = service.card
        self.card = card
        self.service = service
        self.health = health
        self.auth = auth
        self.max_body = max_body
        self.skills = {tool_name(s.id): s for s in card.skills}
        self.server: Server[Any] = Server(
            card.name,
            version=card.version,
            description=card.description,
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
        )
        self.sessions = StreamableHTTPSessionManager(
            self.server, stateless=True, json_response=True
        )

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Serve while inside (the app's lifespan)."""
        async with self.sessions.run():
            yield

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        peer = peer_of(request.scope)
        if self.auth is not None and await self.auth.authenticate(request.headers, peer) is None:
            answer = JSONResponse({"error": "valid credentials are required"}, 401)
            answer.headers["WWW-Authenticate"] = 'Bearer realm="a2a"'
            await answer(scope, receive, send)
            return
        if scope["method"] == "POST":
            try:
                body = await read_body(request, self.max_body)
            except PayloadTooLargeError as error:
                await JSONResponse({"error": error.message}, 413)(scope, receive, send)
                return
            except ClientDisconnect:
                return
            receive = _replay(body, receive)
        await self.sessions.handle_request(scope, receive, send)

    # -- tools ------------------------------------------------------------------------------

    def _tools(self) -> list[types.Tool]:
        tools = []
        for name, skill in self.skills.items():
            tools.append(
                types.Tool(
                    name=name,
                    title=skill.name,
                    description=f"{skill.description} Sends a message to {self.card.name} and"
                    " answers with its outcome; when it needs input, the answer is its question"
                    " and the task id to reply to.",
                    input_schema=_schema(
                        text={"type": "string", "description": "the message"},
                        contextId={
                            "type": "string",
                            "description": "continue this conversation (optional)",
                        },
                        required=["text"],
                    ),
                )
            )
        tools += [
            types.Tool(
                name="reply",
                description="Answer a task that asked for input (its task id and your answer).",
                input_schema=_schema(
                    taskId={"type": "string"}, text={"type": "string"}, required=["taskId", "text"]
                ),
            ),
            types.Tool(
                name="get_task",
                description="A task's state, its last message and artifacts.",
                input_schema=_schema(taskId={"type": "string"}, required=["taskId"], key=False),
            ),
            types.Tool(
                name="health_check",
                description="The agent's store, its handoffs pending for more than 5 minutes,"
                " and its last completed handoff.",
                input_schema=_schema(key=False),
            ),
            types.Tool(
                name="resume_from_handoff",
                description="Receive a signed handoff envelope from another agent: verified as"
                " over A2A (signature, trust list, contracts); the envelope's own key makes a"
                " retry return the same task.",
                input_schema=_schema(
                    envelope={"type": "object", "description": "the handoff envelope"},
                    signature={"type": "string", "description": "its detached JWS"},
                    required=["envelope", "signature"],
                    key=False,
                ),
            ),
        ]
        return tools

    async def _list_tools(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=self._tools())

    async def _call_tool(
        self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        request = ctx.request
        if not isinstance(request, Request):
            return invalid_result("this server answers over streamable HTTP only")
        principal = ""
        if self.auth is not None:
            found = await self.auth.authenticate(request.headers, peer_of(request.scope))
            if found is None:  # checked at the door too; never run a tool without a caller
                return invalid_result("valid credentials are required")
            principal = found
        caller = Caller(principal, _SEES_TRANSFERS)
        args = params.arguments or {}
        tools: dict[str, Callable[[dict[str, Any], Caller], Awaitable[types.CallToolResult]]] = {
            "reply": self._reply,
            "get_task": self._get_task,
            "health_check": self._health_check,
            "resume_from_handoff": self._resume,
        }
        try:
            if params.name in self.skills:
                return await self._send_to_skill(params.name, args, caller)
            if params.name in tools:
                return await tools[params.name](args, caller)
            return invalid_result(f"no tool {params.name!r} here")
        except ValueError as exc:
            return invalid_result(str(exc))
        except RpcError as exc:
            return error_result(exc)

    async def _send(
        self, message: dict[str, Any], caller: Caller, **config: Any
    ) -> types.CallToolResult:
        params: dict[str, Any] = {"message": message}
        if config:
            params["configuration"] = config
        request = validate(SendMessageRequest, params)
        result = await self.service.send_message(request, caller)
        if not isinstance(result, TaskView):  # a direct reply: no task
            text = " ".join(part_texts(result.dump().get("parts")))
            return types.CallToolResult(
                content=[types.TextContent(text=text)],
                structured_content={"state": "replied", "message": text},
            )
        return outcome(result.task.dump())

    async def _send_to_skill(
        self, tool: str, args: dict[str, Any], caller: Caller
    ) -> types.CallToolResult:
        text = _string(args, "text")
        key = _string(args, "idempotencyKey", required=False)
        message: dict[str, Any] = {
            "messageId": _message_id(tool, key),
            "role": "ROLE_USER",
            "parts": [{"text": text}],
            "metadata": {"skill": self.skills[tool].id},
        }
        context_id = _string(args, "contextId", required=False)
        if context_id:
            message["contextId"] = context_id
        return await self._send(message, caller)

    async def _reply(self, args: dict[str, Any], caller: Caller) -> types.CallToolResult:
        task_id = _string(args, "taskId")
        key = _string(args, "idempotencyKey", required=False)
        message = {
            "messageId": _message_id(f"reply\x1f{task_id}", key),
            "role": "ROLE_USER",
            "taskId": task_id,
            "parts": [{"text": _string(args, "text")}],
        }
        return await self._send(message, caller)

    async def _get_task(self, args: dict[str, Any], caller: Caller) -> types.CallToolResult:
        request = validate(GetTaskRequest, {"id": _string(args, "taskId")})
        return outcome((await self.service.get_task(request, caller)).task.dump())

    async def _health_check(self, args: dict[str, Any], caller: Caller) -> types.CallToolResult:
        healthy, report = await self.health.measure()
        return types.CallToolResult(
            content=[types.TextContent(text=json.dumps(report))],
            structured_content=report,
            is_error=not healthy,
        )

    async def _resume(self, args: dict[str, Any], caller: Caller) -> types.CallToolResult:
        envelope = args.get("envelope")
        if not isinstance(envelope, dict):
            raise ValueError("envelope: the handoff envelope (an object) is required")
        signature = _string(args, "signature")
        key = envelope.get("idempotencyKey")
        message: dict[str, Any] = {
            "messageId": f"handoff-{key if isinstance(key, str) else uuid.uuid4()}",
            "role": "ROLE_USER",
            "parts": [{"text": "handoff"}],
            "metadata": {HANDOFF_EXTENSION_URI: envelope, SIGNATURE_KEY: signature},
        }
        if isinstance(envelope.get("contextId"), str):
            message["contextId"] = envelope["contextId"]
        return await self._send(message, caller, returnImmediately=True)


def _schema(*, required: list[str] | None = None, key: bool = True, **props: Any) -> dict[str, Any]:
    properties = dict(props)
    if key:
        properties["idempotencyKey"] = _KEY
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    return schema


def _replay(body: bytes, receive: Receive) -> Receive:
    """A `receive` that hands the MCP server the body already read (and checked) first,
    then what the connection says (its end)."""
    sent = False

    async def replayed() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed
