"""`python -m orchestrator mcp --entry URL`: the whole agent network as one MCP server (stdio).

An MCP host (a desktop assistant, an IDE) launches it as a subprocess and talks to it over
stdin and stdout. It offers two tools. `converse`: a user's message goes through the entry
agent and on to whoever owns the conversation by then — the CLI's conversation logic
(`orchestrator.conversation`): transfers followed, input asked for answered by the next
message, loops guarded; it answers with what happened and where the conversation is now.
`status`: where a conversation is, whether it waits for a human operator, its last events.

A turn that waits for a human operator (an escalation) answers at once with a normal result
saying so; messages sent meanwhile are kept as notes, never sent to the agents; the next call
once the operator decided (`converse` or `status`) gives the outcome (`orchestrator.mcp_threads`).

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
from orchestrator.mcp_threads import AWAITING, Answer, Thread
from orchestrator.reach import Reach
from orchestrator.session import Session

TOOL = "converse"
STATUS = "status"
_OK = {ExitCode.COMPLETED, ExitCode.INPUT_REQUIRED, ExitCode.PENDING}
_KEYS_KEPT = 1000  # answers kept for retried calls (the oldest forgotten first)


class NetworkServer:
    """The `converse` and `status` tools over one entry agent; conversations kept by name."""

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
        self.threads: dict[str, Thread] = {}
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
        name = {"type": "string", "description": "which conversation (default: `default`)"}
        schema = {
            "type": "object",
            "properties": {
                "text": {"type": "string", "description": "the user's message"},
                "conversation": name,
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
        converse = types.Tool(
            name=TOOL,
            description="Send the user's message to the agent network: it goes to the agent"
            " that owns the conversation (the entry agent at first), follows handoffs to other"
            " agents, and answers with what they said; when an agent asks for input, send the"
            " user's answer as the next message of the same conversation. When the request"
            " needs a human operator's decision, the answer says it is pending: messages sent"
            " meanwhile are kept, not sent on; `status` (or the next message) gives the outcome.",
            input_schema=schema,
        )
        status = types.Tool(
            name=STATUS,
            description="Where a conversation is: the agent and task that own it, whether it"
            " waits for a human operator's decision (and what for), its last events; once the"
            " operator decided, the outcome.",
            input_schema={"type": "object", "properties": {"conversation": name}},
        )
        return types.ListToolsResult(tools=[converse, status])

    async def _call_tool(
        self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        args = params.arguments or {}
        name = args.get("conversation", "default")
        if params.name not in (TOOL, STATUS):
            return _error(f"no tool {params.name!r} here (only {TOOL} and {STATUS})")
        if not isinstance(name, str) or not name:
            return _error("conversation: a name is required when given")
        if params.name == STATUS:
            thread = self.threads.get(name)
            if thread is None:
                return self._result(name, Session(entry=self.entry), Answer("none", []), None)
            answer = await thread.status()
            return self._result(name, thread.session, answer, thread, recent=True)
        text, key = args.get("text"), args.get("idempotencyKey")
        if not isinstance(text, str) or not text.strip():
            return _error("text: the user's message is required")
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

    def _start(self, session: Session, emit: Callable[[Event], None]) -> Conversation:
        return Conversation(
            self.client, session, emit, max_hops=self.max_hops, wait=self.wait, reach=self.reach
        )

    async def _converse(self, name: str, text: str, new: bool) -> types.CallToolResult:
        if new or name not in self.threads:
            old = self.threads.pop(name, None)
            if old is not None:
                old.close()
            self.threads[name] = Thread(self.client, Session(entry=self.entry), self._start)
        thread = self.threads[name]
        return self._result(name, thread.session, await thread.converse(text), thread)

    def _result(
        self,
        name: str,
        session: Session,
        answer: Answer,
        thread: Thread | None,
        *,
        recent: bool = False,
    ) -> types.CallToolResult:
        """The answer as text (its new events, or where the conversation is) and as structured
        content (with `recent`: the conversation's last events, not only the new ones)."""
        waiting = answer.outcome == AWAITING
        lines = [self._line(e, waiting) for e in answer.events]
        lines = [line for line in lines if line]
        log = list(thread.log) if thread is not None else []
        if recent and not lines and log and not waiting:
            lines.append(self._line(log[-1], waiting))  # nothing new: where it stands
        about = thread.waiting_for if thread is not None else ""
        who = session.owner_name or session.owner_url or "the human agent"
        if waiting and not any(e["event"] == AWAITING for e in answer.events):
            lines.append(_pending(who, about, still=True))
        if answer.notes:
            kept = "; ".join(repr(n) for n in answer.notes)
            lines.append(
                f"Kept while the operator decided, not sent to the agents: {kept}."
                " Send again what still needs an answer."
            )
        if answer.outcome == "none":
            lines.append(f"No conversation {name!r} yet: send a message with {TOOL}.")
        elif answer.outcome == "working" and not lines:
            lines.append("A message of this conversation is still under way: ask again shortly.")
        structured: dict[str, Any] = {
            "conversation": name,
            "outcome": answer.outcome,
            "awaitingOperator": waiting,
            "owner": session.owner_name,
            "ownerUrl": session.owner_url,
            "taskId": session.task_id,
            "contextId": session.context_id,
            "state": session.state,
            "events": log if recent else answer.events,
            "notes": answer.notes if not waiting else list(thread.notes if thread else []),
        }
        if waiting:
            structured["waitingFor"] = about
        failed = answer.code is not None and answer.code not in _OK
        return types.CallToolResult(
            content=[types.TextContent(text="\n".join(lines) or json.dumps(structured))],
            structured_content=structured,
            is_error=failed,
        )

    def _line(self, event: Event, waiting: bool) -> str:
        """An event as a line for the host: the CLI's, but for what only the CLI can do."""
        kind, agent = event["event"], str(event.get("agent", ""))
        if kind == AWAITING:
            return _pending(agent, "", still=False)
        if kind == "pending" and waiting:
            return ""  # said by the line above: the wait goes on
        if kind == "pending":
            return (
                f"[{agent}] no answer yet (still working, or its handoff still pending): it goes"
                f" on; call {STATUS} (or send a message) later for it"
            )
        if kind == "not_delivered":
            return (
                f"Your message was not delivered: {agent} is still working on task"
                f" {event.get('taskId')}; send it again once it answers ({STATUS} says when)."
            )
        return self.render(event)


def _pending(who: str, about: str, *, still: bool) -> str:
    """What a host tells its user while a human operator decides, and what comes next."""
    what = f": {about}" if about else ""
    return (
        f"{'Still waiting' if still else 'Waiting'} for a human operator at {who} to"
        f" decide{what}. Nothing happens until they approve, deny or answer; that can take"
        f" minutes or longer. Call {STATUS} (or send a message) later for the outcome;"
        " messages sent meanwhile are kept here, not sent to the agents."
    )


def _error(message: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=message)], is_error=True)
