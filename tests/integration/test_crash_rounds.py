"""Randomized crash rounds: a handoff or a delegation sent, and 0-50 ms later `kill -9` of its
source or its target (chosen at random), started again at once — 20 rounds per store and
kind. Afterwards every conversation settles, and nothing is lost or done twice: a source
TRANSFERRED points at its one successor, which completed and was paid once; a delegation
completed with its one sub-task, worked once. The seed is printed with any failure."""

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

from tests.integration import delegation_support
from tests.integration.handoff_support import REFUND, ext, make_agents, message, tasks_in, wait_for
from tests.integration.test_commit_window import payments, with_ledger
from tests.support import AgentProcess

ROUNDS = 20


def send_and_kill(
    rng: random.Random, entry: AgentProcess, params: dict[str, Any], victims: list[AgentProcess]
) -> str | None:
    """SendMessage `params` to `entry` in a thread; 0-50 ms after it left, kill -9 one of
    `victims` and start it again. The id of the task the client was given, if any."""
    acknowledged: list[str] = []

    def send() -> None:
        body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": params}
        with contextlib.suppress(httpx.HTTPError, ValueError, KeyError):
            answer = httpx.post(entry.url, json=body, headers={"A2A-Version": "1.0"}, timeout=10)
            acknowledged.append(answer.json()["result"]["task"]["id"])

    client = threading.Thread(target=send)
    client.start()
    time.sleep(rng.uniform(0.0, 0.05))
    victim = rng.choice(victims)
    victim.kill()
    victim.start(timeout=60)
    client.join(15)
    return acknowledged[0] if acknowledged else None


def settled(check: Callable[[], Any], seed: int, what: str) -> Any:
    try:
        return wait_for(check, timeout=60)
    except AssertionError as exc:
        raise AssertionError(f"{what} (seed {seed}): {exc}") from exc


@pytest.mark.timeout(300)
def test_handoffs_under_kill_9_of_either_side_end_once_and_pay_once(
    tmp_path: Path, stores: Callable[[str], str]
) -> None:
    seed = int(time.time())
    rng = random.Random(seed)
    agents = make_agents(tmp_path, stores=stores)
    ledger = with_ledger(agents, tmp_path)
    agents.billing.start()
    agents.triage.start()
    try:
        sent: dict[str, str | None] = {}
        for _ in range(ROUNDS):
            ctx = f"ctx-{uuid.uuid4()}"
            params = message(REFUND, ctx, returnImmediately=True)
            sent[ctx] = send_and_kill(rng, agents.triage, params, [agents.triage, agents.billing])
        successors: list[str] = []
        seen: dict[str, int] = {"absent": 0, "failed": 0, "transferred": 0}
        for ctx, acknowledged in sent.items():

            def source_settled(ctx: str = ctx) -> tuple[list[dict[str, Any]]] | None:
                tasks = tasks_in(agents.triage, ctx)
                done = [t for t in tasks if ext(t).get("state") == "TRANSFERRED"]
                failed = [t for t in tasks if t["status"]["state"] == "TASK_STATE_FAILED"]
                return (tasks,) if not tasks or done or failed else None

            [tasks] = settled(source_settled, seed, f"the source of {ctx} never settled")
            assert len(tasks) <= 1, (seed, tasks)
            if not tasks:  # the send died with triage before its task was committed
                assert acknowledged is None, f"an acknowledged task was lost (seed {seed})"
                assert tasks_in(agents.billing, ctx) == []
                seen["absent"] += 1
                continue
            [source] = tasks
            assert acknowledged in (None, source["id"])
            if ext(source).get("state") != "TRANSFERRED":  # failed: nothing went to billing
                assert tasks_in(agents.billing, ctx) == [], seed
                seen["failed"] += 1
                continue
            seen["transferred"] += 1

            def successor_done(ctx: str = ctx) -> dict[str, Any] | None:
                found = tasks_in(agents.billing, ctx)
                assert len(found) == 1, (seed, found)
                return found[0] if found[0]["status"]["state"] == "TASK_STATE_COMPLETED" else None

            successor = settled(successor_done, seed, f"the successor in {ctx} never completed")
            assert ext(source)["transfer"]["taskId"] == successor["id"], seed
            successors.append(successor["id"])
        paid = sorted(p["key"] for p in payments(ledger))
        assert paid == sorted(f"{s}/refund" for s in successors), seed  # each paid once
        assert len(successors) >= 3, (seed, seen)  # rounds that reached billing
    finally:
        agents.stop()


@pytest.mark.timeout(300)
def test_delegations_under_kill_9_of_either_side_complete_and_work_once(
    tmp_path: Path, stores: Callable[[str], str]
) -> None:
    seed = int(time.time())
    rng = random.Random(seed)
    agents = delegation_support.make_agents(tmp_path, stores).start()
    try:
        sent: dict[str, str | None] = {}
        for i in range(ROUNDS):
            ctx = str(uuid.uuid4())
            params = message(f"refund order {7000 + i}", ctx, returnImmediately=True)
            sent[ctx] = send_and_kill(rng, agents.triage, params, [agents.triage, agents.billing])
        completed = 0
        for ctx, acknowledged in sent.items():

            def done(ctx: str = ctx) -> tuple[list[dict[str, Any]]] | None:
                tasks = tasks_in(agents.triage, ctx)
                working = ("TASK_STATE_SUBMITTED", "TASK_STATE_WORKING")
                settled_now = not tasks or tasks[0]["status"]["state"] not in working
                return (tasks,) if settled_now else None

            [tasks] = settled(done, seed, f"the delegating task of {ctx} never settled")
            if not tasks:
                assert acknowledged is None, f"an acknowledged task was lost (seed {seed})"
                assert agents.work(ctx) == []
                continue
            [task] = tasks
            assert acknowledged in (None, task["id"])
            assert task["status"]["state"] == "TASK_STATE_COMPLETED", (seed, task["status"])
            outcome = delegation_support.delegated(delegation_support.settled(agents.triage, ctx))
            assert outcome["state"] == "COMPLETED", (seed, outcome)
            lines = agents.work(ctx)
            subs = [(t["id"], t["status"]["state"]) for t in tasks_in(agents.billing, ctx)]
            assert len(lines) == 1, (seed, lines, subs, outcome)
            [line] = lines  # worked once, in the one sub-task reported
            assert line.split()[1] == outcome["taskId"], seed
            assert [t["id"] for t in tasks_in(agents.billing, ctx)] == [outcome["taskId"]], seed
            completed += 1
        assert completed >= 3, (seed, completed)  # rounds that reached billing
    finally:
        agents.stop()
