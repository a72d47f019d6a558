"""Round trips to PostgreSQL per echo request and per handoff, statement by statement.

    .venv/bin/python bench/pg_round_trips.py            # N=200 echo requests, N=100 handoffs
    N=50 .venv/bin/python bench/pg_round_trips.py

Starts a private PostgreSQL (initdb on a free 127.0.0.1 port, removed at the end) with
pg_stat_statements, one database per agent; runs the echo agent, then triage and billing, as
`python -m servers …` on it; after a warm-up resets the statistics, drives N sequential
requests (each refund ends with the triage task TRANSFERRED), and prints the statements each
agent ran, as calls per request (asyncpg caches prepared statements: one call is one round
trip). The agents' background work (the recovery sweep every 2 s, lease renewals) runs in the
same window and shows as fractions. Counts, not times: repeatable on a busy machine.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.postgres_support import USER, PostgresServer, psql  # noqa: E402
from tests.support import free_port  # noqa: E402

N = int(os.environ.get("N", "200"))
WARM = 20
EXT = "urn:a2a-handoff:ext:handoff:v1"


def send(http: httpx.Client, url: str, text: str) -> dict:
    message = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": text}]}
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}
    return http.post(url, json=body, headers={"A2A-Version": "1.0"}).json()["result"]["task"]


def wait_up(url: str, proc: subprocess.Popen[bytes]) -> None:
    for _ in range(300):
        if proc.poll() is not None:
            raise SystemExit(f"the agent for {url} exited with {proc.returncode}")
        try:
            if httpx.get(url + "health", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise SystemExit(f"{url} did not start")


def report(server: PostgresServer, database: str, count: int, what: str) -> None:
    rows = psql(
        "SELECT s.calls, regexp_replace(left(s.query, 90), '\\s+', ' ', 'g')"
        " FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid"
        f" WHERE d.datname = '{database}' AND s.query NOT LIKE '%pg_stat_statements%'"
        " ORDER BY s.calls DESC",
        server.port,
        "echo",  # the extension lives there; it sees every database
    )
    total = 0
    lines = []
    for row in rows.splitlines():
        calls, query = row.split("|", 1)
        total += int(calls)
        lines.append(f"  {int(calls) / count:6.2f}  {query}")
    print(f"{database}: {total / count:.2f} statements per {what} (N={count})")
    print("\n".join(lines))


def main() -> None:
    server = (
        PostgresServer(
            options=(
                "-c",
                "shared_preload_libraries=pg_stat_statements",
                "-c",
                "pg_stat_statements.track=top",
            )
        )
        .init()
        .start()
    )
    procs: list[subprocess.Popen[bytes]] = []
    tmp = Path(tempfile.mkdtemp(prefix="a2a-pg-rt-"))
    try:
        for name in ("echo", "triage", "billing"):
            psql(f"CREATE DATABASE {name}", server.port)
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "a2a_handoff",
                    "keys",
                    "init",
                    "--agent",
                    name,
                    "--key-file",
                    str(tmp / f"{name}.keys.json"),
                ],
                cwd=ROOT,
                check=True,
                capture_output=True,
            )
        psql("CREATE EXTENSION pg_stat_statements", server.port, "echo")
        ports = {name: free_port() for name in ("echo", "triage", "billing")}
        url = {name: f"http://127.0.0.1:{port}/" for name, port in ports.items()}

        def start(name: str, *extra: str) -> None:
            store = f"postgresql://{USER}@127.0.0.1:{server.port}/{name}"
            proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "servers",
                    name,
                    "--port",
                    str(ports[name]),
                    "--store",
                    store,
                    "--key-file",
                    str(tmp / f"{name}.keys.json"),
                    "--log-level",
                    "warning",
                    *extra,
                ],
                cwd=ROOT,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            procs.append(proc)
            wait_up(url[name], proc)

        start("echo")
        start("billing", "--trust", f"triage={url['triage']}")
        start("triage", "--route", f"billing={url['billing']}")
        with httpx.Client(timeout=60) as http:
            for _ in range(WARM):
                send(http, url["echo"], "hello")
            psql("SELECT pg_stat_statements_reset()", server.port, "echo")
            for _ in range(N):
                assert send(http, url["echo"], "hello")["status"]["state"] == "TASK_STATE_COMPLETED"
            report(server, "echo", N, "echo request")
            count = max(1, N // 2)
            text = "I was charged twice for order 12345, I want a refund"
            for _ in range(WARM):
                send(http, url["triage"], text)
            psql("SELECT pg_stat_statements_reset()", server.port, "echo")
            for _ in range(count):
                task = send(http, url["triage"], text)
                assert (task.get("metadata") or {}).get(EXT, {}).get("state") == "TRANSFERRED"
            for name in ("triage", "billing"):
                report(server, name, count, "handoff")
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
        server.remove()


if __name__ == "__main__":
    main()
