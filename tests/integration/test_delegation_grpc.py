"""A delegation to an agent reachable over gRPC alone: triage asks billing, which serves
`--grpc-port` with a card offering gRPC alone and refuses messages over HTTP — so the
sub-task is created, followed (SubscribeToTask, GetTask), answered and canceled over gRPC."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import httpx
import pytest

from tests.integration.delegation_support import Agents, ask, delegated, make_agents
from tests.integration.handoff_support import ext, message, result, tasks_in, wait_for
from tests.support import free_port


@pytest.fixture(scope="module")
def agents(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Agents]:
    agents = make_agents(tmp_path_factory.mktemp("delegation-grpc"))
    agents.billing.extra = (*agents.billing.extra, f"--grpc-port={free_port()}")
    agents.start()
    try:
        card = httpx.get(agents.billing.url + ".well-known/agent-card.json", timeout=10).json()
        assert [i["protocolBinding"] for i in card["supportedInterfaces"]] == ["GRPC"]
        yield agents
    finally:
        agents.stop()


def test_delegation_over_grpc_returns_the_delegates_outcome(agents: Agents) -> None:
    ctx = str(uuid.uuid4())
    task = ask(agents.triage, "refund order 12345 please", ctx)
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    outcome = delegated(task)
    assert outcome["state"] == "COMPLETED"
    assert outcome["data"] == {"orderId": "12345", "status": "refunded"}
    [sub] = tasks_in(agents.billing, ctx)
    assert sub["id"] == outcome["taskId"]
    assert sub["status"]["state"] == "TASK_STATE_COMPLETED"
    assert ext(sub)["handoff"]["kind"] == "delegation"
    assert len(agents.work(ctx)) == 1


def test_the_delegate_s_question_is_answered_over_grpc(agents: Agents) -> None:
    ctx = str(uuid.uuid4())
    task = ask(agents.triage, "refund, a question first", ctx)
    assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    reply = message("order 4242", ctx)
    reply["message"]["taskId"] = task["id"]
    task = result(agents.triage.rpc("SendMessage", reply))["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert delegated(task)["data"] == {"orderId": "order 4242", "status": "refunded"}
    [sub] = tasks_in(agents.billing, ctx)  # the same sub-task, answered
    assert sub["status"]["state"] == "TASK_STATE_COMPLETED"


def test_a_cancel_cascades_over_grpc(agents: Agents) -> None:
    ctx = str(uuid.uuid4())
    task = ask(agents.triage, "hang on 777", ctx, returnImmediately=True)
    wait_for(lambda: agents.work(ctx))
    canceled = result(agents.triage.rpc("CancelTask", {"id": task["id"]}))
    assert canceled["status"]["state"] == "TASK_STATE_CANCELED"
    [sub] = tasks_in(agents.billing, ctx)
    assert sub["status"]["state"] == "TASK_STATE_CANCELED"
