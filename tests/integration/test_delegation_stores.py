"""Delegation on the shared stores (Redis, PostgreSQL): the store-specific parts — the outbox
entry and the task's journal written in one transaction, the outcome recorded as the entry
closes, the replay after a kill -9 — on each. The rest of delegation is store-independent and
tested on SQLite (`test_delegation.py`).

Triage and billing keep their state in one Redis (a key prefix each), then in one PostgreSQL
database (a schema each), shared by the module's tests; the replica test starts its own
agents (two replicas of triage on one Redis).
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from a2a_handoff.failpoints import ENV_VAR, EXIT_CODE
from tests.integration.delegation_support import (
    Agents,
    ask,
    delegated,
    dies_at,
    make_agents,
    reply,
    settled,
)
from tests.integration.handoff_support import ext, result, tasks_in
from tests.postgres_support import PostgresDatabase
from tests.redis_support import RedisServer


@pytest.fixture(scope="module", params=["redis", "postgres"])
def agents(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Agents]:
    server: RedisServer | PostgresDatabase = request.getfixturevalue(
        "redis_server" if request.param == "redis" else "postgres_database"
    )
    urls: dict[str, str] = {}
    tmp = tmp_path_factory.mktemp(f"delegation-{request.param}")
    found = make_agents(tmp, lambda name: urls.setdefault(name, server.store_url())).start()
    yield found
    found.stop()


def test_delegation_round_trip(agents: Agents) -> None:
    ctx = str(uuid.uuid4())
    task = ask(agents.triage, "refund order 12345 please", ctx)
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    outcome = delegated(task)
    assert outcome["state"] == "COMPLETED"
    assert outcome["data"] == {"orderId": "12345", "status": "refunded"}
    [record] = ext(task)["delegations"].values()
    assert record["rounds"][0]["taskId"] == outcome["taskId"]
    [sub] = tasks_in(agents.billing, ctx)
    assert sub["id"] == outcome["taskId"]
    # the outbox entry, closed with the outcome in the same write
    [entry] = result(agents.triage.rpc("ListHandoffs", {"contextId": ctx}))["sent"]
    assert entry["handoffId"] == record["handoffId"]
    assert (entry["status"], entry["detail"]) == ("done", {"reason": "completed"})
    assert len(agents.work(ctx)) == 1


@pytest.mark.timeout(60)
@pytest.mark.parametrize("point", ["delegate.after_send", "delegate.after_answer"])
def test_kill_delegator_and_the_restart_replays(agents: Agents, point: str) -> None:
    """kill -9 of triage after the request left / after billing answered: the restart resumes
    the task from the shared store and ends it with billing's one outcome."""
    ctx = str(uuid.uuid4())
    with dies_at(agents.triage, point):
        ask(agents.triage, "refund order 31337", ctx, returnImmediately=True)
    task = settled(agents.triage, ctx)
    assert task["status"]["state"] == "TASK_STATE_COMPLETED", task["status"]
    outcome = delegated(task)
    assert outcome["data"] == {"orderId": "31337", "status": "refunded"}
    [sub] = tasks_in(agents.billing, ctx)
    assert sub["id"] == outcome["taskId"]
    assert len(agents.work(ctx)) == 1


def test_delegate_asks_and_the_user_answers(agents: Agents) -> None:
    ctx = str(uuid.uuid4())
    task = ask(agents.triage, "refund, a question first", ctx)
    assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    task = reply(agents.triage, task, "order 4242")
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert delegated(task)["data"] == {"orderId": "order 4242", "status": "refunded"}
    [sub] = tasks_in(agents.billing, ctx)  # the same sub-task, answered
    assert sub["status"]["state"] == "TASK_STATE_COMPLETED"
    assert len(agents.work(ctx)) == 2


@pytest.mark.timeout(60)
def test_a_replica_killed_mid_delegation_leaves_it_to_the_other(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    """Two replicas of triage on one Redis: the one running the handler dies (kill -9) after
    the request left; the other takes the task over once its lease lapses, runs the handler
    again and ends it with billing's one outcome — the same sub-task, the work done once."""
    urls: dict[str, str] = {}
    agents = make_agents(
        tmp_path, lambda name: urls.setdefault(name, redis_server.store_url()), replicas=2
    )
    first, [second] = agents.triage, agents.others
    first.env = {ENV_VAR: "delegate.after_send"}
    agents.start()
    try:
        ctx = str(uuid.uuid4())
        with contextlib.suppress(httpx.HTTPError):  # it dies mid-request: the point
            ask(first, "refund order 4711", ctx)
        assert first.proc is not None
        assert first.proc.wait(20) == EXIT_CODE
        task = settled(second, ctx)
        assert task["status"]["state"] == "TASK_STATE_COMPLETED", task["status"]
        outcome = delegated(task)
        assert outcome["data"] == {"orderId": "4711", "status": "refunded"}
        [sub] = tasks_in(agents.billing, ctx)
        assert sub["id"] == outcome["taskId"]
        assert len(agents.work(ctx)) == 1
    finally:
        agents.stop()
