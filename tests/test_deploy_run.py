"""deploy/compose.yaml run on this host without Docker: each service's own command, through
the image's entrypoint (deploy/entrypoint.sh), with the secrets deploy/make_secrets.py made
mounted as compose mounts them (0644 files in their own directory), on a real PostgreSQL —
only the names mapped to this machine: each service on 127.0.0.1 and a port of its own, the
database the tests' own. A refund asked of the gateway with the client's key comes back
refunded by a billing replica, and the operator's key opens the human agent's inbox: the
files' keys, credentials, trust and store URLs work together."""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from a2a_handoff.server._card_route import CARD_PATH
from tests import deploy_support as d
from tests.postgres_support import PostgresDatabase
from tests.support import ROOT, free_ports

# The order compose starts them in (depends_on), billing twice (deploy.replicas: 2).
SERVING = ("human", "billing", "billing", "triage", "gateway")


class Host:
    """The compose services as processes of this machine."""

    def __init__(self, tmp: Path, made: Path, database: str) -> None:
        self.tmp = tmp
        self.made = made
        self.database = database
        base = free_ports(len(SERVING))
        self.ports = {f"{name}-{i}": base + i for i, name in enumerate(SERVING)}
        self.replicas = {n: [p for k, p in self.ports.items() if k.startswith(n)] for n in SERVING}
        self.procs: list[subprocess.Popen[bytes]] = []

    def origin(self, name: str, replica: int = 0) -> str:
        return f"http://127.0.0.1:{self.replicas[name][replica]}"

    def mapped(self, text: str, instance: str) -> str:
        """A word of a command (or a line of a secret) with compose's names made local."""
        port = self.ports.get(instance)
        if port is not None:
            text = text.replace("--port=8000", f"--port={port}")
            text = re.sub(r"--url=http://[\w.]+:\d+/", f"--url=http://127.0.0.1:{port}/", text)
        if text.startswith("--route=billing="):  # compose's name answers from either replica
            both = ",".join(f"{self.origin('billing', i)}/" for i in range(2))
            text = text.replace("http://billing:8000/", both)
        for name in ("triage", "billing", "human"):
            text = text.replace(f"http://{name}:8000", self.origin(name))
        text = text.replace("--host=0.0.0.0", "--host=127.0.0.1")
        text = text.replace("postgresql://a2a@postgres:5432/a2a?", f"{self.database}?")
        text = text.replace(d.SECRETS, str(self.tmp / "run" / instance))
        return text.replace("/var/lib/a2a", str(self.tmp / "gateway-data"))

    def mount(self, secrets: list[str], instance: str) -> Path:
        """The service's secrets as compose mounts them: the host's files, as they are."""
        mounted = self.tmp / "mounted" / instance
        mounted.mkdir(parents=True)
        for name in secrets:
            text = (self.made / name).read_text()
            if name == "gateway.keys":  # billing's origin: both replicas on this host
                billing = next(line for line in text.splitlines() if "billing" in line)
                text += billing.replace("http://billing:8000", self.origin("billing", 1)) + "\n"
            lines = [self.mapped(line, instance) for line in text.splitlines()]
            (mounted / name).write_text("\n".join(lines) + "\n")
            (mounted / name).chmod(0o644)
        return mounted

    def run(self, service: dict[str, object], instance: str) -> subprocess.Popen[bytes]:
        argv = [self.mapped(word, instance) for word in service["command"]]  # type: ignore[attr-defined]
        mounted = self.mount(list(service.get("secrets", [])), instance)  # type: ignore[call-overload]
        with (self.tmp / f"{instance}.log").open("wb") as log:  # the child keeps it
            proc = subprocess.Popen(
                ["sh", str(ROOT / "deploy" / "entrypoint.sh"), sys.executable, *argv[1:]],
                cwd=self.tmp,
                env={
                    **os.environ,
                    "PYTHONPATH": str(ROOT),
                    "XDG_STATE_HOME": str(self.tmp / "state"),
                    "A2A_SECRETS_FROM": str(mounted),
                    "A2A_SECRETS_TO": str(self.tmp / "run" / instance),
                },
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        self.procs.append(proc)
        return proc

    def wait_serving(self, instance: str, proc: subprocess.Popen[bytes]) -> None:
        url = f"http://127.0.0.1:{self.ports[instance]}{CARD_PATH}"
        deadline = time.monotonic() + 90  # started together, on a machine that may be busy
        while time.monotonic() < deadline:
            assert proc.poll() is None, f"{instance} exited:\n{self.log(instance)[-3000:]}"
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(url, timeout=1).status_code == 200:
                    return
            time.sleep(0.1)
        raise AssertionError(f"{instance} does not serve:\n{self.log(instance)[-3000:]}")

    def log(self, instance: str) -> str:
        return (self.tmp / f"{instance}.log").read_text(errors="replace")

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.terminate()  # the entrypoint exec'd: the agent itself gets it
        for proc in self.procs:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)


@pytest.fixture
def host(tmp_path: Path) -> Iterator[Host]:
    made = tmp_path / "secrets"
    done = subprocess.run(
        [sys.executable, str(ROOT / "deploy" / "make_secrets.py"), str(made)],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    (tmp_path / "gateway-data").mkdir(mode=0o700)
    database = PostgresDatabase().create()
    one = Host(tmp_path, made, database.url())
    try:
        yield one
    finally:
        one.stop()
        database.drop()


@pytest.mark.timeout(240)  # six processes of the package started, on a busy machine too
def test_the_compose_services_serve_a_refund_through_the_gateway(host: Host) -> None:
    services = d.load_compose()["services"]
    for name, service in services.items():
        if name.startswith("migrate-"):
            migration = host.run(service, name)
            assert migration.wait(60) == 0, host.log(name)
    started = {}
    for i, name in enumerate(SERVING):  # together: the gateway, which reads triage's card, last
        instance = f"{name}-{i}"
        if name == "gateway":
            for earlier, proc in started.items():
                host.wait_serving(earlier, proc)
        started[instance] = host.run(services[name], instance)
    host.wait_serving(instance, started[instance])
    shown = {
        argv[3]: argv
        for argv in d.shell_commands()
        if argv[:3] == ["python", "-m", "orchestrator"] and argv[3] in ("send", "inbox")
    }
    local = {
        "http://127.0.0.1:8200/": f"{host.origin('gateway')}/",
        "http://127.0.0.1:8104/": f"{host.origin('human')}/",
        "@deploy/secrets/": f"@{host.made}/",
    }
    env = {**os.environ, "PYTHONPATH": str(ROOT), "XDG_STATE_HOME": str(host.tmp / "state")}
    running = {}
    for command, argv in shown.items():  # the client's and the operator's, side by side
        words = [sys.executable, *argv[1:]]
        for compose_name, here in local.items():
            words = [w.replace(compose_name, here) for w in words]
        running[command] = subprocess.Popen(
            words, cwd=host.tmp, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
        )
    answers = {
        command: proc.communicate(timeout=60)[0].decode() for command, proc in running.items()
    }
    assert running["send"].returncode == 0, answers["send"]
    assert "Refund of $49.99 issued for order 12345" in answers["send"]
    assert running["inbox"].returncode == 0, answers["inbox"]
    for instance in host.ports:  # every secret read from the entrypoint's private copies
        copies = host.tmp / "run" / instance
        assert all(p.stat().st_mode & 0o777 == 0o600 for p in copies.iterdir() if p.is_file())
        said = host.log(instance)
        assert "INSECURE" not in said, said  # no file of secrets another user could read
        assert "password file" not in said, said  # asyncpg took the passfile
