"""An agent served as its flags say: the store opened, the keys checked (or made), the
config objects of `create_app` built from the flags, and uvicorn run with the project's
`ServerLimits`. One implementation for the example agents (`python -m servers NAME`) and
for any agent object (`python -m a2a_handoff serve MODULE:OBJECT`)."""

from __future__ import annotations

import argparse
import asyncio
import errno
import gc
import os
import socket
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from a2a_handoff import (
    Agent,
    AgentCard,
    ApiKeyAuth,
    GrpcConfig,
    HandoffConfig,
    HandoffError,
    LimitsConfig,
    ObservabilityConfig,
    TrustConfig,
    create_app,
    open_store,
)
from a2a_handoff.client import read_credential
from a2a_handoff.contracts import Catalog
from a2a_handoff.errors import ConfigError, InvalidParamsError, TrustError
from a2a_handoff.escalation import EscalationPolicy
from a2a_handoff.exits import ExitCode
from a2a_handoff.protocol import check_agent_url, named_tenant
from a2a_handoff.secrets import SecretError, accept_insecure_files, private_dir
from a2a_handoff.server import OidcConfig, return_freed_memory, tenant_of, uvicorn_options
from a2a_handoff.server import run as run_server
from a2a_handoff.stores import Store, check_usable
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
from servers._flags import (
    drain_config,
    listed,
    mcp_tools,
    pairs,
    push_settings,
    retention_config,
    server_limits,
    tls_config,
)

STREAMS_GRACE = 5
"""Seconds the requests still in flight after the drain (streams) get before they are cut."""


@dataclass(frozen=True)
class Example:
    """What `serve` runs: the agent (made from the flags once they are checked: a ValueError
    is a usage error), its card for the URL it is served at, the capabilities it may
    delegate, its escalation policy, and the card authenticated callers see."""

    make_agent: Callable[[argparse.Namespace], Agent]
    make_card: Callable[[str], AgentCard]
    scope: tuple[str, ...] | None = None
    routes: tuple[str, ...] = field(default=())  # route names `all` wires up
    policy: EscalationPolicy | None = None
    trusts: tuple[str, ...] = field(default=())  # agents `all` adds to its trust list
    make_extended: Callable[[str], AgentCard] | None = None  # for authenticated callers


def _check_identity(
    identity: IdentityStore | None, store: Store, store_url: str, name: str
) -> None:
    """The agent's signing keys, checked (or made, for a new SQLite store) before it serves:
    TrustError when they cannot be used — a key file another user owns or can read, one gone
    missing beside a store used before, keys a shared store cannot keep."""
    kept = store.capabilities.identity  # where the store keeps keys: None for a shared one
    if isinstance(kept, KeyFile) and identity is not None:
        # Keys given apart from a SQLite file that has keys of its own: the file is still
        # that agent's store (tasks, outbox), not one another agent may share.
        beside = kept.read()
        if beside is not None:
            own_identity(beside, name, kept)
    if identity is None and isinstance(kept, KeyFile):
        identity = kept
    if kept is None:
        asyncio.run(_no_keys_left_in(store_url, name))
    if identity is None:
        if kept is None:
            raise TrustError(NO_KEYS_IN_SHARED_STORE)
        return  # the memory store keeps its keys in memory
    asyncio.run(load_or_create(identity, name))


def _check_version(store: Store, name: str) -> None:
    """StoreVersionError when the store's schema is behind this code (naming the command that
    upgrades it) or ahead of it and not compatible; a store that does not exist yet is made
    at this code's version when the agent opens it."""
    schema = store.capabilities.schema
    if schema is None:
        return
    store.claim(name)  # its default schema or key prefix
    status = asyncio.run(schema.schema_status())
    if status.exists:
        check_usable(status, schema.store_url)


async def _no_keys_left_in(store_url: str, name: str) -> None:
    """StoreError when the shared store (its schema or prefix) is another agent's; TrustError
    while it still holds the agent's private keys (an older version kept them there). A
    store of its own: this one lives on no event loop."""
    store = open_store(store_url)
    store.claim(name)
    await store.open()
    try:
        legacy = store.capabilities.legacy_keys
        if legacy is not None:
            await legacy.refuse_legacy_identity(name)
    finally:
        await store.aclose()


def tenanted(card: AgentCard, tenant: str | None) -> AgentCard:
    """`card` naming `tenant` on every interface (--tenant), or as it is."""
    return named_tenant(card, tenant) if tenant else card


