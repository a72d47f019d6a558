"""`python -m orchestrator mcp --entry URL`: the whole agent network as one MCP server (stdio).

An MCP host (a desktop assistant, an IDE) launches it as a subprocess and talks to it over
stdin and stdout. It offers one tool, `converse`: a user's message goes through the entry
agent and on to whoever owns the conversation by then — the CLI's conversation logic
(`orchestrator.conversation`): transfers followed, input asked for answered by the next
message, loops guarded. The tool answers with what happened (the lines `send` prints) and
where the conversation is now.

Conversations are named by the host (`conversation`, default `default`) and kept in this
process; `new: true` starts one afresh. A call with an `idempotencyKey` already seen answers
what the first call answered (waiting for it when still running): the message is not sent
twice. Nothing is ever written to stdout but the protocol: events go to the tool's answer,
logs to stderr.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.server.stdio import stdio_server

from a2a_handoff import AgentClient, __version__
from a2a_handoff.exits import ExitCode
from orchestrator.conversation import Conversation, Event
from orchestrator.reach import Reach
from orchestrator.session import Session

TOOL = "converse"
_OK = {ExitCode.COMPLETED, ExitCode.INPUT_REQUIRED}
_KEYS_KEPT = 1000  # answers kept for retried calls (the oldest forgotten first)


class NetworkServer:
    """The `converse` tool over one entry agent; conversations kept by name."""

    def __init__(
        self,
        client: AgentClient,
        entry: str,
        reach: Reach,
        render: Callable[[Event], str],
        *,
        max_hops: int = 8,
        wait: float = 30.0,
    ) -> None:
        self.client = client
        self.entry = entry
        self.reach = reach
        self.render = render
        self.max_hops = max_hops
        self.wait = wait
        self.sessions: dict[str, Session] = {}
        self.locks: dict[str, asyncio.Lock] = {}
        self.answers: dict[str, asyncio.Future[types.CallToolResult]] = {}
        self.server: Server[Any] = Server(
            "a2a-handoff-network",
            version=__version__,
            description=f"The agent network entered at {entry}",
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
        )

    async def serve_stdio(self) -> None:
        async with stdio_server() as (read, write):
            await self.server.run(read, write, self.server.create_initialization_options())

    async def _list_tools(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        schema = {
            "type": "object",
            "properties": {
                "text": {"type": "string", "description": "the user's message"},
                "conversation": {
                    "type": "string",
                    "description": "which conversation (default: `default`)",
                },
                "new": {"type": "boolean", "description": "start this conversation afresh"},
                "idempotencyKey": {
                    "type": "string",
                    "maxLength": 200,
                    "description": "a retry with the same key answers what the first call"
                    " did, without sending the message again",
                },
            },
            "required": ["text"],
        }
        tool = types.Tool(
            name=TOOL,
            description="Send the user's message to the agent network: it goes to the agent"
            " that owns the conversation (the entry agent at first), follows handoffs to other"
            " agents, and answers with what they said; when an agent asks for input, send the"
            " user's answer as the next message of the same conversation.",
            input_schema=schema,
        )
        return types.ListToolsResult(tools=[tool])

    async def _call_tool(
        self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        if params.name != TOOL:
            return _error(f"no tool {params.name!r} here (only {TOOL})")
        args = params.arguments or {}
        text, name = args.get("text"), args.get("conversation", "default")
        key = args.get("idempotencyKey")
        if not isinstance(text, str) or not text.strip():
            return _error("text: the user's message is required")
        if not isinstance(name, str) or not name:
            return _error("conversation: a name is required when given")
        if key is None:
            return await self._converse(name, text, bool(args.get("new")))
        if not isinstance(key, str):
            return _error("idempotencyKey: a string")
        if key not in self.answers:
            while len(self.answers) >= _KEYS_KEPT:
                self.answers.pop(next(iter(self.answers)))
            job = asyncio.ensure_future(self._converse(name, text, bool(args.get("new"))))
            self.answers[key] = job
        return await asyncio.shield(self.answers[key])

    async def _converse(self, name: str, text: str, new: bool) -> types.CallToolResult:
        lock = self.locks.setdefault(name, asyncio.Lock())
        async with lock:  # one message at a time per conversation, as a person types them
            if new or name not in self.sessions:
                self.sessions[name] = Session(entry=self.entry)
            session = self.sessions[name]
            events: list[Event] = []
            conversation = Conversation(
                self.client,
                session,
                events.append,
                max_hops=self.max_hops,
                wait=self.wait,
                reach=self.reach,
            )
            code = await conversation.send(text)
        lines = [self.render(e) for e in events]
        structured = {
            "conversation": name,
            "outcome": ExitCode(code).name.lower(),
            "owner": session.owner_name,
            "ownerUrl": session.owner_url,
            "taskId": session.task_id,
            "contextId": session.context_id,
            "events": events,
        }
        return types.CallToolResult(
            content=[types.TextContent(text="\n".join(lines) or json.dumps(structured))],
            structured_content=structured,
            is_error=code not in _OK,
        )


def _error(message: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=message)], is_error=True)
