"""Store outages under load heal by themselves: Redis killed, Redis paused, then restored.

While Redis cannot be reached, requests fail fast with a clear JSON-RPC error and /health
says `degraded`; once it is back, every task a client was told exists ends (completed, or
failed with the reason) within a bound, and nothing acknowledged is lost.
"""

from __future__ import annotations

import signal
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.integration.handoff_support import message
from tests.redis_support import RedisServer
from tests.support import AgentProcess

FAST = ("--recovery-interval", "0.3")  # heartbeat 0.15 s, runner leases lapse after 1 s
BOUND = 8.0  # seconds after Redis is back by which no acknowledged task may be left running
TERMINAL = {"TASK_STATE_COMPLETED", "TASK_STATE_FAILED"}


@pytest.fixture
def outage(tmp_path: Path) -> Iterator[tuple[RedisServer, list[AgentProcess]]]:
    """A Redis of the test's own (it gets killed) and two echo replicas on it."""
    redis = RedisServer(tmp_path / "redis").start()
    store = redis.store_url()
    agents = [AgentProcess("echo", store, extra=FAST) for _ in range(2)]
    for i, agent in enumerate(agents):
        agent.log_path = tmp_path / f"echo-{i}.log"
        agent.start()
    try:
        yield redis, agents
    finally:
        for agent in agents:
            agent.stop()
        if redis.proc is not None and redis.proc.poll() is None:
            redis.proc.send_signal(signal.SIGCONT)
        redis.stop()


class Load:
    """Clients sending work to both replicas until stopped: what was acknowledged, and the
    answers they got."""

    def __init__(self, agents: list[AgentProcess]) -> None:
        self.agents = agents
        self.acknowledged: dict[str, AgentProcess] = {}  # task id → the replica that said so
        self.errors: list[dict[str, Any]] = []
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self._client, args=(i,)) for i in range(4)]

    def __enter__(self) -> Load:
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(30)

    def _client(self, n: int) -> None:
        agent = self.agents[n % len(self.agents)]
        with httpx.Client(timeout=10) as http:
            for i in range(2000):  # bounded; stopped by the test long before
                if self.stop.is_set():
                    return
                text = "sleep:0.5" if i % 2 else f"hello {n}.{i}"
                body = {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "SendMessage",
                    "params": message(text, returnImmediately=True),
                }
                try:
                    reply = http.post(agent.url, json=body, headers={"A2A-Version": "1.0"})
                    answer = reply.json()
                except (httpx.TransportError, ValueError):
                    time.sleep(0.05)
                    continue
                with self.lock:
                    if "result" in answer:
                        self.acknowledged[answer["result"]["task"]["id"]] = agent
                    else:
                        self.errors.append(answer["error"] | {"http": reply.status_code})
                time.sleep(0.02)

    def unsettled(self) -> list[str]:
        with self.lock:
            tasks = dict(self.acknowledged)
        left = []
        for task_id, agent in tasks.items():
            reply = agent.rpc("GetTask", {"id": task_id})
            assert "result" in reply, f"acknowledged task {task_id} lost: {reply}"
            if reply["result"]["status"]["state"] not in TERMINAL:
                left.append(task_id)
        return left


def fails_fast(agent: AgentProcess) -> dict[str, Any]:
    """While the store is down: a request is answered with a clear error, quickly."""
    start = time.monotonic()
    reply = httpx.post(
        agent.url,
        json={"jsonrpc": "2.0", "id": 7, "method": "SendMessage", "params": message("hi")},
        headers={"A2A-Version": "1.0"},
        timeout=10,
    )
    took = time.monotonic() - start
    assert reply.status_code == 503, reply.text
    error: dict[str, Any] = reply.json()["error"]
    assert error["code"] == -32105
    assert "store" in error["message"]
    assert took < 3.0  # at most one read timeout (2 s), not a hang
    return error


def degraded(agent: AgentProcess) -> bool:
    health = httpx.get(agent.url + "health", timeout=10)
    return health.status_code == 503 and health.json()["status"] == "degraded"


def healed_within(load: Load, since: float) -> float:
    """Seconds from `since` until no acknowledged task is left running (at most BOUND)."""
    while True:
        left = load.unsettled()
        took = time.monotonic() - since
        if not left:
            return took
        assert took < BOUND, f"{len(left)} acknowledged task(s) still running: {left[:3]}"
        time.sleep(0.2)


@pytest.mark.timeout(120)
def test_redis_killed_then_paused_under_load_heals_with_nothing_stuck(
    outage: tuple[RedisServer, list[AgentProcess]],
) -> None:
    redis, agents = outage
    assert redis.proc is not None
    with Load(agents) as load:
        time.sleep(1.5)
        # Killed (kill -9) for 3 s.
        redis.kill()
        time.sleep(0.5)
        fails_fast(agents[0])
        assert degraded(agents[1])
        time.sleep(2.5)
        redis.start()
        restored = time.monotonic()
        time.sleep(1.5)
        # Paused (SIGSTOP: connections open, nothing answers) for 4 s.
        redis.proc.send_signal(signal.SIGSTOP)
        time.sleep(0.5)
        fails_fast(agents[1])
        fails_fast(agents[1])  # the guard is open now: at once
        assert degraded(agents[0])
        time.sleep(3.5)
        redis.proc.send_signal(signal.SIGCONT)
        resumed = time.monotonic()
        time.sleep(1.0)
    took = healed_within(load, resumed)
    print(f"healed {took:.2f} s after the pause ended ({len(load.acknowledged)} acknowledged)")
    assert restored < resumed
    assert len(load.acknowledged) >= 20
    for agent in agents:
        health = httpx.get(agent.url + "health", timeout=10)
        assert health.status_code == 200, health.text
    # The refusals while it was down were the clear store error, never an internal one.
    assert {e["code"] for e in load.errors} <= {-32105}, load.errors[:3]
    failed = [
        agents[0].rpc("GetTask", {"id": task_id})["result"]
        for task_id in list(load.acknowledged)[:400]
    ]
    for task in failed:
        if task["status"]["state"] == "TASK_STATE_FAILED":
            assert task["status"]["message"]["parts"][0]["text"].startswith("interrupted:")
    # And the store still works: a new task completes.
    done = agents[0].rpc("SendMessage", message(f"after {uuid.uuid4()}"))
    assert done["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
