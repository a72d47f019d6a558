"""`python -m orchestrator`: talk to agents, following handoffs.

send [--entry URL] [--new] TEXT   one message, by the conversation's rules (below)
chat [--entry URL] [--new]        an interactive loop over stdin (works when piped)
new [--entry URL]                 start a fresh conversation (the next send starts it)
watch [TASK] [--agent URL]        follow a task across transfers (default: the session's)
trace [--context C] [--agent URL] the conversation's chain, in time order
cancel [TASK] [--agent URL]       cancel a task (default: the session's); one being handed
                                  off has its handoff withdrawn, unless the target took it

A conversation: while its task waits for input, the next message answers that task; while it
is still working, the next message waits (up to --wait seconds) for it to pause or end, and is
otherwise not delivered (exit 6); once its last task is over, the next message starts a new
task at the entry agent, in the same conversation. `new`, `send --new` or an --entry other than
the session's start a new conversation.

Operators of a human agent:
inbox --agent URL                 escalations waiting for an answer, oldest first
approve TASK [NOTE] --agent URL   approve what escalation TASK asks permission for (TASK: its
                                  id, or the start of it that one escalation waiting has)
deny TASK [NOTE] --agent URL      refuse it
reply TASK TEXT --agent URL       answer it with information or a decision; to a permission
                                  it is a note, and the escalation still waits for approve or
                                  deny (or `reply --approve` / `reply --deny`)
serve --entry URL --port P [--auth-keys FILE] [--store URL]
                                  the gateway: an A2A agent any client talks to, which
                                  follows handoffs for it (docs/gateway.md)
console --agent URL [--agent URL …] [--port P]
                                  a live web page: conversations drawn as chains across
                                  agents, the inbox with approve / deny / reply, health

mcp --entry URL                   the agent network as an MCP server over stdio, for MCP
                                  hosts: tools `converse` and `status` (needs a2a-handoff[mcp])

Keys are per origin: --api-key (or $A2A_API_KEY) goes to the origin of the agent a command
starts at (--entry, --agent); more origins by --keys-file (lines `http://host:port=KEY`) or
$A2A_API_KEYS (`origin=key,…`); `--credential ORIGIN=oauth2:@FILE` presents the tokens of an
OAuth2 client (the client-credentials grant) to ORIGIN. A key is never sent to another origin.
Options go before or after the command.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from urllib.parse import urlsplit

import httpx

from a2a_handoff import HANDOFF_EXTENSION_URI, AgentClient, RetryPolicy, __version__
from a2a_handoff.client import TokenSource
from a2a_handoff.errors import (
    AgentUrlError,
    AuthenticationError,
    CircuitOpenError,
    RemoteError,
    UnavailableError,
)
from a2a_handoff.exits import ExitCode, Parser, quiet_pipe
from a2a_handoff.observe import tracing
from a2a_handoff.protocol import check_agent_url
from a2a_handoff.secrets import accept_insecure_files, read_secret
from orchestrator import operator
from orchestrator.conversation import Conversation, Event, Exit, chain_of, describe
from orchestrator.reach import Reach, credentials, named_credentials
from orchestrator.serve import add_arguments as serve_arguments
from orchestrator.session import Hop, Session, SessionDamaged, default_session_path


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
        return f"{agent} error {event['code']}: {refused(event['code'], event['message'])}"
    if kind == "message":
        return f"{agent} {event['text']}"
    if kind == "escalated":
        return f"{agent} escalated to a human operator: {event['text']}"
    return str(event.get("message", event))


# How to pass keys, said with an authentication error: where it is the key that is missing.
KEY_HOW = (
    "pass the key of the agent a command starts at with --api-key @FILE (or env:VAR, or"
    " $A2A_API_KEY), and the keys of the agents a conversation moves to with --keys-file"
    " FILE (`http://host:port=KEY` lines, or $A2A_API_KEYS)"
)


def refused(code: int, message: str) -> str:
    """An agent's error message; an authentication error says how to pass a key."""
    return f"{message}; {KEY_HOW}" if code == AuthenticationError.code else message


def printer(as_json: bool) -> Callable[[Event], None]:
    def emit(event: Event) -> None:
        print(json.dumps(event) if as_json else human(event), flush=True)

    return emit