def serve(name: str, example: Example, args: argparse.Namespace) -> int:
    """Serve `example` as agent `name` until stopped: its exit code (64: a usage error,
    said in one line on stderr before anything listens)."""
    try:
        tls = tls_config(args)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return int(ExitCode.USAGE)
    scheme = "https" if tls is not None and tls.serves else "http"
    url = args.url or f"{scheme}://{args.host}:{args.port}/"
    if not port_free(args.host, args.port):  # a usage error, said before anything else
        taken = port_taken(args.host, [f"{args.port} ({name})"], "--port")
        print(f"error: {taken}", file=sys.stderr)
        return int(ExitCode.USAGE)
    grpc_port = getattr(args, "grpc_port", None)
    if grpc_port is not None and not port_free(args.host, grpc_port):
        taken = port_taken(args.host, [f"{grpc_port} ({name}, gRPC)"], "--grpc-port")
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
        oidc = None
        if args.oidc_issuer:
            oidc = OidcConfig(args.oidc_issuer, args.oidc_audience, retry=args.oidc_retry)
        elif args.oidc_audience:
            raise HandoffError("--oidc-audience needs --oidc-issuer")
        if args.url:
            check_agent_url(args.url, "--url", replicas=False)
        if args.tenant is not None:
            try:
                tenant_of({"tenant": args.tenant})
            except InvalidParamsError as exc:
                raise HandoffError(f"--tenant: {exc.message}") from None
        routes = {
            n: check_agent_url(u, f"--route {n}") for n, u in pairs(args.route, "--route").items()
        }
        keys = pairs(args.credential, "--credential")
        store_url = args.store or f"sqlite:///data/{name}.db"
        store = open_store(store_url)
        file = store.capabilities.file
        if file is not None:
            private_dir(file.path.parent)  # data/ in a fresh clone: 0700
            file.check_free()  # another process serving the file: say so, do not start
        _check_version(store, name)  # behind this code: refused, naming `db upgrade`
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
        # on the trust list: the human agent returns decisions to those), or the OAuth2
        # client whose tokens are (oauth2:@FILE).
        known = {**{t.name: t.url for t in trusted}, **routes}
        unknown = sorted(set(keys) - set(known))
        if unknown:
            raise HandoffError(f"--credential names no route or trusted agent: {unknown}")
        credentials = {
            known[n]: read_credential(where, f"--credential {n}") for n, where in keys.items()
        }
        # The key and certificates loaded now: one others can read, or a broken file, is
        # said before anything listens.
        served_tls = uvicorn_options(tls) if tls is not None and tls.serves else {}
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
            tenanted(example.make_card(url), args.tenant),
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
                oidc=oidc,
                trusted=trusted,
                identity=identity,
                operators=args.operators.split(",") if args.operators else (),
                trusted_max_age=args.trust_max_age,
                keys_reload=args.keys_reload,
                allowed_hosts=listed(args.allowed_hosts),
                allowed_origins=listed(args.allowed_origins),
            ),
            limits=LimitsConfig(max_streams=args.max_streams),
            observability=ObservabilityConfig(metrics_public=args.metrics_public),
            tools=mcp_tools(args),
            escalation=policy,
            extended_card=(
                tenanted(example.make_extended(url), args.tenant) if example.make_extended else None
            ),
            card_v03_fields=args.card_v03,
            mcp_server=args.mcp_server,
            push=push_settings(args),
            grpc=_grpc_config(args),
            tls=tls,
            drain=drain_config(args),
            retention=retention_config(args),
        )
    except (ValueError, HandoffError) as exc:  # unsafe or impossible: say so, do not start
        print(f"error: {exc}", file=sys.stderr)
        return int(ExitCode.USAGE)
    if args.otlp_endpoint:
        from a2a_handoff.observe import otel

        try:
            otel.export_traces(name, args.otlp_endpoint)
        except RuntimeError as exc:  # the SDK missing: say what installs it
            print(f"error: --otlp-endpoint: {exc}", file=sys.stderr)
            return int(ExitCode.USAGE)
    limits = server_limits(args)
    return_freed_memory()
    # Long-lived server: move start-up objects out of the collector's way, and collect the
    # young generation less often (request objects die young; cycles are rare).
    gc.collect()
    gc.freeze()
    gc.set_threshold(20_000, 20, 20)
    run_server(  # uvicorn, draining the agent on SIGTERM (docs/server.md)
        app,
        host=args.host,
        port=args.port,
        log_level=args.log_level,
        log_config=None,  # uvicorn's lines go through ours (configure_logging): one format
        access_log=args.log_level == "debug",  # debug: a line per HTTP request too
        proxy_headers=False,  # served directly: no X-Forwarded-* to trust
        http=limits.protocol(),  # timeouts, connection cap, slow readers dropped
        timeout_keep_alive=args.keep_alive,
        # After the drain, what is still in flight is streams (and a blocking SendMessage
        # whose handoff target is down, which would hold shutdown for the envelope's whole
        # TTL): a few seconds, then stop; a cut stream resumes elsewhere (Last-Event-ID).
        timeout_graceful_shutdown=STREAMS_GRACE,
        **served_tls,  # HTTPS, and mutual TLS with a client CA
    )
    return 0


def _grpc_config(args: argparse.Namespace) -> GrpcConfig | None:
    """The gRPC face as the flags say (None without --grpc-port); over TLS as the --tls-*
    flags say (`create_app(tls=…)`)."""
    port = getattr(args, "grpc_port", None)
    return None if port is None else GrpcConfig(port=port, host=args.host)


def port_free(host: str, port: int) -> bool:
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
