"""Run the example agents.

python -m servers NAME --port P --store URL [--route NAME=URL …] [--trust NAME=URL …]
python -m servers all --base-port P --data-dir DIR   (triage, billing, logistics, human)
    [--log-dir DIR] [the options of every agent: --log-format, --auth-keys, limits, --llm…]

Every agent signs what it hands off (its keys beside its store: `keys list --store URL`) and
accepts handoffs only from its routes and the agents `--trust` / `--trust-file` name.
"""

from __future__ import annotations

import argparse
import asyncio
import errno
import gc
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import uvicorn

from a2a_handoff import (
    Agent,
    AgentCard,
    ApiKeyAuth,
    HandoffConfig,
    HandoffError,
    LimitsConfig,
    MemoryTaskStore,
    ObservabilityConfig,
    PushSettings,
    SqliteTaskStore,
    ToolsConfig,
    TrustConfig,
    __version__,
    create_app,
    open_store,
)
from a2a_handoff.contracts import Catalog
from a2a_handoff.errors import TrustError
from a2a_handoff.escalation import EscalationPolicy
from a2a_handoff.exits import ExitCode, Parser, quiet_pipe
from a2a_handoff.observe import logs
from a2a_handoff.protocol import check_agent_url
from a2a_handoff.secrets import HOW as SECRETS_HOW
from a2a_handoff.secrets import SecretError, accept_insecure_files, private_dir, read_secret
from a2a_handoff.server import ServerLimits, return_freed_memory
from a2a_handoff.stores import Store
from a2a_handoff.trust import ENV_VAR as KEY_ENV_VAR
from a2a_handoff.trust import (
    NO_KEYS_IN_SHARED_STORE,
    EnvIdentity,
    IdentityStore,
    KeyFile,
    TrustedAgent,
    load_or_create,
    load_trust_file,
    own_identity,
    parse_trust,
)
from servers import _all, _llm
from servers.billing import POLICY as BILLING_POLICY
from servers.billing import billing_card, make_billing
from servers.echo import EchoAgent, echo_card, echo_extended_card
from servers.human import HumanAgent, human_card
from servers.logistics import LogisticsAgent, logistics_card
from servers.triage import SCOPE as TRIAGE_SCOPE
from servers.triage import make_triage, triage_card


@dataclass(frozen=True)
class Example:
    make_agent: Callable[[argparse.Namespace], Agent]
    make_card: Callable[[str], AgentCard]
    scope: tuple[str, ...] | None = None
    routes: tuple[str, ...] = field(default=())  # route names `all` wires up
    policy: EscalationPolicy | None = None
    trusts: tuple[str, ...] = field(default=())  # agents `all` adds to its trust list
    make_extended: Callable[[str], AgentCard] | None = None  # for authenticated callers


def _human(args: argparse.Namespace) -> Agent:
    return HumanAgent(args.answer_within, args.fallback, check_every=args.check_every)


EXAMPLES: dict[str, Example] = {
    "echo": Example(lambda _: EchoAgent(), echo_card, make_extended=echo_extended_card),
    # triage: its contracts' recovery paths may escalate to the human, whose answer returns
    "triage": Example(make_triage, triage_card, TRIAGE_SCOPE, ("billing", "logistics", "human")),
    "billing": Example(make_billing, billing_card, None, ("human",), BILLING_POLICY, ("triage",)),
    "logistics": Example(lambda _: LogisticsAgent(), logistics_card, trusts=("triage",)),
    "human": Example(_human, human_card, trusts=("billing", "triage")),
}
ALL = ("triage", "billing", "logistics", "human")


def _pairs(values: Sequence[str], what: str) -> dict[str, str]:
    pairs = {}
    for value in values:
        name, sep, rest = value.partition("=")
        if not sep or not name or not rest:
            raise HandoffError(f"{what} must read NAME=VALUE, not {value!r}")
        pairs[name] = rest
    return pairs


def _listed(value: str) -> list[str]:
    """A comma-separated option as its entries."""
    return [entry.strip() for entry in value.split(",") if entry.strip()]


