"""Crash safety: processes die at every failpoint, and at random under load (kill -9)."""

from __future__ import annotations

import contextlib
import random
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from a2a_handoff.failpoints import ENV_VAR, EXIT_CODE
from a2a_handoff.runtime.orphans import RESTART_REASON
from tests.integration.handoff_support import (
    REFUND,
    Agents,
    ext,
    make_agents,
    message,
    result,
    tasks_in,
    wait_for,
)
from tests.support import AgentProcess


def settled_source(agents: Agents, ctx: str) -> dict[str, Any]:
    """The triage task of a context, once it is terminal."""

    def check() -> dict[str, Any] | None:
        tasks = tasks_in(agents.triage, ctx)
        assert len(tasks) <= 1
        if tasks and ext(tasks[0]).get("state") in ("TRANSFERRED", "FAILED"):
            return tasks[0]
        if tasks and tasks[0]["status"]["state"] == "TASK_STATE_FAILED":
            return tasks[0]
        return None

    try:
        found: dict[str, Any] = wait_for(check, timeout=20)
    except AssertionError as exc:  # say where the task stands (a rare chaos failure on Redis)
        tasks = tasks_in(agents.triage, ctx)
        seen = [(t["id"], t["status"]["state"], ext(t)) for t in tasks]
        successors = [(t["id"], t["status"]["state"]) for t in tasks_in(agents.billing, ctx)]
        raise AssertionError(f"{exc}; triage: {seen}; billing: {successors}") from exc
    return found


def assert_invariants(agents: Agents, ctx: str) -> str:
    """Exactly one successor for a transfer, none for a failure; no dangling pointer."""
    source = settled_source(agents, ctx)
    successors = tasks_in(agents.billing, ctx)
    if ext(source).get("state") == "TRANSFERRED":
        pointer = ext(source)["transfer"]
        assert [t["id"] for t in successors] == [pointer["taskId"]]
        assert successors[0]["history"][0]["referenceTaskIds"] == [source["id"]]
        return "transferred"
    assert source["status"]["state"] == "TASK_STATE_FAILED"
    assert successors == []
    return "failed"


def died(agent: AgentProcess) -> int:
    # Generous: under load the first delivery can time out and wait in the outbox for its retry
    # before the process reaches the failpoint.
    assert agent.proc is not None
    return agent.proc.wait(60)


@pytest.mark.parametrize(
    "point", ["handoff.after_checkpoint", "handoff.after_create", "handoff.after_terminate"]
)
def test_source_dies_at_a_failpoint_and_recovers(
    tmp_path: Path, point: str, stores: Callable[[str], str]
) -> None:
    agents = make_agents(tmp_path, stores=stores)
    agents.billing.start()
    agents.triage.env = {ENV_VAR: point}
    agents.triage.start()
    try:
        ctx = f"ctx-{uuid.uuid4()}"
        with contextlib.suppress(httpx.TransportError):  # it dies mid-request: the point
            agents.triage.rpc("SendMessage", message(REFUND, ctx))
        assert died(agents.triage) == EXIT_CODE
        agents.triage.env = {}
        agents.triage.start()
        assert assert_invariants(agents, ctx) == "transferred"
    finally:
        agents.stop()


def test_target_dies_after_creating_and_the_replay_finds_its_task(
    tmp_path: Path, stores: Callable[[str], str]
) -> None:
    agents = make_agents(tmp_path, stores=stores)
    agents.billing.env = {ENV_VAR: "receive.after_create"}
    agents.billing.start()
    agents.triage.start()
    try:
        ctx = f"ctx-{uuid.uuid4()}"
        source = result(
            agents.triage.rpc("SendMessage", message(REFUND, ctx, returnImmediately=True))
        )["task"]
        assert died(agents.billing) == EXIT_CODE
        agents.billing.env = {}
        agents.billing.start()
        assert assert_invariants(agents, ctx) == "transferred"
        assert settled_source(agents, ctx)["id"] == source["id"]
        received = result(agents.billing.rpc("ListHandoffs", {"contextId": ctx}))["received"]
        # The accepted row committed with the task it created; the replay found that task.
        assert [e["outcome"] for e in received] == ["accepted", "duplicate"]
        assert len({e["taskId"] for e in received}) == 1
    finally:
        agents.stop()