def agent_url(text: str) -> str:
    """An agent's URL as given on the command line (comma-separated replicas allowed),
    checked: `http(s)://host[:port]/path`; a bare origin gets its `/`."""
    try:
        checked = check_agent_url(text, "")  # argparse names the option
    except AgentUrlError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return ",".join(one if urlsplit(one).path else one + "/" for one in checked.split(","))


Keys = dict[str, str | TokenSource]
"""Origin → the API key presented to it, or the OAuth2 client whose tokens are."""


def _client(keys: Keys) -> AgentClient:
    http = httpx.AsyncClient(timeout=httpx.Timeout(30.0, connect=2.0))
    return AgentClient(
        http,
        credentials=keys,
        retry=RetryPolicy(attempts=3, total_seconds=5.0),
        extensions=[HANDOFF_EXTENSION_URI],
        breaker_threshold=3,
    )


def _fail(message: str, code: int = ExitCode.USAGE) -> int:
    print(f"error: {message}", file=sys.stderr)
    return int(code)


def _serve(args: argparse.Namespace) -> int:
    """The gateway (orchestrator.serve): the CLI's keys go to the agents behind it."""
    from orchestrator.serve import serve

    try:
        keys = _keys(args, [args.entry])
    except (OSError, ValueError) as exc:
        return _fail(str(exc))
    return serve(args, lambda: _client(keys), list(keys))


async def _run(args: argparse.Namespace) -> int:
    if args.command == "console":
        return await _console(args)
    if args.command == "mcp":
        return await _mcp(args)
    path: Path = args.session
    emit = printer(args.json)
    try:
        # The operator commands use no conversation: its file is not even read.
        session = Session() if args.command in _OPERATOR else Session.load(path)
    except SessionDamaged as exc:  # recover: a new conversation, said in one line
        session = Session(entry=exc.entry)
        at = f" at {exc.entry}" if exc.entry else ""
        emit(
            {
                "event": "new_conversation",
                "agent": exc.entry or "",
                "message": f"the session file {path} is damaged ({exc}): a new conversation"
                f" starts{at}",
            }
        )
    if args.command == "new":
        return _new(session, path, args.entry, emit)
    if args.command in ("send", "chat"):
        if args.new:
            session = Session(entry=args.entry or session.entry)
        elif args.entry and session.entry and session.entry != args.entry:
            emit(
                {
                    "event": "new_conversation",
                    "agent": args.entry,
                    "message": f"a new conversation at {args.entry}: --entry is not this"
                    f" session's entry ({session.entry})",
                }
            )
            session = Session(entry=args.entry)
        elif args.entry:
            session.entry = args.entry
        if not session.entry:
            return _fail("no conversation yet: pass --entry URL")
    if args.command in ("watch", "cancel"):
        args.task = args.task or session.task_id
        args.agent = args.agent or (session.owner_url if args.task == session.task_id else None)
        if not args.task or not args.agent:
            return _fail(
                "no conversation yet: give TASK --agent URL"
                if not session.task_id
                else "--agent URL: the agent TASK is at"
            )
    start = getattr(args, "entry", None) or getattr(args, "agent", None) or session.entry
    try:
        keys = _keys(args, [start])
    except (OSError, ValueError) as exc:
        return _fail(str(exc))
    client = _client(keys)
    reach = Reach(client, [start or "", *keys])
    try:
        if args.command in _OPERATOR:
            return await _operate(client, args)
        if args.command == "trace":
            return await _trace(client, session, args, reach)
        if args.command == "cancel":
            code = await _cancel(client, session, args, emit)
            session.save(path)
            return code
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
        return int(await conversation.watch(args.agent, args.task))
    finally:
        await client.aclose()