def _check_identity(
    identity: IdentityStore | None, store: Store, store_url: str, name: str
) -> None:
    """The agent's signing keys, checked (or made, for a new SQLite store) before it serves:
    TrustError when they cannot be used — a key file another user owns or can read, one gone
    missing beside a store used before, keys a Redis store cannot keep."""
    if isinstance(store, SqliteTaskStore) and identity is not None:
        # Keys given apart from a SQLite file that has keys of its own: the file is still
        # that agent's store (tasks, outbox), not one another agent may share.
        beside = store.key_file.read()
        if beside is not None:
            own_identity(beside, name, store.key_file)
    if identity is None and isinstance(store, SqliteTaskStore):
        identity = store.key_file
    shared = not isinstance(store, SqliteTaskStore | MemoryTaskStore)
    if shared:
        asyncio.run(_no_keys_left_in(store_url, name))
    if identity is None:
        if shared:
            raise TrustError(NO_KEYS_IN_SHARED_STORE)
        return  # the memory store keeps its keys in memory
    asyncio.run(load_or_create(identity, name))


async def _no_keys_left_in(store_url: str, name: str) -> None:
    """StoreError when the shared store (its schema or prefix) is another agent's; TrustError
    while it still holds the agent's private keys (an older version kept them there). A
    store of its own: this one lives on no event loop."""
    store = open_store(store_url)
    store.claim(name)
    await store.open()
    try:
        legacy = getattr(store, "refuse_legacy_identity", None)
        if legacy is not None:
            await legacy(name)
    finally:
        await store.aclose()


