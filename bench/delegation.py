"""Delegation round trip beside a handoff's, on the same two agents (run by hand).

    .venv/bin/python bench/delegation.py            # N=300 requests of each, alternating
    N=20 .venv/bin/python bench/delegation.py       # a quick look

Starts two agents on durable SQLite (fresh files in a temp directory, 127.0.0.1 only): a
worker that completes every task at once with an artifact, and an asker routed to it that,
per message, either hands the task off to the worker (`handoff …`: the reply is the asker's
task closed TRANSFERRED) or delegates to it and completes with the answer (`delegate …`: the
reply is the asker's task COMPLETED with the worker's data). One client sends blocking
`SendMessage`s one at a time, alternating the two kinds (so drift hits both alike), after a
warm-up; prints p50 and p99 of each and their ratio. A reply that is not what its kind must
give is counted as an error. Bounded: N requests of each, each with a 30 s timeout.

A delegation costs more round trips than a handoff: the checkpoint, the create at the
worker, following the sub-task until it ends (a subscribe, a read), and recording the answer
— against the handoff's checkpoint, create and terminate.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import httpx
import uvicorn

from a2a_handoff import (
    Completed,
    Handoff,
    HandoffConfig,
    Outcome,
    TaskContext,
    TrustConfig,
    build_card,
    create_app,
    open_store,
)

HEADERS = {"A2A-Version": "1.0"}


class Asker:
    async def handle(self, ctx: TaskContext) -> Outcome | None:
        if ctx.text.startswith("handoff"):
            return Handoff("worker", "bench", {"summary": ctx.text})
        result = await ctx.delegation.ask("worker", ctx.text)
        return Completed(f"worker said: {result.text}") if result.ok else None


class Worker:
    async def handle(self, ctx: TaskContext) -> Outcome | None:
        await ctx.artifact(data={"done": ctx.text}, name="result")
        return Completed("done")


def serve(role: str, port: int, store: str, other: str) -> None:
    url = f"http://127.0.0.1:{port}/"
    if role == "asker":
        app = create_app(
            Asker(),
            build_card("asker", url),
            open_store(store),
            handoff=HandoffConfig(routes={"worker": other}),
        )
    else:
        app = create_app(
            Worker(),
            build_card("worker", url),
            open_store(store),
            trust=TrustConfig(trusted=[f"asker={other}"]),
        )
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_up(client: httpx.Client, url: str) -> None:
    for _ in range(300):
        try:
            if client.get(url + "health").status_code in (200, 503):
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise SystemExit(f"the agent at {url} did not start")


def send(client: httpx.Client, url: str, text: str) -> tuple[float, bool]:
    message = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": text}]}
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}
    start = time.perf_counter()
    reply = client.post(url, json=body, headers=HEADERS, timeout=30).json()
    elapsed = (time.perf_counter() - start) * 1000
    task = reply.get("result", {}).get("task", {})
    state = task.get("status", {}).get("state")
    said = " ".join(
        p.get("text", "") for p in task.get("status", {}).get("message", {}).get("parts", [])
    )
    if text.startswith("handoff"):  # a plain client sees TRANSFERRED as COMPLETED, pointed
        good = state == "TASK_STATE_COMPLETED" and "worker" in said
    else:
        good = state == "TASK_STATE_COMPLETED" and said == "worker said: done"
    return elapsed, good


def main() -> int:
    if len(sys.argv) == 6 and sys.argv[1] == "serve":
        serve(sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5])
        return 0
    n, warmup = int(os.environ.get("N", "300")), int(os.environ.get("WARMUP", "20"))
    asker_port, worker_port = free_port(), free_port()
    asker, worker = f"http://127.0.0.1:{asker_port}/", f"http://127.0.0.1:{worker_port}/"
    procs: list[subprocess.Popen[bytes]] = []
    with tempfile.TemporaryDirectory(prefix="a2a-delegation-bench.") as tmp, httpx.Client() as c:
        try:
            for role, port, other in (
                ("worker", worker_port, asker),
                ("asker", asker_port, worker),
            ):
                store = f"sqlite:///{Path(tmp) / role}.db"
                cmd = [sys.executable, __file__, "serve", role, str(port), store, other]
                procs.append(subprocess.Popen(cmd, stderr=open(Path(tmp) / f"{role}.log", "wb")))  # noqa: SIM115
            wait_up(c, worker)
            wait_up(c, asker)
            for i in range(warmup):
                send(c, asker, f"handoff warm {i}")
                send(c, asker, f"delegate warm {i}")
            times: dict[str, list[float]] = {"handoff": [], "delegate": []}
            errors = {"handoff": 0, "delegate": 0}
            for i in range(n):
                for kind in ("handoff", "delegate") if i % 2 else ("delegate", "handoff"):
                    elapsed, good = send(c, asker, f"{kind} {i}")
                    times[kind].append(elapsed)
                    errors[kind] += not good
        finally:
            for proc in procs:
                proc.terminate()
                proc.wait(10)
    for kind, label in (("handoff", "handoff  "), ("delegate", "delegation")):
        ms = sorted(times[kind])
        p99 = ms[min(len(ms) - 1, int(len(ms) * 0.99))]
        print(
            f"{label} n={len(ms)}  p50={statistics.median(ms):.2f} ms  p99={p99:.2f} ms"
            f"  errors={errors[kind]}"
        )
    ratio = statistics.median(times["delegate"]) / statistics.median(times["handoff"])
    print(f"delegation p50 / handoff p50 = {ratio:.2f}")
    return 1 if any(errors.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