async def _cancel(
    client: AgentClient, session: Session, args: argparse.Namespace, emit: Callable[[Event], None]
) -> int:
    """CancelTask TASK at its agent: exit 0 canceled, 1 refused (the agent says why: ended,
    or handed off already — where to), 3 unreachable."""
    name = session.owner_name if args.task == session.task_id and session.owner_name else ""
    name = name or args.agent
    try:
        canceled = await client.cancel(args.agent, args.task)
    except (UnavailableError, CircuitOpenError) as exc:
        return _fail(f"cannot reach {args.agent} ({describe(exc)})", ExitCode.UNREACHABLE)
    except RemoteError as exc:
        emit(
            {
                "event": "not_canceled",
                "agent": name,
                "taskId": args.task,
                "message": f"task {args.task} was not canceled: {refused(exc.code, exc.message)}",
            }
        )
        return int(ExitCode.FAILED)
    if args.task == session.task_id:
        session.state = canceled.status.state.value
    said = canceled.status.message.text if canceled.status.message is not None else ""
    emit({"event": "canceled", "agent": name, "taskId": canceled.id, "text": said})
    return int(ExitCode.COMPLETED)


def _new(session: Session, path: Path, entry: str | None, emit: Callable[[Event], None]) -> int:
    fresh = Session(entry=entry or session.entry)
    fresh.save(path)
    where = fresh.entry or "the agent a `send --entry URL` names"
    emit(
        {
            "event": "new_conversation",
            "agent": fresh.entry or "",
            "message": f"a new conversation: the next message starts it at {where}",
        }
    )
    return int(ExitCode.COMPLETED)


def _keys(args: argparse.Namespace, starts: Sequence[str | None]) -> Keys:
    """Origin → credential: `$A2A_API_KEYS`, --keys-file, --api-key for each of `starts`
    (`reach.credentials`), then each --credential."""
    if args.allow_insecure_files:
        accept_insecure_files()
    api_key = _api_key(args)
    keys: Keys = {}
    for start in starts:
        keys |= credentials(start, api_key, args.keys_file)
    keys |= named_credentials(args.credential)
    return keys


def _api_key(args: argparse.Namespace) -> str | None:
    """The operator's or user's key: from --api-key @FILE / env:VAR, else $A2A_API_KEY."""
    if args.api_key:
        return read_secret(args.api_key, "--api-key")
    return os.environ.get("A2A_API_KEY") or None


async def _console(args: argparse.Namespace) -> int:
    """The console (orchestrator.console): the operator's keys go to the agents named."""
    from orchestrator.console import serve

    try:
        keys = _keys(args, args.agent)
    except (OSError, ValueError) as exc:
        return _fail(str(exc))
    client = _client(keys)
    api_keys = {o: key for o, key in keys.items() if isinstance(key, str)}
    try:
        return await serve(client, args.agent, api_keys, args.host, args.port)
    finally:
        await client.aclose()


async def _mcp(args: argparse.Namespace) -> int:
    """The network as an MCP server over stdio (orchestrator.mcp_server)."""
    try:
        from orchestrator.mcp_server import NetworkServer
    except ImportError:
        return _fail(
            "the MCP server needs the mcp package: pip install '.[mcp]' in the a2a-handoff clone"
        )
    try:
        keys = _keys(args, [args.entry])
    except (OSError, ValueError) as exc:
        return _fail(str(exc))
    client = _client(keys)
    reach = Reach(client, [args.entry, *keys])
    server = NetworkServer(client, args.entry, reach, human, max_hops=args.max_hops, wait=args.wait)
    try:
        await server.serve_stdio()
    finally:
        await client.aclose()
    return 0


_OPERATOR = ("inbox", "approve", "deny", "reply")
_VERDICTS = {"approve": "approved", "deny": "denied", "reply": "answered"}


