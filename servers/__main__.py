"""Run the example agents.

python -m servers NAME --port P --store URL [--route NAME=URL …] [--trust NAME=URL …]
python -m servers all --base-port P --data-dir DIR   (triage, billing, logistics, human)
    [--log-dir DIR] [the options of every agent: --log-format, --auth-keys, limits, --llm,
    --drain-seconds, --retain, --tls-…]

Every agent signs what it hands off (its keys beside its store: `keys list --store URL`) and
accepts handoffs only from its routes and the agents `--trust` / `--trust-file` name.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import ssl
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import httpx

from a2a_handoff import Agent, HandoffError, __version__
from a2a_handoff.exits import ExitCode, Parser, quiet_pipe
from a2a_handoff.observe import logs
from a2a_handoff.secrets import private_dir
from a2a_handoff.server import DrainConfig, TlsConfig, client_context
from a2a_handoff.trust import KeyFile, load_or_create
from servers import _all, _run
from servers._flags import agent_options, mcp_tools
from servers._run import Example, port_free, port_taken
from servers.billing import POLICY as BILLING_POLICY
from servers.billing import billing_card, make_billing
from servers.echo import EchoAgent, echo_card, echo_extended_card
from servers.human import HumanAgent, human_card
from servers.logistics import LogisticsAgent, logistics_card
from servers.triage import SCOPE as TRIAGE_SCOPE
from servers.triage import make_triage, triage_card

__all__ = ["EXAMPLES", "Example", "main", "mcp_tools", "port_taken", "serve"]


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
ALL_HELP = """every example agent, wired

