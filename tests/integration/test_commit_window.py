"""Nothing runs ahead of its commit: the window between a handler's start and the commit that
makes its step exist, held open on purpose, with `kill -9` inside it — every unit of work
is done exactly once, in the work log that records it.

The window is held by SQLite's own write lock (another connection holds it), or by a pause
point (`failpoints.pausepoint`: the process goes on, the write never happens) on every
store. What is counted: billing's payments (its provider's ledger), the delegate's work log,
the MCP server's executions.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx

from a2a_handoff.failpoints import PAUSE_FILE_VAR, PAUSE_VAR
from tests.integration import delegation_support
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
from tests.integration.test_call_tool import McpServer
from tests.support import AgentProcess


def payments(ledger: Path) -> list[dict[str, Any]]:
    """What billing's payment provider paid (its ledger)."""
    if not ledger.exists():
        return []
    return [json.loads(line) for line in ledger.read_text().splitlines() if line]


def with_ledger(agents: Agents, tmp: Path) -> Path:
    ledger = tmp / "payments.jsonl"
    agents.billing.extra = (*agents.billing.extra, f"--payments={ledger}")
    return ledger


def paused_at(agent: AgentProcess, point: str, tmp: Path) -> Path:
    """Arm the pause point `point` for the agent's next start; the file it creates there."""
    marker = tmp / f"{agent.name}-{point}.paused"
    agent.env = {PAUSE_VAR: point, PAUSE_FILE_VAR: str(marker)}
    return marker


def kill_when_paused(agent: AgentProcess, marker: Path, work: Callable[[], object]) -> None:
    """Wait until the agent holds its write at the pause point; give a handler running ahead
    of it (the defect) a moment to do its `work` — it must not — then kill -9 the agent."""
    wait_for(marker.exists, timeout=30)
    with contextlib.suppress(AssertionError):  # the work that must not come: not waited long
        wait_for(work, timeout=1.0)
    agent.kill()
    agent.env = {}


def transferred_once(agents: Agents, ctx: str) -> dict[str, Any]:
    """The source TRANSFERRED to the one successor, which completed; that successor."""

    def check() -> dict[str, Any] | None:
        [source] = tasks_in(agents.triage, ctx)
        done = [t for t in tasks_in(agents.billing, ctx) if t["status"]["state"].endswith("ED")]
        return source if ext(source).get("state") == "TRANSFERRED" and done else None

    source = wait_for(check, timeout=30)
    [successor] = tasks_in(agents.billing, ctx)
    assert ext(source)["transfer"]["taskId"] == successor["id"]
    assert successor["status"]["state"] == "TASK_STATE_COMPLETED"
    return successor


def answers(agent: AgentProcess) -> bool:
    """Whether the agent's event loop answers (not blocked in a write)."""
    try:
        httpx.get(agent.url + "health", timeout=0.5)
    except httpx.TimeoutException:
        return False
    return True


def test_a_handoff_received_under_sqlites_held_write_lock_is_worked_once(tmp_path: Path) -> None:
    agents = make_agents(tmp_path)
    ledger = with_ledger(agents, tmp_path)
    agents.billing.start()
    agents.triage.start()
    lock = sqlite3.connect(tmp_path / "billing.db", isolation_level=None, timeout=1)
    try:
        lock.execute("BEGIN IMMEDIATE")  # billing's next write waits for this lock
        ctx = f"ctx-{uuid.uuid4()}"
        result(agents.triage.rpc("SendMessage", message(REFUND, ctx, returnImmediately=True)))
        wait_for(lambda: not answers(agents.billing), timeout=20)  # in its first write
        agents.billing.kill()
        lock.rollback()
        agents.billing.start()
        successor = transferred_once(agents, ctx)
        [paid] = payments(ledger)  # the refund, once: by the successor the source points at
        assert paid["key"] == f"{successor['id']}/refund"
    finally:
        lock.close()
        agents.stop()


def test_a_handoff_killed_before_its_task_commits_is_worked_once(
    tmp_path: Path, stores: Callable[[str], str]
) -> None:
    agents = make_agents(tmp_path, stores=stores)
    ledger = with_ledger(agents, tmp_path)
    marker = paused_at(agents.billing, "task.before_create", tmp_path)
    agents.billing.start()
    agents.triage.start()
    try:
        ctx = f"ctx-{uuid.uuid4()}"
        result(agents.triage.rpc("SendMessage", message(REFUND, ctx, returnImmediately=True)))
        kill_when_paused(agents.billing, marker, lambda: payments(ledger))
        assert payments(ledger) == []  # its handler never ran: the task was not committed
        agents.billing.start()
        successor = transferred_once(agents, ctx)
        [paid] = payments(ledger)
        assert paid["key"] == f"{successor['id']}/refund"
    finally:
        agents.stop()


