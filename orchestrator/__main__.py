"""`python -m orchestrator`: talk to agents, following handoffs.

send --entry URL TEXT     one message; exit 0 completed, 2 input required, 1 failed,
                          3 an agent unreachable, 4 a handoff pending (or still working),
                          5 a transfer pointer to an origin not reachable from the configured
                          agents' trust lists (shown, not followed)
chat --entry URL          an interactive loop over stdin (works when piped)
watch TASK --agent URL    follow one task across transfers
trace [--context C --agent URL]   the chain of the conversation

Operators of a human agent:
inbox --agent URL                 escalations waiting for an answer, oldest first
approve TASK [NOTE] --agent URL   approve what escalation TASK asks permission for
deny TASK [NOTE] --agent URL      refuse it
reply TASK TEXT --agent URL       answer it (a decision, information)

Keys are per origin: --api-key (or $A2A_API_KEY) goes to the origin of the agent a command
starts at (--entry, --agent); more origins by --keys-file (lines `http://host:port=KEY`) or
$A2A_API_KEYS (`origin=key,…`). A key is never sent to another origin.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import httpx

from a2a_handoff import (
    HANDOFF_EXTENSION_URI,
    AgentClient,
    CircuitOpenError,
    RemoteError,
    RetryPolicy,
    UnavailableError,
)
from a2a_handoff.observe import tracing
from orchestrator import operator
from orchestrator.conversation import Conversation, Event, Exit, chain_of
from orchestrator.reach import Reach, credentials
from orchestrator.session import Hop, Session, default_session_path


def human(event: Event) -> str:
    """One event as a line for a person."""
    kind = event["event"]
    agent = f"[{event.get('agent', '')}]"
    if kind == "status":
        text = event.get("text") or ""
        return f"{agent} {event['state']}" + (f": {text}" if text else "")
    if kind == "transferred":
        return f"[{event['from']}] transferred to {event['to']} ({event['reason']})"
    if kind == "artifact":
        shown = []
        for part in event["parts"]:
            shown.append(part["text"] if "text" in part else json.dumps(part.get("data", part)))
        return f"{agent} artifact {event['name']}: {' '.join(shown)}"
    if kind == "input_required":
        return f"{agent} input required: {event['text']}"
    if kind in ("completed", "failed", "rejected", "canceled", "auth_required"):
        return f"{agent} {kind}" + (f": {event['text']}" if event.get("text") else "")
    if kind == "error":
        return f"{agent} error {event['code']}: {event['message']}"
    if kind == "message":
        return f"{agent} {event['text']}"
    if kind == "escalated":
        return f"{agent} escalated to a human operator: {event['text']}"
    return str(event.get("message", event))


def printer(as_json: bool) -> Callable[[Event], None]:
    def emit(event: Event) -> None:
        print(json.dumps(event) if as_json else human(event), flush=True)

    return emit


def _client(keys: dict[str, str]) -> AgentClient:
    http = httpx.AsyncClient(timeout=httpx.Timeout(30.0, connect=2.0))
    return AgentClient(
        http,
        credentials=keys,
        retry=RetryPolicy(attempts=3, total_seconds=5.0),
        extensions=[HANDOFF_EXTENSION_URI],
        breaker_threshold=3,
    )


async def _run(args: argparse.Namespace) -> int:
    if args.command == "console":
        return await _console(args)
    path: Path = args.session
    session = Session.load(path)
    emit = printer(args.json)
    start = getattr(args, "entry", None) or getattr(args, "agent", None) or session.entry
    try:
        keys = credentials(start, args.api_key or os.environ.get("A2A_API_KEY"), args.keys_file)
    except (OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 64
    client = _client(keys)
    reach = Reach(client, [start or "", *keys])
    try:
        if args.command in _OPERATOR:
            return await _operate(client, args)
        if args.command in ("send", "chat") and args.entry and session.entry != args.entry:
            session = Session(entry=args.entry)  # a new entry agent: a new conversation
        if args.command in ("send", "chat") and not session.entry:
            print("error: no conversation yet: pass --entry URL", file=sys.stderr)
            return 64
        conversation = Conversation(
            client,
            session,
            emit,
            save=lambda: session.save(path),
            max_hops=args.max_hops,
            wait=args.wait,
            reach=reach,
        )
        if args.command == "send":
            code = await traced(conversation, " ".join(args.text), emit, args.json)
            session.save(path)
            return int(code)
        if args.command == "chat":
            return await _chat(conversation, session, path, args.json)
        if args.command == "watch":
            code = await conversation.watch(args.agent, args.task)
            return int(code)
        return await _trace(client, session, args, reach)
    finally:
        await client.aclose()


async def _console(args: argparse.Namespace) -> int:
    """The console (orchestrator.console): the operator's keys go to the agents named."""
    from orchestrator.console import serve

    api_key = args.api_key or os.environ.get("A2A_API_KEY")
    keys: dict[str, str] = {}
    try:
        for url in args.agent:
            keys |= credentials(url, api_key, args.keys_file)
    except (OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 64
    client = _client(keys)
    try:
        return await serve(client, args.agent, keys, args.host, args.port)
    finally:
        await client.aclose()


_OPERATOR = ("inbox", "approve", "deny", "reply")
_VERDICTS = {"approve": "approved", "deny": "denied", "reply": "answered"}


async def _operate(client: AgentClient, args: argparse.Namespace) -> int:
    """The operator commands: exit 0 done, 1 refused by the agent, 3 unreachable."""
    try:
        if args.command == "inbox":
            items = await operator.inbox(client, args.agent)
            for item in items:
                print(json.dumps(item) if args.json else operator.render(item), flush=True)
            if not items and not args.json:
                print("no escalation is waiting", flush=True)
            return 0
        text = " ".join(args.text)
        task = await operator.answer(client, args.agent, args.task, _VERDICTS[args.command], text)
    except (UnavailableError, CircuitOpenError) as exc:
        print(f"error: cannot reach {args.agent}: {exc}", file=sys.stderr)
        return int(Exit.UNREACHABLE)
    except RemoteError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        return int(Exit.FAILED)
    event = {"event": "answered", "taskId": task.id, "verdict": _VERDICTS[args.command]}
    print(json.dumps(event) if args.json else f"answered {task.id}: {event['verdict']}")
    return 0


async def traced(
    conversation: Conversation, text: str, emit: Callable[[Event], None], as_json: bool
) -> Exit:
    """Send one user message as a trace of its own (its `traceparent` goes with every call;
    with --json, its id is printed first: `{"event": "trace", "traceId": …}`)."""
    with tracing.new_trace():
        if as_json:
            emit({"event": "trace", "traceId": tracing.current_trace_id()})
        return await conversation.send(text)


async def _chat(conversation: Conversation, session: Session, path: Path, as_json: bool) -> int:
    code = Exit.COMPLETED
    interactive = sys.stdin.isatty()
    while True:
        if interactive:
            print("you> ", end="", flush=True)
        line = await asyncio.to_thread(sys.stdin.readline)
        if not line:
            return int(code)
        text = line.strip()
        if not text:
            continue
        if not as_json and not interactive:
            print(f"you> {text}", flush=True)
        code = await traced(conversation, text, conversation.emit, as_json)
        session.save(path)


async def _trace(
    client: AgentClient, session: Session, args: argparse.Namespace, reach: Reach
) -> int:
    if args.context:
        if not args.agent:
            print("error: --context needs --agent URL", file=sys.stderr)
            return 64
        hops: list[Hop] = await chain_of(client, args.agent, args.context, reach)
    else:
        hops = session.chain
    for hop in hops:
        if args.json:
            print(json.dumps(hop.__dict__))
        else:
            state = hop.state.removeprefix("TASK_STATE_").lower()
            reason = f"  ({hop.reason})" if hop.reason else ""
            print(f"{hop.at:24} {hop.agent_name:10} {hop.task_id}  {state}{reason}")
    return 0 if hops else 1


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m orchestrator",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--session",
        type=Path,
        default=default_session_path(),
        help="the conversation file (default: %(default)s)",
    )
    parser.add_argument("--json", action="store_true", help="one JSON object per event")
    parser.add_argument(
        "--api-key",
        help="the key presented to the origin of --entry / --agent, and only there"
        " (or $A2A_API_KEY)",
    )
    parser.add_argument(
        "--keys-file",
        type=Path,
        help="keys for more origins: `http://host:port=KEY` lines (or $A2A_API_KEYS)",
    )
    parser.add_argument("--max-hops", type=int, default=8, help="transfers per user message")
    parser.add_argument(
        "--wait",
        type=float,
        default=30.0,
        help="seconds to wait for an answer before returning (exit 4)",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    send = commands.add_parser("send", help="send one message")
    send.add_argument("--entry", help="the agent a new conversation starts at")
    send.add_argument("text", nargs="+")
    chat = commands.add_parser("chat", help="an interactive conversation")
    chat.add_argument("--entry", help="the agent a new conversation starts at")
    watch = commands.add_parser("watch", help="follow a task across transfers")
    watch.add_argument("task")
    watch.add_argument("--agent", required=True)
    trace = commands.add_parser("trace", help="the chain of the conversation")
    trace.add_argument("--context")
    trace.add_argument("--agent")
    inbox = commands.add_parser("inbox", help="escalations waiting at a human agent")
    inbox.add_argument("--agent", required=True, help="the human agent's URL")
    for name, what in (
        ("approve", "approve an escalation"),
        ("deny", "deny an escalation"),
        ("reply", "answer an escalation"),
    ):
        command = commands.add_parser(name, help=what)
        command.add_argument("task")
        command.add_argument("text", nargs="+" if name == "reply" else "*")
        command.add_argument("--agent", required=True, help="the human agent's URL")
    console = commands.add_parser("console", help="a live web page of the agents' work")
    console.add_argument("--agent", action="append", required=True, help="an agent's URL")
    console.add_argument("--port", type=int, default=8190)
    console.add_argument("--host", default="127.0.0.1")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return asyncio.run(_run(args))
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
