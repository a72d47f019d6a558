"""Replicas on PostgreSQL under failure: a replica killed (kill -9) under load leaves its
handoffs to another, and a PostgreSQL killed, then paused, under load heals by itself.

The replicas' everyday behaviour (any replica answers, streams across replicas, failover) is
tests/integration/test_replicas.py's, run on PostgreSQL as on Redis; the store's own
behaviour is tests/a2a_handoff/stores' suite.
"""

from __future__ import annotations

import signal
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from a2a_handoff.runtime.orphans import RESTART_REASON
from tests.integration.handoff_support import REFUND, ext, message, result, tasks_in, wait_for
from tests.integration.test_outages import FAST, Load, degraded, fails_fast, healed_within
from tests.integration.test_replicas import replicas, running
from tests.postgres_support import PostgresDatabase, PostgresServer
from tests.support import AgentProcess


def settled(triage: AgentProcess, billing: AgentProcess, ctx: str) -> str:
    """How a context's handoff ended, once it did: exactly one successor for a transfer,
    none for a failure, never a dangling pointer."""

    def source() -> dict[str, object] | None:
        tasks = tasks_in(triage, ctx)
        assert len(tasks) <= 1
        if tasks and (
            ext(tasks[0]).get("state") in ("TRANSFERRED", "FAILED")
            or tasks[0]["status"]["state"] == "TASK_STATE_FAILED"
        ):
            return tasks[0]
        return None

    task = wait_for(source, timeout=20)
    successors = tasks_in(billing, ctx)
    if ext(task).get("state") == "TRANSFERRED":
        assert [t["id"] for t in successors] == [ext(task)["transfer"]["taskId"]]
        return "transferred"
    assert task["status"]["state"] == "TASK_STATE_FAILED", task
    assert successors == []
    return "failed"


@pytest.mark.timeout(180)
def test_a_replica_killed_under_load_leaves_its_handoffs_to_the_other(
    postgres_database: PostgresDatabase, tmp_path: Path
) -> None:
    (billing,) = replicas("billing", postgres_database.store_url(), tmp_path, 1)
    triage = replicas(
        "triage", postgres_database.store_url(), tmp_path, 2, f"--route=billing={billing.url}"
    )
    acknowledged: dict[str, str] = {}  # context → the source task a client was told of
    lock = threading.Lock()
    stop = threading.Event()

    def client(agent: AgentProcess) -> None:
        with httpx.Client(timeout=10) as http:
            for _ in range(500):  # bounded; stopped long before
                if stop.is_set():
                    return
                ctx = f"ctx-{uuid.uuid4()}"
                body = {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "SendMessage",
                    "params": message(REFUND, ctx, returnImmediately=True),
                }
                try:
                    reply = http.post(agent.url, json=body, headers={"A2A-Version": "1.0"})
                    answer = reply.json()
                except (httpx.TransportError, ValueError):
                    time.sleep(0.05)
                    continue
                if "result" in answer:
                    with lock:
                        acknowledged[ctx] = answer["result"]["task"]["id"]
                time.sleep(0.02)

    with running(billing, *triage):
        threads = [threading.Thread(target=client, args=(triage[i % 2],)) for i in range(4)]
        for thread in threads:
            thread.start()
        try:
            wait_for(lambda: len(acknowledged) >= 20, timeout=30)
            triage[0].kill()  # kill -9, handoffs in flight
            killed_with = len(acknowledged)
            wait_for(lambda: len(acknowledged) >= killed_with + 10, timeout=30)
        finally:
            stop.set()
            for thread in threads:
                thread.join(30)
        survivor = triage[1]
        outcomes = {"transferred": 0, "failed": 0}
        for ctx, task_id in dict(acknowledged).items():
            outcome = settled(survivor, billing, ctx)
            outcomes[outcome] += 1
            if outcome == "failed":  # its runner died before it handed off: said so
                task = result(survivor.rpc("GetTask", {"id": task_id}))
                assert task["status"]["message"]["parts"][0]["text"] == RESTART_REASON
        # Nothing acknowledged was lost; nearly every handoff went through, the dead
        # replica's pending ones finished by the survivor under their leases.
        assert outcomes["transferred"] >= len(acknowledged) - 10, outcomes
        sent = result(survivor.rpc("ListHandoffs", {}))["sent"]
        assert sent
        assert all(h["status"] in ("done", "failed") for h in sent), sent


@pytest.fixture
def private_postgres(tmp_path: Path) -> Iterator[tuple[PostgresServer, list[AgentProcess]]]:
    """A PostgreSQL of the test's own (it gets killed and paused) and two echo replicas."""
    server = PostgresServer().init().start()
    agents: list[AgentProcess] = []
    try:
        store = server.database().store_url()
        agents = [AgentProcess("echo", store, extra=FAST) for _ in range(2)]
        for i, agent in enumerate(agents):
            agent.log_path = tmp_path / f"echo-{i}.log"
            agent.start()
        yield server, agents
    finally:
        for agent in agents:
            agent.stop()
        server.remove()


@pytest.mark.timeout(150)
def test_postgres_killed_then_paused_under_load_heals_with_nothing_stuck(
    private_postgres: tuple[PostgresServer, list[AgentProcess]],
) -> None:
    server, agents = private_postgres
    with Load(agents) as load:
        time.sleep(1.5)
        # Killed (kill -9 of the server and its backends) for 3 s, then restarted: it
        # recovers from its WAL.
        server.kill()
        time.sleep(0.5)
        fails_fast(agents[0])
        assert degraded(agents[1])
        time.sleep(2.5)
        server.start()
        restored = time.monotonic()
        time.sleep(1.5)
        # Paused (SIGSTOP: connections open, nothing answers) for 4 s.
        server.send(signal.SIGSTOP)
        time.sleep(0.5)
        fails_fast(agents[1])
        fails_fast(agents[1])  # the guard is open now: at once
        assert degraded(agents[0])
        time.sleep(3.5)
        server.send(signal.SIGCONT)
        resumed = time.monotonic()
        time.sleep(1.0)
    took = healed_within(load, resumed)
    print(f"healed {took:.2f} s after the pause ended ({len(load.acknowledged)} acknowledged)")
    assert restored < resumed
    assert len(load.acknowledged) >= 20
    for agent in agents:
        health = httpx.get(agent.url + "health", timeout=10)
        assert health.status_code == 200, health.text
        assert health.json()["storePool"]["max"] == 10
    # The refusals while it was down were the clear store error, never an internal one.
    assert {e["code"] for e in load.errors} <= {-32105}, load.errors[:3]
    for task_id in list(load.acknowledged)[:400]:
        task = agents[0].rpc("GetTask", {"id": task_id})["result"]
        if task["status"]["state"] == "TASK_STATE_FAILED":
            assert task["status"]["message"]["parts"][0]["text"].startswith("interrupted:")
    done = agents[0].rpc("SendMessage", message(f"after {uuid.uuid4()}"))
    assert done["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
