"""`python -m orchestrator serve --entry URL --port P`: the gateway (see orchestrator.gateway).

An A2A 1.0 agent (JSON-RPC, HTTP+JSON, SSE; A2A 0.3 clients too) on the project's own server
(`create_app`): its tasks, streams, ListTasks, cancel and history are the library's; its store
is its own (SQLite by default); its conversations are kept beside it. Its clients
authenticate with `--auth-keys` (each sees only its own tasks and conversations); the agents
behind it are called with the CLI's per-origin keys (`--api-key` for the entry's origin,
`--keys-file` / `$A2A_API_KEYS` for more), and a pointer is followed only where the CLI would
follow it (the trust rules of `orchestrator.reach`).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from collections.abc import Callable, Collection
from pathlib import Path

from a2a_handoff import AgentCard, AgentClient, build_card
from a2a_handoff.errors import HandoffError
from a2a_handoff.exits import ExitCode
from a2a_handoff.observe import logs
from a2a_handoff.protocol import AgentSkill
from a2a_handoff.secrets import SecretError
from orchestrator.gateway import MAX_WAITS, Conversations, GatewayAgent
from orchestrator.reach import Reach
from servers._flags import drain_config, drain_options, push_options, push_settings

log = logging.getLogger("orchestrator.gateway")


def add_arguments(serve: argparse.ArgumentParser, url: Callable[[str], str]) -> None:
    """The `serve` command's own options (`url` checks an agent URL)."""
    serve.add_argument(
        "--entry", type=url, required=True, help="the agent every conversation starts at"
    )
    serve.add_argument("--port", type=int, required=True)
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--url", default=None, help="the URL the gateway's card advertises")
    serve.add_argument(
        "--store",
        default="sqlite:///data/gateway.db",
        help="the gateway's own store (sqlite:///PATH by default data/gateway.db)",
    )
    serve.add_argument(
        "--conversations",
        type=Path,
        default=None,
        help="where conversations are kept (default: beside the SQLite store)",
    )
    serve.add_argument(
        "--auth-keys", metavar="FILE", help="require API keys from clients: principal=key lines"
    )
    serve.add_argument(
        "--max-waits",
        type=int,
        default=MAX_WAITS,
        metavar="N",
        help="escalations one client may wait on at once (default %(default)s); beyond it, the"
        " client's task pauses INPUT_REQUIRED saying so",
    )
    serve.add_argument(
        "--allowed-hosts",
        default="",
        metavar="NAMES",
        help="host names the gateway answers at besides its URL's (and any IP address),"
        " comma-separated; other Host headers are refused (DNS rebinding)",
    )
    serve.add_argument(
        "--allowed-origins",
        default="",
        metavar="ORIGINS",
        help="web origins (scheme://host:port) whose pages may call the gateway, comma-separated",
    )
    serve.add_argument("--log-level", default="info")
    drain_options(serve)
    push_options(serve.add_argument_group("push notifications (see docs/push.md)"))


def _listed(value: str) -> list[str]:
    return [entry.strip() for entry in value.split(",") if entry.strip()]


def _card(url: str, entry: str, fronted: AgentCard | None) -> AgentCard:
    name = fronted.name if fronted is not None else entry
    skills = list(fronted.skills) if fronted is not None else []
    skills.append(
        AgentSkill(
            id="conversation",
            name=f"a conversation with {name}",
            description=f"Starts at {name} ({entry}) and follows every handoff to the agent"
            " that owns the conversation now: its progress, questions and results arrive in"
            " your one task; answer a question on that task.",
            tags=["gateway", "handoff"],
        )
    )
    return build_card(
        "gateway",
        url,
        description=f"A2A gateway in front of {name} ({entry}): one task per request, carried"
        " across the agents it is handed to.",
        skills=skills,
    )


async def _read_card(make_client: Callable[[], AgentClient], entry: str) -> AgentCard | None:
    """The entry agent's card, to say what the gateway fronts (None: not reachable now)."""
    client = make_client()
    try:
        return await asyncio.wait_for(client.card(entry, retry=False), 5.0)
    except (HandoffError, TimeoutError, ValueError) as exc:
        log.warning("the entry agent's card could not be read (%s): the card names its URL", exc)
        return None
    finally:
        await client.aclose()


def serve(
    args: argparse.Namespace, make_client: Callable[[], AgentClient], keys: Collection[str]
) -> int:
    """Run the gateway until stopped."""
    # The server is loaded here, not with the module: the CLI's other commands take the
    # gateway's flags from this module, and start faster without it.
    from a2a_handoff import ApiKeyAuth, TrustConfig, create_app, open_store
    from a2a_handoff.server import ServerLimits
    from a2a_handoff.server import run as run_server

    logs.configure(args.log_level, "text")
    url = args.url or f"http://{args.host}:{args.port}/"
    try:
        auth = ApiKeyAuth.from_file(args.auth_keys) if args.auth_keys else None
        store = open_store(args.store)
        directory = args.conversations
        if directory is None:
            file = store.capabilities.file
            base = file.path if file is not None else Path("data/x")
            directory = base.parent / f"{base.stem}-conversations"
        conversations = Conversations(directory, args.entry)
        if args.max_waits < 1:
            raise ValueError(f"--max-waits must be at least 1, not {args.max_waits}")
        push = push_settings(args)
        drain = drain_config(args)
    except (HandoffError, OSError, SecretError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return int(ExitCode.USAGE)
    if auth is None:
        log.warning(
            "INSECURE: the gateway takes clients without API keys: every caller is one client"
            " and may read every conversation's tasks; give it --auth-keys FILE"
        )
    fronted = asyncio.run(_read_card(make_client, args.entry))
    client = make_client()  # used in the server's event loop only
    agent = GatewayAgent(
        client,
        conversations,
        Reach(client, [args.entry, *keys]),
        max_hops=args.max_hops,
        wait=args.wait,
        max_waits=args.max_waits,
    )
    app = create_app(
        agent,
        _card(url, args.entry, fronted),
        store,
        trust=TrustConfig(
            auth=auth,
            allowed_hosts=_listed(args.allowed_hosts),
            allowed_origins=_listed(args.allowed_origins),
        ),
        card_v03_fields=True,  # stock 0.3 clients read only the 1.0 path
        push=push,  # the client's task's events: every status and artifact relayed into it
        drain=drain,
    )
    run_server(  # uvicorn, draining the gateway on SIGTERM (docs/server.md)
        app,
        host=args.host,
        port=args.port,
        log_level=args.log_level,
        log_config=None,
        proxy_headers=False,
        http=ServerLimits().fitted().protocol(),
        timeout_graceful_shutdown=5,
    )
    return 0