async def _operate(client: AgentClient, args: argparse.Namespace) -> int:
    """The operator commands: exit 0 done, 1 refused by the agent (or already decided),
    3 unreachable, 64 not a human agent."""
    try:
        if not await operator.is_human_agent(client, args.agent):
            return _fail(
                f"{args.agent} is not a human agent (its card offers no"
                " `escalations` capability): escalations wait at the human agent"
            )
        if args.command == "inbox":
            items = await operator.inbox(client, args.agent)
            for item in items:
                print(json.dumps(item) if args.json else operator.render(item), flush=True)
            if not items and not args.json:
                print("no escalation is waiting", flush=True)
            return 0
        verdict = _VERDICTS[args.command]
        if args.command == "reply" and args.verdict:
            verdict = args.verdict
        text = " ".join(args.text)
        task_id = await operator.resolve(client, args.agent, args.task)
        answered = await operator.answer(client, args.agent, task_id, verdict, text)
    except (UnavailableError, CircuitOpenError) as exc:
        return _fail(f"cannot reach {args.agent} ({describe(exc)})", ExitCode.UNREACHABLE)
    except operator.AlreadyDecided as exc:
        return _fail(str(exc), ExitCode.FAILED)
    except operator.AmbiguousId as exc:
        return _fail(str(exc))
    except RemoteError as exc:
        return _fail(refused(exc.code, exc.message), ExitCode.FAILED)
    event = {"event": "answered", "taskId": answered.task_id, "verdict": answered.verdict}
    line = f"answered {answered.task_id}: {answered.verdict}"
    if answered.not_operator:
        event["verdict"] = "noted"
        print(
            json.dumps(event)
            if args.json
            else (
                f"not decided: only {args.agent}'s operators decide escalations; your message was"
                f" kept on {answered.task_id} as a note"
            )
        )
        return int(ExitCode.FAILED)
    if answered.noted:
        event["verdict"] = "noted"
        line = (
            f"noted on {answered.task_id}: a reply to a permission is information; the"
            " escalation still waits for `approve` or `deny` (or `reply --approve`)"
        )
    print(json.dumps(event) if args.json else line)
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


ECHO_MAX = 200  # characters of a piped input line `chat` shows back


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
        if not as_json and not interactive:  # piped: the line is shown, a long one cut
            shown = (
                text if len(text) <= ECHO_MAX else f"{text[:ECHO_MAX]}… ({len(text)} characters)"
            )
            print(f"you> {shown}", flush=True)
        code = await traced(conversation, text, conversation.emit, as_json)
        session.save(path)


async def _trace(
    client: AgentClient, session: Session, args: argparse.Namespace, reach: Reach
) -> int:
    """The chain, in time order: the session's, or a context's walked across agents."""
    if args.context or args.agent:
        context = args.context or session.context_id
        agent = args.agent or session.entry
        if not context or not agent:
            return _fail("no conversation yet: give --context C --agent URL")
        try:
            hops: list[Hop] = await chain_of(client, agent, context, reach)
        except (UnavailableError, CircuitOpenError) as exc:
            return _fail(f"cannot reach {agent} ({describe(exc)})", ExitCode.UNREACHABLE)
        if not hops:
            return _fail(f"no task of conversation {context} at {agent}", ExitCode.FAILED)
    else:
        hops = list(session.chain)
        if not hops:
            return _fail("no conversation yet: `send --entry URL TEXT` starts one")
    hops.sort(key=lambda hop: hop.at)  # ISO 8601 UTC stamps: text order is time order
    for hop in hops:
        if args.json:
            print(json.dumps(hop.__dict__))
        else:
            state = hop.state.removeprefix("TASK_STATE_").lower()
            reason = f"  ({hop.reason})" if hop.reason else ""
            print(f"{hop.at:24} {hop.agent_name:10} {hop.task_id}  {state}{reason}")
    return 0