def _agent_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument(
        "--store",
        default=None,
        help="sqlite:///PATH (default sqlite:///data/NAME.db), postgresql://USER@HOST:PORT/DB or"
        " redis://HOST:PORT/DB (shared by replicas), or memory://",
    )
    parser.add_argument("--url", default=None, help="the URL the card advertises")
    parser.add_argument(
        "--card-v03",
        action="store_true",
        help="serve the A2A 0.3 card members at /.well-known/agent-card.json too, for 0.3"
        " clients that read only that path (the 1.0 card schema forbids them there)",
    )
    parser.add_argument(
        "--route", action="append", default=[], metavar="NAME=URL", help="a handoff target"
    )
    parser.add_argument(
        "--scope", default=None, help="capabilities this agent may delegate, comma-separated"
    )
    parser.add_argument(
        "--credential",
        action="append",
        default=[],
        metavar="NAME=@FILE|NAME=env:VAR",
        help="the API key presented to agent NAME (a route or a trusted agent), read from FILE"
        " or from $VAR: never on the command line",
    )
    trust = parser.add_argument_group("trust")
    trust.add_argument(
        "--trust",
        action="append",
        default=[],
        metavar="NAME=URL",
        help="accept handoffs from this agent too (routes are trusted already)",
    )
    trust.add_argument(
        "--trust-file", type=Path, default=None, help="more trusted agents (YAML: agents: …)"
    )
    trust.add_argument(
        "--key-file",
        type=Path,
        default=None,
        help=f"this agent's keys (default: beside its store; or ${KEY_ENV_VAR})",
    )
    trust.add_argument(
        "--operators",
        default=None,
        help="principals that see and answer this agent's escalations, comma-separated",
    )
    trust.add_argument(
        "--trust-max-age",
        type=float,
        default=60.0,
        help="seconds a trusted agent's fetched keys are used before fetching them again",
    )
    trust.add_argument("--keys-reload", type=float, default=2.0, help=argparse.SUPPRESS)
    trust.add_argument(
        "--allow-insecure-files",
        action="store_true",
        help="read files of secrets (--auth-keys, @FILE, pins) another user owns or can read,"
        " with a warning, instead of refusing to start ($A2A_ALLOW_INSECURE_FILES=1)",
    )
    trust.add_argument(
        "--allowed-hosts",
        default="",
        metavar="NAMES",
        help="host names this agent answers at besides its URL's (and any IP address),"
        " comma-separated; `*`: any. Other Host headers are refused (DNS rebinding)",
    )
    trust.add_argument(
        "--allowed-origins",
        default="",
        metavar="ORIGINS",
        help="web origins (scheme://host:port) whose pages may call this agent,"
        " comma-separated; by default a browser's cross-origin request is refused",
    )
    trust.add_argument(
        "--return-give-up",
        type=float,
        default=None,
        help="seconds a decision's return is retried before its task fails (default: --ttl)",
    )
    parser.add_argument("--ttl", type=int, default=300, help="handoff envelope TTL, seconds")
    parser.add_argument("--max-hops", type=int, default=8)
    parser.add_argument("--recovery-interval", type=float, default=2.0)
    auth = parser.add_mutually_exclusive_group()
    auth.add_argument("--auth-keys", metavar="FILE", help="require API keys: principal=key lines")
    auth.add_argument("--auth-env", action="store_true", help="require keys from $A2A_API_KEYS")
    parser.add_argument(
        "--payments",
        type=Path,
        default=None,
        help="billing: the payment provider's ledger, a file (default: in memory)",
    )
    parser.add_argument(
        "--escalate-over",
        type=float,
        default=None,
        help="escalate actions over this amount to route `human` (billing: 500)",
    )
    parser.add_argument(
        "--repeated-failures",
        type=int,
        default=None,
        help="escalate after this many failures of one kind in a conversation",
    )
    human = parser.add_argument_group("the human agent")
    human.add_argument(
        "--answer-within",
        type=float,
        default=None,
        help="seconds a blocking escalation may wait for an operator (default: forever)",
    )
    human.add_argument(
        "--fallback",
        default="deny",
        help="what an unanswered escalation gets: deny, or a route NAME to hand it to",
    )
    human.add_argument("--check-every", type=float, default=1.0, help=argparse.SUPPRESS)
    parser.add_argument(
        "--contracts", type=Path, default=None, help="enforce the handoff contracts of DIR"
    )
    limits = parser.add_argument_group("server limits (see docs/server.md)")
    defaults = ServerLimits()
    limits.add_argument("--max-connections", type=int, default=defaults.max_connections)
    limits.add_argument("--max-streams", type=int, default=1000, help="open SSE streams")
    limits.add_argument("--header-timeout", type=float, default=defaults.header_timeout)
    limits.add_argument("--body-timeout", type=float, default=defaults.body_timeout)
    limits.add_argument("--write-timeout", type=float, default=defaults.write_timeout)
    limits.add_argument("--keep-alive", type=float, default=5.0, help="idle keep-alive, s")
    push = parser.add_argument_group("push notifications (see docs/push.md)")
    push.add_argument(
        "--push-allow", action="append", default=[], metavar="HOSTS",
        help="webhook hosts, addresses or networks admitted beside public https URLs"
        " (comma-separated, repeatable; loopback only when listed: 127.0.0.1, localhost)",
    )  # fmt: skip
    push.add_argument("--no-push", action="store_true", help="turn push notifications off")
    push.add_argument(
        "--push-give-up", type=float, default=3600.0, metavar="SECONDS",
        help="how long a failing webhook is retried before its events are given up",
    )  # fmt: skip
    push.add_argument("--push-retry-max", type=float, default=60.0, help=argparse.SUPPRESS)
    push.add_argument(
        "--push-deadline",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="the most one webhook request may take, its answer included",
    )
    push.add_argument("--push-per-task", type=int, default=10, metavar="N", help="configs a task")
    push.add_argument(
        "--push-per-caller", type=int, default=100, metavar="N", help="active configs a caller"
    )
    push.add_argument(
        "--push-per-receiver",
        type=int,
        default=4,
        metavar="N",
        help="requests in flight to one receiver (scheme://host:port)",
    )
    _llm.add_arguments(parser)
    seen = parser.add_argument_group("observability (see docs/observability.md)")
    seen.add_argument(
        "--log-level", default="info", choices=["debug", "info", "warning", "error"],
        help="info: a line per task transition, handoff step, escalation (default);"
        " debug adds a line per HTTP request",
    )  # fmt: skip
    seen.add_argument("--log-format", default="text", choices=["text", "json"])
    parser.add_argument(
        "--mcp-server", action="store_true",
        help="also serve this agent as an MCP server at /mcp (needs a2a-handoff[mcp])",
    )  # fmt: skip
    tools = parser.add_argument_group("MCP tools a handler calls (see docs/tools.md)")
    tools.add_argument(
        "--mcp", action="append", default=[], metavar="NAME=URL",
        help="an MCP server (streamable HTTP) handlers may call as NAME (needs a2a-handoff[mcp])",
    )  # fmt: skip
    tools.add_argument(
        "--mcp-timeout", type=float, default=30.0, help="seconds an MCP tool call may take"
    )
    seen.add_argument(
        "--metrics-public", action="store_true", help="GET /metrics without a key under auth"
    )
    seen.add_argument(
        "--otlp-endpoint", metavar="URL", default=os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"),
        help="export traces over OTLP/HTTP (needs a2a-handoff[otel])",
    )  # fmt: skip