def test_a_delegation_killed_before_its_sub_task_commits_is_worked_once(
    tmp_path: Path, stores: Callable[[str], str]
) -> None:
    agents = delegation_support.make_agents(tmp_path, stores)
    marker = paused_at(agents.billing, "task.before_create", tmp_path)
    agents.start()
    try:
        ctx = str(uuid.uuid4())
        asked = delegation_support.ask(
            agents.triage, "refund order 4242", ctx, returnImmediately=True
        )
        kill_when_paused(agents.billing, marker, lambda: agents.work(ctx))
        assert agents.work(ctx) == []
        agents.billing.start()
        task = delegation_support.settled(agents.triage, ctx)
        assert task["id"] == asked["id"]
        outcome = delegation_support.delegated(task)
        assert outcome["state"] == "COMPLETED"
        [line] = agents.work(ctx)  # the delegate worked once, in the sub-task reported
        assert line.split()[1] == outcome["taskId"]
        assert [t["id"] for t in tasks_in(agents.billing, ctx)] == [outcome["taskId"]]
    finally:
        agents.stop()


@contextlib.contextmanager
def in_background(call: Callable[[], object]) -> Iterator[None]:
    """Run `call` in a thread for the block (its error, a killed agent's, is expected)."""

    def run() -> None:
        with contextlib.suppress(Exception):
            call()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    yield
    thread.join(30)


def completed(agent: AgentProcess, task_id: str) -> dict[str, Any]:
    """The task, once COMPLETED."""

    def check() -> dict[str, Any] | None:
        task: dict[str, Any] = result(agent.rpc("GetTask", {"id": task_id}))
        return task if task["status"]["state"] == "TASK_STATE_COMPLETED" else None

    found: dict[str, Any] = wait_for(check, timeout=30)
    return found


def test_a_keyed_create_killed_before_its_task_commits_is_worked_once(
    tmp_path: Path, stores: Callable[[str], str]
) -> None:
    billing = make_agents(tmp_path, stores=stores).billing
    ledger = tmp_path / "payments.jsonl"
    billing.extra = (*billing.extra, f"--payments={ledger}")
    marker = paused_at(billing, "task.before_create", tmp_path)
    billing.start()
    try:
        sent = message("refund order 9090 please", f"ctx-{uuid.uuid4()}")
        with in_background(lambda: billing.rpc("SendMessage", sent)):
            kill_when_paused(billing, marker, lambda: payments(ledger))
        assert payments(ledger) == []
        billing.start()
        task = result(billing.rpc("SendMessage", sent))["task"]  # the client's retry, same id
        assert task["status"]["state"] == "TASK_STATE_COMPLETED"
        again = result(billing.rpc("SendMessage", sent))["task"]
        assert again["id"] == task["id"]
        [paid] = payments(ledger)
        assert paid == {**paid, "key": f"{task['id']}/refund", "orderId": "9090"}
    finally:
        billing.stop()


def test_a_tool_call_of_a_handler_killed_before_its_task_commits_is_made_once(
    tmp_path: Path, stores: Callable[[str], str]
) -> None:
    mcp = McpServer(tmp_path / "counts.txt")
    mcp.start()
    agent = AgentProcess("tools", stores("tools"), extra=(f"--mcp=calc={mcp.url}",))
    agent.module = "tests.integration.tool_agent"
    agent.log_path = tmp_path / "tools.log"
    marker = paused_at(agent, "task.before_create", tmp_path)
    agent.start()
    try:
        call = json.dumps({"server": "calc", "tool": "count", "args": {}})  # no key
        sent = message(call, f"ctx-{uuid.uuid4()}")
        with in_background(lambda: agent.rpc("SendMessage", sent)):
            kill_when_paused(agent, marker, mcp.executions)
        assert mcp.executions() == []
        agent.start()
        task = result(agent.rpc("SendMessage", sent))["task"]
        assert task["status"]["state"] == "TASK_STATE_COMPLETED"
        assert mcp.executions() == ["-"]  # one execution, unkeyed
    finally:
        agent.stop()
        mcp.kill()


def test_a_journaled_step_killed_before_its_record_commits_pays_once(
    tmp_path: Path, stores: Callable[[str], str]
) -> None:
    billing = make_agents(tmp_path, stores=stores).billing
    ledger = tmp_path / "payments.jsonl"
    billing.extra = (*billing.extra, f"--payments={ledger}")
    marker = paused_at(billing, "step.before_record", tmp_path)
    billing.start()
    try:
        sent = message("refund order 5150 please", f"ctx-{uuid.uuid4()}", returnImmediately=True)
        task = result(billing.rpc("SendMessage", sent))["task"]
        kill_when_paused(billing, marker, lambda: False)  # paid; its record not committed
        [paid] = payments(ledger)
        billing.start()  # billing resumes its task: the step runs again with the same key
        done = completed(billing, task["id"])
        assert payments(ledger) == [paid]  # the provider took the key: paid once
        assert ext(done)["steps"]["refund"]["result"] == paid
        assert [a["name"] for a in done["artifacts"]] == ["refund"]
    finally:
        billing.stop()