def _options(parser: argparse.ArgumentParser, top: bool) -> None:
    """The options every command takes, before or after its name (after it: they override)."""

    def default(value: object) -> object:
        return value if top else argparse.SUPPRESS

    parser.add_argument(
        "--session",
        type=Path,
        default=default(default_session_path()),
        help="the conversation file (default: ~/.local/state/a2a-handoff/session.json)",
    )
    parser.add_argument(
        "--json", action="store_true", default=default(False), help="one JSON object per event"
    )
    parser.add_argument(
        "--api-key",
        default=default(None),
        metavar="@FILE|env:VAR",
        help="where to read the key presented to the origin of --entry / --agent, and only"
        " there: a file or an environment variable, never the key itself (default:"
        " $A2A_API_KEY)",
    )
    parser.add_argument(
        "--keys-file",
        type=Path,
        default=default(None),
        help="keys for more origins: `http://host:port=KEY` lines (or $A2A_API_KEYS)",
    )
    parser.add_argument(
        "--credential",
        action="append",
        default=default([]),
        metavar="ORIGIN=oauth2:@FILE",
        help="the credential presented to ORIGIN (http://host:port), and only there:"
        " oauth2:@FILE for bearer tokens by the OAuth2 client-credentials grant (FILE: JSON"
        " token_url, client_id, client_secret, audience, scope), or an API key's @FILE or"
        " env:VAR",
    )
    parser.add_argument(
        "--allow-insecure-files",
        action="store_true",
        default=default(False),
        help="read files of secrets (--keys-file, @FILE) another user owns or can read, with"
        " a warning, instead of refusing ($A2A_ALLOW_INSECURE_FILES=1)",
    )
    parser.add_argument(
        "--max-hops", type=int, default=default(8), help="transfers per user message (8)"
    )
    parser.add_argument(
        "--wait",
        type=float,
        default=default(30.0),
        help="seconds to wait for an answer (exit 4), or for a busy task before a message"
        " goes to it (exit 6); default 30",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")


def _parser() -> argparse.ArgumentParser:
    parser = Parser(prog="python -m orchestrator", description=__doc__)
    _options(parser, top=True)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, what: str) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=what, description=what)
        _options(sub, top=False)
        return sub

    send = command("send", "send one message")
    send.add_argument("--entry", type=agent_url, help="the agent a new conversation starts at")
    send.add_argument("--new", action="store_true", help="start a new conversation")
    send.add_argument("text", nargs="+")
    chat = command("chat", "an interactive conversation")
    chat.add_argument("--entry", type=agent_url, help="the agent a new conversation starts at")
    chat.add_argument("--new", action="store_true", help="start a new conversation")
    new = command("new", "start a new conversation")
    new.add_argument("--entry", type=agent_url, help="the agent it starts at")
    watch = command("watch", "follow a task across transfers (default: the session's task)")
    watch.add_argument("task", nargs="?")
    watch.add_argument("--agent", type=agent_url, help="the agent TASK is at")
    cancel = command("cancel", "cancel a task (default: the session's task)")
    cancel.add_argument("task", nargs="?")
    cancel.add_argument("--agent", type=agent_url, help="the agent TASK is at")
    trace = command("trace", "the conversation's chain, in time order")
    trace.add_argument("--context", help="a conversation (default: the session's)")
    trace.add_argument("--agent", type=agent_url, help="where to start (default: the entry)")
    inbox = command("inbox", "escalations waiting at a human agent")
    inbox.add_argument("--agent", type=agent_url, required=True, help="the human agent's URL")
    for name, what in (
        ("approve", "approve an escalation"),
        ("deny", "deny an escalation"),
        ("reply", "answer an escalation (to a permission: a note; it still waits)"),
    ):
        sub = command(name, what)
        sub.add_argument("task")
        sub.add_argument("text", nargs="+" if name == "reply" else "*")
        sub.add_argument("--agent", type=agent_url, required=True, help="the human agent's URL")
        if name == "reply":
            given = sub.add_mutually_exclusive_group()
            given.add_argument(
                "--approve",
                dest="verdict",
                action="store_const",
                const="approved",
                help="the reply approves",
            )
            given.add_argument(
                "--deny",
                dest="verdict",
                action="store_const",
                const="denied",
                help="the reply denies",
            )
    serve = command("serve", "the gateway: an A2A agent that follows handoffs for its clients")
    serve_arguments(serve, agent_url)
    console = command("console", "a live web page of the agents' work (Ctrl-C stops it)")
    console.add_argument(
        "--agent",
        type=agent_url,
        action="append",
        required=True,
        help="an agent's URL (repeat it for each agent)",
    )
    console.add_argument("--port", type=int, default=8190, help="the page's port (8190)")
    console.add_argument("--host", default="127.0.0.1", help="the page's address (127.0.0.1)")
    mcp = command("mcp", "the agent network as an MCP server over stdio (for MCP hosts)")
    mcp.add_argument("--entry", type=agent_url, required=True, help="the entry agent's URL")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "serve":
        return _serve(args)
    return quiet_pipe(lambda: asyncio.run(_run(args)))


if __name__ == "__main__":
    sys.exit(main())