def push_settings(args: argparse.Namespace) -> PushSettings | None:
    """Push notifications as the flags say (on unless --no-push)."""
    if args.no_push:
        return None
    return PushSettings(
        allow=tuple(args.push_allow),
        give_up=args.push_give_up,
        retry_max=args.push_retry_max,
        deadline=args.push_deadline,
        per_task=args.push_per_task,
        per_caller=args.push_per_caller,
        per_receiver=args.push_per_receiver,
    )


def mcp_tools(args: argparse.Namespace) -> ToolsConfig:
    """The MCP servers `--mcp NAME=URL` names (HandoffError, a ValueError: one malformed).
    A URL holding a password is a secret: read from `@FILE` or `env:VAR`, never written on
    the command line (SecretError, a ValueError, otherwise)."""
    servers = {}
    for name, where in _pairs(args.mcp, "--mcp").items():
        if where.startswith(("@", "env:")):
            where = read_secret(where, f"--mcp {name}")
        elif urlsplit(where).password is not None:
            raise SecretError(f"--mcp {name}: the URL holds a password; {SECRETS_HOW}")
        servers[name] = where
    return ToolsConfig(mcp=servers, timeout=args.mcp_timeout)


def server_limits(args: argparse.Namespace) -> ServerLimits:
    return ServerLimits(
        header_timeout=args.header_timeout,
        body_timeout=args.body_timeout,
        write_timeout=args.write_timeout,
        max_connections=args.max_connections,
    ).fitted()


