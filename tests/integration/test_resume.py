"""A task cut by `kill -9` goes on: its handler runs again — on the restarted agent (SQLite),
or on another replica once the runner's lease lapsed (Redis, PostgreSQL) — what the cut run
committed is replayed, not sent again, and a subscriber that reconnects with `Last-Event-ID`
sees every event once, with no gap. A delegate killed after its journaled work resumes
without working again, and the delegating task completes."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from a2a_handoff.failpoints import ENV_VAR, EXIT_CODE
from a2a_handoff.protocol.extension import HANDOFF_EXTENSION_URI as URI
from tests.integration import delegation_support
from tests.integration.handoff_support import result, tasks_in, wait_for
from tests.integration.test_streams import sse, start
from tests.postgres_support import PostgresDatabase
from tests.redis_support import RedisServer
from tests.support import A2A_HEADERS, AgentProcess, wire_trust

pytestmark = pytest.mark.anyio
FAST = ("--recovery-interval", "0.3")
Frame = tuple[int | None, dict[str, Any]]


@pytest.fixture(params=["sqlite", "redis", "postgres"])
def echo(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[list[AgentProcess]]:
    """Echo on SQLite (one process, restarted), or two replicas of it on one shared store."""
    if request.param == "sqlite":
        agents = [AgentProcess("echo", f"sqlite:///{tmp_path / 'echo.db'}", extra=FAST)]
    else:
        server: RedisServer | PostgresDatabase = request.getfixturevalue(
            "redis_server" if request.param == "redis" else "postgres_database"
        )
        url = server.store_url()
        agents = [AgentProcess("echo", url, extra=FAST) for _ in range(2)]
        wire_trust(agents)
    for i, agent in enumerate(agents):
        agent.log_path = tmp_path / f"echo-{i}.log"
        agent.start()
    try:
        yield agents
    finally:
        for agent in agents:
            agent.stop()


async def frames_until(
    http: httpx.AsyncClient, url: str, task_id: str, done: Callable[[dict[str, Any]], bool]
) -> list[Frame]:
    """SubscribeToTask's frames up to the first for which `done` holds."""
    body = {"jsonrpc": "2.0", "id": 7, "method": "SubscribeToTask", "params": {"id": task_id}}
    frames: list[Frame] = []
    event_id: int | None = None
    async with http.stream("POST", url, json=body, headers=A2A_HEADERS) as response:
        async for line in response.aiter_lines():
            if line.startswith("id:"):
                event_id = int(line[3:].strip())
            elif line.startswith("data:"):
                frames.append((event_id, json.loads(line[5:].strip())))
                if done(frames[-1][1]):
                    return frames
    raise AssertionError(f"the stream ended first: {frames}")


def status_text(frame: dict[str, Any]) -> str:
    update = frame["result"].get("statusUpdate") or {}
    message = update.get("status", {}).get("message") or {}
    return str((message.get("parts") or [{}])[0].get("text", ""))


async def test_a_task_cut_by_kill_9_resumes_and_its_subscriber_sees_each_event_once(
    echo: list[AgentProcess],
) -> None:
    first, other = echo[0], echo[-1]  # the same agent on SQLite: restarted
    task_id = await start(first, "sleep:3")
    async with httpx.AsyncClient(timeout=60) as http:
        head = await frames_until(
            http, first.url, task_id, lambda f: status_text(f) == "slept 1 of 3 s"
        )
        first.kill()
        if other is first:
            first.start()
        last = head[-1][0]
        assert last is not None
        rest = await sse(
            http,
            other.url,
            "SubscribeToTask",
            {"id": task_id},
            headers={"Last-Event-ID": str(last)},
        )
        task = result(other.rpc("GetTask", {"id": task_id}))
    events = head[1:] + rest  # after the subscription's snapshot: every event, by its id
    ids = [i for i, _ in events]
    assert ids == list(range(head[1][0] or 0, (ids[-1] or 0) + 1)), ids  # no gap, no repeat
    said = [status_text(f) for _, f in events if status_text(f).startswith("slept")]
    assert said == ["slept 1 of 3 s", "slept 2 of 3 s", "slept 3 of 3 s"]
    resumed = [f for _, f in rest if (f["result"].get("statusUpdate") or {}).get("metadata")]
    assert any(f["result"]["statusUpdate"]["metadata"][URI].get("resumed") for f in resumed)
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert [p["text"] for a in task["artifacts"] for p in a["parts"]] == ["slept 3 s"]
    texts = [m["parts"][0]["text"] for m in task["history"] if m["role"] == "ROLE_AGENT"]
    assert texts == ["slept 1 of 3 s", "slept 2 of 3 s", "slept 3 of 3 s"]  # none twice


def test_a_delegate_killed_after_its_work_resumes_and_the_delegation_completes(
    tmp_path: Path,
) -> None:
    agents = delegation_support.make_agents(tmp_path)
    agents.start()
    try:
        agents.billing.env = {ENV_VAR: "step.after_record"}  # dies once its work is recorded
        agents.billing.restart()
        ctx = str(uuid.uuid4())
        asked = delegation_support.ask(
            agents.triage, "refund order 6060", ctx, returnImmediately=True
        )
        assert agents.billing.proc is not None
        assert agents.billing.proc.wait(30) == EXIT_CODE
        agents.billing.env = {}
        agents.billing.start()  # resumes the sub-task: its work is replayed, not done again
        task = delegation_support.settled(agents.triage, ctx)
        assert task["id"] == asked["id"]
        assert task["status"]["state"] == "TASK_STATE_COMPLETED"
        outcome = delegation_support.delegated(task)
        assert outcome["state"] == "COMPLETED"
        assert outcome["data"] == {"orderId": "6060", "status": "refunded"}
        [line] = agents.work(ctx)
        assert line.split()[1] == outcome["taskId"]
        assert agents.calls(outcome["taskId"]) == [f"{outcome['taskId']}/work-1"]  # replayed
        assert [t["id"] for t in tasks_in(agents.billing, ctx)] == [outcome["taskId"]]
    finally:
        agents.stop()


def test_billing_killed_after_its_refund_step_completes_the_task_after_a_restart_paid_once(
    tmp_path: Path,
) -> None:
    ledger = tmp_path / "payments.jsonl"
    billing = AgentProcess(
        "billing",
        f"sqlite:///{tmp_path / 'billing.db'}",
        extra=(f"--payments={ledger}", *FAST),
        env={ENV_VAR: "step.after_record"},  # dies once the refund's record committed
    )
    billing.log_path = tmp_path / "billing.log"
    billing.start()
    try:
        sent = {
            "message": {
                "messageId": str(uuid.uuid4()),
                "role": "ROLE_USER",
                "parts": [{"text": "refund order 8080 please"}],
            },
            "configuration": {"returnImmediately": True},
        }
        task = result(billing.rpc("SendMessage", sent))["task"]
        assert billing.proc is not None
        assert billing.proc.wait(30) == EXIT_CODE
        billing.env = {}
        billing.start()  # resumes the task: the refund is answered from its record

        def completed() -> dict[str, Any] | None:
            found: dict[str, Any] = result(billing.rpc("GetTask", {"id": task["id"]}))
            return found if found["status"]["state"] == "TASK_STATE_COMPLETED" else None

        done = wait_for(completed, timeout=30)
        assert [a["name"] for a in done["artifacts"]] == ["refund"]
        paid = [json.loads(line) for line in ledger.read_text().splitlines()]
        assert [p["key"] for p in paid] == [f"{task['id']}/refund"]  # paid once
    finally:
        billing.stop()
