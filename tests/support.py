"""Test helpers: free ports, and real agent processes started with `python -m servers`."""

from __future__ import annotations

import hashlib
import json
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
A2A_HEADERS = {"A2A-Version": "1.0", "Content-Type": "application/json"}


_CLIENT: httpx.Client | None = None


def _http() -> httpx.Client:
    """One shared client: building one per call costs an SSL context load each time."""
    global _CLIENT
    if _CLIENT is None:
        _CLIENT = httpx.Client(timeout=30)
    return _CLIENT


def _port_slice() -> range:
    """This test worker's own ports, below the kernel's ephemeral range.

    A port the kernel handed out as free (bind to port 0) is handed out again to the next
    caller, another worker's agent or any outgoing connection, between the probe and the
    bind of the server it was meant for. Ports below the ephemeral range are never given
    to outgoing connections, and each xdist worker takes its own slice of them.
    """
    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    first = 10000 if low > 12000 else 1024
    workers = max(1, int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")))
    worker = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw") or 0)
    size = (low - first) // workers
    return range(first + worker % workers * size, first + (worker % workers + 1) * size)


_PORTS = _port_slice()
_next_port = random.randrange(len(_PORTS))


def free_port() -> int:
    """A port of this worker's slice that nothing holds now."""
    return free_ports(1)


def free_ports(count: int) -> int:
    """The first of `count` consecutive ports of this worker's slice that nothing holds now.

    The slice is walked in order, so a port handed out is not handed out again until the
    walk comes round: an agent told its port but not yet bound keeps it.
    """
    global _next_port
    for _ in range(len(_PORTS)):
        base = _PORTS.start + _next_port % (len(_PORTS) - count + 1)
        _next_port += count
        if all(_bindable(port) for port in range(base, base + count)):
            return base
    raise RuntimeError(f"no {count} free consecutive ports in {_PORTS}")


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


@dataclass
class AgentProcess:
    """One `python -m servers NAME` process on 127.0.0.1; restartable, killable."""

    name: str
    store: str
    port: int = field(default_factory=free_port)
    extra: Sequence[str] = ()
    env: dict[str, str] = field(default_factory=dict)
    proc: subprocess.Popen[bytes] | None = None
    log_path: Path | None = None
    module: str = "servers"  # run as `python -m MODULE NAME …`
    # Without a log_path, the output goes to a temporary file (removed once the agent is
    # stopped or killed): an agent that does not start says why.
    _temp_log: Path | None = field(default=None, init=False, repr=False)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    def start(self, timeout: float = 20.0, wait: bool = True) -> AgentProcess:
        cmd = [
            sys.executable,
            "-m",
            self.module,
            self.name,
            "--port",
            str(self.port),
            "--store",
            self.store,
            *self.extra,
        ]
        drains = self.module == "servers" or self.name == "serve"  # ours: they take the flag
        if drains and not any(a.startswith("--drain-seconds") for a in self.extra):
            # Stopped (SIGTERM) at once, as before drains: the suite stops agents hundreds of
            # times. tests/integration/test_drain.py and test_rolling_restart.py drain them.
            cmd.append("--drain-seconds=0")
        shared = self.store.startswith(("redis", "postgres"))
        if shared and not any("--key-file" in a for a in self.extra):
            cmd.append(f"--key-file={shared_key_file(self.name, self.store)}")
        # PYTHONFAULTHANDLER: an agent sent SIGABRT (a test's stuck agent) logs every thread's stack
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONFAULTHANDLER": "1", **self.env}
        self._drop_temp_log()
        if self.log_path is None:
            fd, temp = tempfile.mkstemp(prefix=f"a2a-test-{self.name}-", suffix=".log")
            os.close(fd)
            self._temp_log = Path(temp)
        with open(self._log(), "ab") as log:
            self.proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=log)
        if wait:
            self.wait_ready(timeout)
        return self

    def wait_ready(self, timeout: float = 20.0) -> None:
        """Until the agent serves; an agent that exits, or does not serve within `timeout`
        (then killed), raises with the end of its log."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(
                    f"{self.name} exited with {self.proc.returncode}{self._log_tail()}"
                )
            try:
                if _http().get(self.url + "health", timeout=1.0).status_code in (200, 503):
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.05)
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)  # not left running behind the failed test
            self.proc.wait(10)
        raise TimeoutError(f"{self.name} did not start on port {self.port}{self._log_tail()}")

    def _log(self) -> Path:
        log = self.log_path or self._temp_log
        assert log is not None
        return log

    def _log_tail(self, lines: int = 40) -> str:
        """The end of the agent's log, to say why it did not start."""
        log = self.log_path or self._temp_log
        if log is None or not log.exists():
            return ""
        tail = log.read_text(errors="replace").splitlines()[-lines:]
        return "; its log ends:\n" + "\n".join(tail)

    def _drop_temp_log(self) -> None:
        if self._temp_log is not None:
            self._temp_log.unlink(missing_ok=True)
            self._temp_log = None

    def kill(self) -> None:
        """SIGKILL: no cleanup, like a crash."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)
        self._drop_temp_log()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()
        self._drop_temp_log()

    def restart(self) -> AgentProcess:
        self.kill()
        return self.start()

    def rpc(self, method: str, params: dict[str, object], **headers: str) -> dict[str, object]:
        """One JSON-RPC call; returns the decoded response object."""
        body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
        response = _http().post(self.url, json=body, headers={**A2A_HEADERS, **headers})
        data: dict[str, object] = response.json()
        return data


@dataclass
class Cli:
    session: Path

    def run(self, *args: str, stdin: str | None = None, timeout: float = 60) -> tuple[int, str]:
        cmd = [sys.executable, "-m", "orchestrator", "--session", str(self.session), *args]
        done = subprocess.run(
            cmd, cwd=ROOT, input=stdin, capture_output=True, text=True, timeout=timeout
        )
        return done.returncode, done.stdout + done.stderr

    def events(self, *args: str) -> tuple[int, list[dict[str, Any]]]:
        code, out = self.run("--json", *args)
        lines = [line for line in out.splitlines() if line.startswith("{")]
        return code, [json.loads(line) for line in lines]

    def start(self, *args: str) -> subprocess.Popen[str]:
        """The CLI in the background, printing JSON events; `finish()` collects it."""
        cmd = [sys.executable, "-m", "orchestrator", "--session", str(self.session), "--json"]
        return subprocess.Popen(
            [*cmd, *args], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )

    @staticmethod
    def finish(
        proc: subprocess.Popen[str], timeout: float = 60
    ) -> tuple[int, list[dict[str, Any]]]:
        out, _ = proc.communicate(timeout=timeout)
        lines = [line for line in out.splitlines() if line.startswith("{")]
        return proc.returncode, [json.loads(line) for line in lines]


def wire_trust(processes: Sequence[AgentProcess]) -> None:
    """Each agent that another routes to trusts that one (`--trust NAME=URL`), as an
    operator configures them: a target accepts handoffs only from agents it trusts."""
    by_url = {p.url: p for p in processes}
    for source in processes:
        for arg in source.extra:
            if not arg.startswith("--route="):
                continue
            for url in arg.split("=", 2)[2].split(","):
                target = by_url.get(url.strip())
                trust = f"--trust={source.name}={source.url}"
                if target is None or target is source or target.module != "servers":
                    continue  # test doubles take no --trust
                if trust not in target.extra:
                    target.extra = (*target.extra, trust)


def key_env(value: str) -> str:
    """`env:NAME` for a secret option (`--api-key`, `--credential NAME=…`): the commands take
    where to read a secret, never the secret itself; the tests' processes inherit NAME."""
    name = "A2A_TEST_SECRET_" + hashlib.sha256(value.encode()).hexdigest()[:12].upper()
    os.environ[name] = value
    return f"env:{name}"


def shared_key_file(agent: str, store: str) -> Path:
    """The key file of agent `agent` on shared store `store` — one per agent, used by all its
    replicas, as an operator deploys them (a shared store keeps no keys): made on first use
    (`keys init`'s work), mode 0600 in a directory of this user's."""
    from a2a_handoff.trust.keys import Identity, KeyFile

    home = Path(tempfile.gettempdir()) / f"a2a-handoff-test-keys-{os.geteuid()}"
    home.mkdir(mode=0o700, exist_ok=True)
    path = home / (hashlib.sha256(f"{agent}@{store}".encode()).hexdigest()[:16] + ".json")
    keys = KeyFile(path, create=True)
    if keys.read() is None:
        keys.write_if(Identity.generate(agent).to_document(), None)
    return path