def serve(name: str, args: argparse.Namespace) -> int:
    example = EXAMPLES[name]
    url = args.url or f"http://{args.host}:{args.port}/"
    if not _port_free(args.host, args.port):  # a usage error, said before anything else
        taken = port_taken(args.host, [f"{args.port} ({name})"], "--port")
        print(f"error: {taken}", file=sys.stderr)
        return int(ExitCode.USAGE)
    if args.allow_insecure_files:
        accept_insecure_files()
    try:
        auth = None
        if args.auth_keys:
            auth = ApiKeyAuth.from_file(args.auth_keys)
        elif args.auth_env:
            auth = ApiKeyAuth.from_env()
        if args.url:
            check_agent_url(args.url, "--url", replicas=False)
        routes = {
            n: check_agent_url(u, f"--route {n}") for n, u in _pairs(args.route, "--route").items()
        }
        keys = _pairs(args.credential, "--credential")
        store_url = args.store or f"sqlite:///data/{name}.db"
        store = open_store(store_url)
        if isinstance(store, SqliteTaskStore):
            private_dir(Path(store.path).parent)  # data/ in a fresh clone: 0700
            store.check_free()  # another process serving the file: say so, do not start
        contracts = Catalog.load(args.contracts) if args.contracts else None
        trusted: list[TrustedAgent] = [parse_trust(t) for t in args.trust]
        if args.trust_file:
            trusted += load_trust_file(args.trust_file)
        identity: IdentityStore | None = None
        if args.key_file:
            identity = KeyFile(args.key_file)
        elif os.environ.get(KEY_ENV_VAR):
            identity = EnvIdentity(os.environ[KEY_ENV_VAR])
        _check_identity(
            identity, store, store_url, name
        )  # before anything listens: refused, or made
        # --credential NAME=KEY: the key presented to the agent NAME (a route, or an agent
        # on the trust list: the human agent returns decisions to those).
        known = {**{t.name: t.url for t in trusted}, **routes}
        unknown = sorted(set(keys) - set(known))
        if unknown:
            raise HandoffError(f"--credential names no route or trusted agent: {unknown}")
        credentials = {
            known[n]: read_secret(where, f"--credential {n}") for n, where in keys.items()
        }
    except (HandoffError, OSError, SecretError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return int(ExitCode.USAGE)
    scope = args.scope.split(",") if args.scope else example.scope
    policy = example.policy or EscalationPolicy()
    if args.escalate_over is not None:
        policy = replace(policy, amount_limit=args.escalate_over)
    if args.repeated_failures is not None:
        policy = replace(policy, repeated_failures=args.repeated_failures)
    try:
        app = create_app(
            example.make_agent(args),
            example.make_card(url),
            store,
            handoff=HandoffConfig(
                routes=routes,
                scope=scope,
                credentials=credentials,
                contracts=contracts,
                max_hops=args.max_hops,
                ttl_seconds=args.ttl,
                recovery_interval=args.recovery_interval,
                return_give_up=args.return_give_up,
            ),
            trust=TrustConfig(
                auth=auth,
                trusted=trusted,
                identity=identity,
                operators=args.operators.split(",") if args.operators else (),
                trusted_max_age=args.trust_max_age,
                keys_reload=args.keys_reload,
                allowed_hosts=_listed(args.allowed_hosts),
                allowed_origins=_listed(args.allowed_origins),
            ),
            limits=LimitsConfig(max_streams=args.max_streams),
            observability=ObservabilityConfig(metrics_public=args.metrics_public),
            tools=mcp_tools(args),
            escalation=policy,
            extended_card=example.make_extended(url) if example.make_extended else None,
            card_v03_fields=args.card_v03,
            mcp_server=args.mcp_server,
            push=push_settings(args),
        )
    except (ValueError, HandoffError) as exc:  # unsafe or impossible: say so, do not start
        print(f"error: {exc}", file=sys.stderr)
        return int(ExitCode.USAGE)
    if args.otlp_endpoint:
        from a2a_handoff.observe import otel

        otel.export_traces(name, args.otlp_endpoint)
    limits = server_limits(args)
    return_freed_memory()
    # Long-lived server: move start-up objects out of the collector's way, and collect the
    # young generation less often (request objects die young; cycles are rare).
    gc.collect()
    gc.freeze()
    gc.set_threshold(20_000, 20, 20)
    uvicorn.run(
        app,
        host=args.host,
        port=args.port,
        log_level=args.log_level,
        log_config=None,  # uvicorn's lines go through ours (configure_logging): one format
        access_log=args.log_level == "debug",  # debug: a line per HTTP request too
        proxy_headers=False,  # served directly: no X-Forwarded-* to trust
        http=limits.protocol(),  # timeouts, connection cap, slow readers dropped
        timeout_keep_alive=args.keep_alive,
        # A blocking SendMessage whose handoff target is down would hold shutdown for the
        # envelope's whole TTL: give in-flight requests a few seconds, then stop.
        timeout_graceful_shutdown=5,
    )
    return 0


def _port_free(host: str, port: int) -> bool:
    """Whether a server could listen on host:port now (as uvicorn binds: SO_REUSEADDR, so a
    port a stopped agent left in TIME_WAIT is free, one another process listens on is not).
    Only a port in use is not free: other bind errors are left to the server to report."""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            return exc.errno != errno.EADDRINUSE
    return True


def port_taken(host: str, ports: Sequence[str], option: str) -> str:
    """The usage error of a busy port, saying what to do."""
    return (
        f"port in use on {host}: {', '.join(ports)}; stop what listens there, or pick"
        f" another {option}"
    )


def _serving(url: str) -> bool:
    try:
        return httpx.get(url + "health", timeout=1.0).status_code in (200, 401, 503)
    except httpx.HTTPError:
        return False


def _store_of(name: str, data_dir: Path, store: str | None) -> list[str]:
    """The --store (and --key-file) of example agent `name` under `servers all --store URL`:
    a SQLite file each by default; on a shared store, a schema (PostgreSQL) or key prefix
    (Redis) each, and a key file each in `data_dir` (made on first use: a shared store keeps
    no keys)."""
    if store is None or store.startswith("sqlite:"):
        return ["--store", f"sqlite:///{data_dir / name}.db"]
    if store.startswith("memory:"):
        return ["--store", store]
    option = f"schema={name}" if store.startswith("postgres") else f"prefix={name}:"
    url = f"{store}{'&' if '?' in store else '?'}{option}"
    key_file = KeyFile(data_dir / f"{name}.keys.json", create=True)
    asyncio.run(load_or_create(key_file, name))
    return ["--store", url, "--key-file", str(key_file.path)]


def run_all(
    base_port: int,
    data_dir: Path,
    host: str = "127.0.0.1",
    contracts: Path | None = None,
    start_within: float = 60.0,
    passed: Sequence[str] = (),
    keys: dict[str, str] | None = None,
    log_dir: Path | None = None,
    store: str | None = None,
) -> int:
    """Every example agent on consecutive ports, wired together; each URL printed once that
    agent serves. `passed`: options for every agent; `keys`: under API-key auth, the key
    each agent presents to the others; `log_dir`: each agent's output to NAME.log there;
    `store`: a URL every agent shares (each in a schema or key prefix of its own) instead of
    a SQLite file each. Ctrl-C stops them."""
    ports = {name: base_port + i for i, name in enumerate(ALL)}
    taken = [f"{port} ({name})" for name, port in ports.items() if not _port_free(host, port)]
    if taken:
        print(f"error: {port_taken(host, taken, '--base-port')}", file=sys.stderr)
        return int(ExitCode.USAGE)
    private_dir(data_dir)
    if log_dir is not None:
        private_dir(log_dir)
    urls = {name: f"http://{host}:{port}/" for name, port in ports.items()}
    procs: dict[str, subprocess.Popen[bytes]] = {}
    keys = keys or {}
    try:
        for name in ALL:
            peers = [*EXAMPLES[name].routes, *EXAMPLES[name].trusts]
            routes = [f"--route={r}={urls[r]}" for r in EXAMPLES[name].routes]
            trusts = [f"--trust={t}={urls[t]}" for t in EXAMPLES[name].trusts]
            env = dict(os.environ)
            credentials = []
            if name in keys:  # its own principal's key, to every agent it calls
                env[_all.KEY_VAR] = keys[name]
                credentials = [f"--credential={p}=env:{_all.KEY_VAR}" for p in peers]
            own = [f"--payments={data_dir / 'payments.jsonl'}"] if name == "billing" else []
            cmd = [
                sys.executable, "-m", "servers", name, "--host", host,
                "--port", str(ports[name]), *_store_of(name, data_dir, store),
                *routes, *trusts, *(["--contracts", str(contracts)] if contracts else []),
                *credentials, *own, *passed,
            ]  # fmt: skip
            if log_dir is None:
                procs[name] = subprocess.Popen(cmd, env=env)
            else:
                fd = os.open(log_dir / f"{name}.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
                with open(fd, "ab") as log:
                    procs[name] = subprocess.Popen(cmd, env=env, stdout=log, stderr=log)
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        waiting = list(ALL)
        deadline = time.monotonic() + start_within
        while waiting:
            for name in list(waiting):
                if procs[name].poll() is not None:
                    print(f"error: {name} did not start (exit {procs[name].returncode})",
                          file=sys.stderr)  # fmt: skip
                    return int(ExitCode.FAILED)
                if _serving(urls[name]):
                    print(f"{name:10} {urls[name]}", flush=True)
                    waiting.remove(name)
            if waiting and time.monotonic() > deadline:
                print(f"error: not serving after {start_within:g} s: {', '.join(waiting)}",
                      file=sys.stderr)  # fmt: skip
                return int(ExitCode.FAILED)
            time.sleep(0.1)
        print("all serving; Ctrl-C stops them", flush=True)
        while all(p.poll() is None for p in procs.values()):
            time.sleep(0.5)
        stopped = [name for name, p in procs.items() if p.poll() is not None]
        print(f"error: {', '.join(stopped)} stopped; stopping the others", file=sys.stderr)
        return int(ExitCode.FAILED)
    except KeyboardInterrupt:
        return int(ExitCode.INTERRUPTED)
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.terminate()
        for proc in procs.values():
            proc.wait(10)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "all" in argv[:1]:
        parser = Parser(prog="python -m servers all", description="every example agent, wired")
        parser.add_argument("all")
        parser.add_argument("--base-port", type=int, default=8101)
        parser.add_argument("--data-dir", type=Path, default=Path("data"))
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--contracts", type=Path, default=None)
        parser.add_argument(
            "--log-dir", type=Path, default=None,
            help="each agent's log to NAME.log there (default: this terminal)",
        )  # fmt: skip
        parser.add_argument(
            "--store",
            default=None,
            help="one postgresql://… or redis://… URL for every agent (a schema or key prefix"
            " each, key files in --data-dir); default: a SQLite file each in --data-dir",
        )
        parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
        actions = _all.add_agent_options(parser, _agent_parser)
        args = parser.parse_args(argv)
        callers = [n for n in ALL if EXAMPLES[n].routes or n == "human"]  # it returns
        try:
            keys = _all.agent_keys(args, callers)
        except HandoffError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return int(ExitCode.USAGE)
        passed = _all.passed_on(args, actions)
        return run_all(args.base_port, args.data_dir, args.host, args.contracts,
                       passed=passed, keys=keys, log_dir=args.log_dir,
                       store=args.store)  # fmt: skip
    parser = Parser(prog="python -m servers", description=__doc__)
    parser.add_argument("agent", choices=[*sorted(EXAMPLES), "all"])
    _agent_parser(parser)
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    args = parser.parse_args(argv)
    logs.configure(args.log_level, args.log_format)
    return serve(args.agent, args)


if __name__ == "__main__":
    sys.exit(quiet_pipe(main))