The options for every agent are passed on to each as written (--retain 30d reaches each
as 30d). TLS: the agents share --host, so one certificate naming it serves them all;
mutual TLS (--tls-client-ca) needs --auth-keys or --auth-env, each agent presenting its
own principal's key (the one certificate names them all alike). Stopped, `all` gives
each agent --drain-seconds, 5 s for its streams and --close-seconds before it kills it
(SIGTERM: it passes the signal on; Ctrl-C in its terminal reaches the agents itself)."""


def prog_name() -> str:
    """The command as it was run: the console script's name (`a2a-agent`), or `python -m
    servers` when run as a module."""
    name = Path(sys.argv[0]).name if sys.argv and sys.argv[0] else ""
    return "python -m servers" if name in ("", "__main__.py", "-c") else name


def serve(name: str, args: argparse.Namespace) -> int:
    """Serve example agent `name` as its flags say."""
    return _run.serve(name, EXAMPLES[name], args)


def _serving(http: httpx.Client, url: str) -> bool:
    """Whether the agent at `url` answers; HandoffError when it serves a certificate that its
    peers would not accept either (it will not start to: say so now)."""
    try:
        return http.get(url + "health", timeout=1.0).status_code in (200, 401, 503)
    except httpx.HTTPError as exc:
        cause: BaseException | None = exc
        while cause is not None and not isinstance(cause, ssl.SSLCertVerificationError):
            cause = cause.__cause__ or cause.__context__
        if cause is not None:
            raise HandoffError(
                f"its certificate is not one its peers accept at {url}: {cause.verify_message}"
                " (check --tls-ca, and that the certificate names --host)"
            ) from None
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
    tls: TlsConfig | None = None,
    stop_within: float = 30.0,
) -> int:
    """Every example agent on consecutive ports, wired together; each URL printed once that
    agent serves. `passed`: options for every agent; `keys`: under API-key auth, the key
    each agent presents to the others; `log_dir`: each agent's output to NAME.log there;
    `store`: a URL every agent shares (each in a schema or key prefix of its own) instead of
    a SQLite file each; `tls`: what `passed` makes them serve (https:// URLs, asked as the
    agents ask each other). Ctrl-C stops them, each given `stop_within` seconds to drain
    and close before it is killed."""
    ports = {name: base_port + i for i, name in enumerate(ALL)}
    taken = [f"{port} ({name})" for name, port in ports.items() if not port_free(host, port)]
    if taken:
        print(f"error: {port_taken(host, taken, '--base-port')}", file=sys.stderr)
        return int(ExitCode.USAGE)
    private_dir(data_dir)
    if log_dir is not None:
        private_dir(log_dir)
    try:  # the agents' own context, as they call each other: a broken CA said before they start
        verify: ssl.SSLContext | bool = client_context(tls) if tls is not None else True
    except HandoffError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return int(ExitCode.USAGE)
    scheme = "https" if tls is not None and tls.serves else "http"
    urls = {name: f"{scheme}://{host}:{port}/" for name, port in ports.items()}
    procs: dict[str, subprocess.Popen[bytes]] = {}
    keys = keys or {}
    signalled = False  # by the terminal's Ctrl-C, as `all` was
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
                sys.executable,
                "-m",
                "servers",
                name,
                "--host",
                host,
                "--port",
                str(ports[name]),
                *_store_of(name, data_dir, store),
                *routes,
                *trusts,
                *(["--contracts", str(contracts)] if contracts else []),
                *credentials,
                *own,
                *passed,
            ]
            if log_dir is None:
                procs[name] = subprocess.Popen(cmd, env=env)
            else:
                fd = os.open(log_dir / f"{name}.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
                with open(fd, "ab") as log:
                    procs[name] = subprocess.Popen(cmd, env=env, stdout=log, stderr=log)
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        code = _until_serving(procs, urls, verify, start_within)
        if code is not None:
            return code
        print("all serving; Ctrl-C stops them", flush=True)
        while all(p.poll() is None for p in procs.values()):
            time.sleep(0.5)
        stopped = [name for name, p in procs.items() if p.poll() is not None]
        print(f"error: {', '.join(stopped)} stopped; stopping the others", file=sys.stderr)
        return int(ExitCode.FAILED)
    except KeyboardInterrupt:
        signalled = _ctrl_c_reached_agents()
        return int(ExitCode.INTERRUPTED)
    finally:
        _stop(procs, stop_within, signalled)


def _ctrl_c_reached_agents() -> bool:
    """Whether a Ctrl-C came from the terminal `all` runs in the foreground of: the terminal
    sent it to the whole foreground process group, the agents (started in it) included."""
    for fd in (0, 1, 2):
        try:
            return os.tcgetpgrp(fd) == os.getpgrp()
        except OSError:  # not a terminal
            continue
    return False


def _stop(procs: dict[str, subprocess.Popen[bytes]], within: float, signalled: bool) -> None:
    """Each agent stopped by one signal — SIGTERM, unless the terminal's Ctrl-C reached it
    already (a second signal would cut its drain short) — and given `within` seconds to drain
    and close; one still running then is killed."""
    if not signalled:
        for proc in procs.values():
            if proc.poll() is None:
                proc.terminate()  # it drains, then closes
    deadline = time.monotonic() + within
    for proc in procs.values():
        try:
            proc.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _until_serving(
    procs: dict[str, subprocess.Popen[bytes]],
    urls: dict[str, str],
    verify: ssl.SSLContext | bool,
    start_within: float,
) -> int | None:
    """Each agent's URL printed once it serves; None once they all do, else the exit code
    (said on stderr) of the one that did not start."""
    waiting = list(ALL)
    deadline = time.monotonic() + start_within
    with httpx.Client(verify=verify) as http:
        while waiting:
            for name in list(waiting):
                if procs[name].poll() is not None:
                    print(
                        f"error: {name} did not start (exit {procs[name].returncode})",
                        file=sys.stderr,
                    )
                    return int(ExitCode.FAILED)
                try:
                    serving = _serving(http, urls[name])
                except HandoffError as exc:
                    print(f"error: {name}: {exc}", file=sys.stderr)
                    return int(ExitCode.USAGE)
                if serving:
                    print(f"{name:10} {urls[name]}", flush=True)
                    waiting.remove(name)
            if waiting and time.monotonic() > deadline:
                print(
                    f"error: not serving after {start_within:g} s: {', '.join(waiting)}",
                    file=sys.stderr,
                )
                return int(ExitCode.FAILED)
            time.sleep(0.1)
    return None


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    prog = prog_name()
    if "all" in argv[:1]:
        parser = Parser(prog=f"{prog} all", description=ALL_HELP)
        parser.add_argument("all")
        parser.add_argument("--base-port", type=int, default=8101)
        parser.add_argument("--data-dir", type=Path, default=Path("data"))
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--contracts", type=Path, default=None)
        parser.add_argument(
            "--log-dir",
            type=Path,
            default=None,
            help="each agent's log to NAME.log there (default: this terminal)",
        )
        parser.add_argument(
            "--store",
            default=None,
            help="one postgresql://… or redis://… URL for every agent (a schema or key prefix"
            " each, key files in --data-dir); default: a SQLite file each in --data-dir",
        )
        parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
        actions = _all.add_agent_options(parser, agent_options)
        args = parser.parse_args(argv)
        callers = [n for n in ALL if EXAMPLES[n].routes or n == "human"]  # it returns
        try:
            keys = _all.agent_keys(args, callers)
            tls = _all.served_tls(args)
            drain = DrainConfig(seconds=float(args.drain_seconds), close=float(args.close_seconds))
        except HandoffError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return int(ExitCode.USAGE)
        passed = _all.passed_on(args, actions)
        # Stopped, each agent drains, gives its streams their grace, then closes: wait as long
        # (and a little more) before killing one.
        stopping = drain.seconds + _run.STREAMS_GRACE + drain.close
        return run_all(
            args.base_port,
            args.data_dir,
            args.host,
            args.contracts,
            passed=passed,
            keys=keys,
            log_dir=args.log_dir,
            store=args.store,
            tls=tls,
            stop_within=stopping + 5,
        )
    parser = Parser(prog=prog, description=__doc__)
    parser.add_argument("agent", choices=[*sorted(EXAMPLES), "all"])
    agent_options(parser)
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    args = parser.parse_args(argv)
    logs.configure(args.log_level, args.log_format)
    return serve(args.agent, args)


if __name__ == "__main__":
    sys.exit(quiet_pipe(main))