KILLS = 6
PER_ROUND = 10  # handoffs the clients may have acknowledged per kill, at most


@pytest.mark.timeout(240)
def test_chaos_kill_9_at_random_loses_and_duplicates_nothing(
    tmp_path: Path, stores: Callable[[str], str]
) -> None:
    seed = int(time.time())
    rng = random.Random(seed)
    agents = make_agents(tmp_path, stores=stores)
    agents.billing.start()
    agents.triage.start()
    acknowledged: dict[str, str] = {}  # context → source task id the client was given
    attempted: list[str] = []
    stop = threading.Event()
    lock = threading.Lock()
    budget = [PER_ROUND]  # the clients hold back once this many handoffs are acknowledged

    def client_loop() -> None:
        with httpx.Client(timeout=5) as http:
            while not stop.is_set():
                time.sleep(0.05)
                if len(acknowledged) >= budget[0]:
                    continue  # this round's handoffs are in: wait for the next round
                ctx = f"ctx-{uuid.uuid4()}"
                with lock:
                    attempted.append(ctx)
                body = {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "SendMessage",
                    "params": message(REFUND, ctx, returnImmediately=True),
                }
                try:
                    reply = http.post(
                        agents.triage.url, json=body, headers={"A2A-Version": "1.0"}
                    ).json()
                except (httpx.TransportError, ValueError):
                    time.sleep(0.05)
                    continue
                if "result" in reply:
                    with lock:
                        acknowledged[ctx] = reply["result"]["task"]["id"]

    workers = [threading.Thread(target=client_loop) for _ in range(4)]
    for worker in workers:
        worker.start()
    try:
        started, kills = time.monotonic(), 0
        # Each round: the clients send handoffs; once the agents have acknowledged a random
        # few since the last restart (waited 20 s at most, however slowly a loaded machine
        # restarts them), one of them is killed mid-flight and started again. The clients
        # hold back after PER_ROUND a round, so every kill finds handoffs in flight.
        while kills < KILLS and time.monotonic() - started < 90:
            mark, waited = len(acknowledged), time.monotonic()
            budget[0] = mark + PER_ROUND
            wanted = mark + rng.randint(1, PER_ROUND // 2)
            while len(acknowledged) < wanted and time.monotonic() - waited < 20:
                time.sleep(0.02)
            time.sleep(rng.uniform(0.0, 0.3))
            victim = rng.choice([agents.triage, agents.billing])
            victim.kill()
            kills += 1
            time.sleep(rng.uniform(0.0, 0.5))
            victim.start(timeout=60)  # its start-up replays what it left: slow under load
        stop.set()
        for worker in workers:
            worker.join(10)
        # Everything settles once both are up for good.
        outcomes = {"transferred": 0, "failed": 0}
        for ctx in attempted:
            tasks = tasks_in(agents.triage, ctx)
            if not tasks:
                assert ctx not in acknowledged, f"an acknowledged task was lost (seed {seed})"
                assert tasks_in(agents.billing, ctx) == []
                continue
            assert tasks[0]["id"] == acknowledged.get(ctx, tasks[0]["id"])
            outcome = assert_invariants(agents, ctx)
            outcomes[outcome] += 1
            if outcome == "failed":
                source = settled_source(agents, ctx)
                assert source["status"]["message"]["parts"][0]["text"] == RESTART_REASON
        assert kills == KILLS
        assert outcomes["transferred"] >= 10, (outcomes, seed)
    finally:
        stop.set()
        agents.stop()
