"""A handoff to an agent whose card offers gRPC alone: triage → billing, over gRPC.

Billing runs as `tests.integration.grpc_only_agent`: the example agent with `--grpc-port`,
its card listing the gRPC interface alone and every message sent to it over HTTP refused —
so a handoff it takes came over gRPC. Triage, a plain example agent, reads the card and
sends the signed envelope through the gRPC metadata and message as it would over JSON-RPC.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from a2a_handoff.failpoints import ENV_VAR, EXIT_CODE
from tests.integration.handoff_support import REFUND, ext, message, result, tasks_in, wait_for
from tests.support import AgentProcess, free_port


@contextmanager
def agents(tmp_path: Path, **billing_env: str) -> Iterator[tuple[AgentProcess, AgentProcess]]:
    """Triage routed to a billing agent reachable over gRPC alone, both started."""
    triage = AgentProcess("triage", f"sqlite:///{tmp_path / 'triage.db'}")
    billing = AgentProcess(
        "billing",
        f"sqlite:///{tmp_path / 'billing.db'}",
        module="tests.integration.grpc_only_agent",
        extra=(f"--grpc-port={free_port()}", f"--trust=triage={triage.url}"),
        env=billing_env,
    )
    triage.extra = (f"--route=billing={billing.url}", "--recovery-interval=0.3")
    for agent in (triage, billing):
        agent.log_path = tmp_path / f"{agent.name}.log"
    billing.start()
    try:
        triage.start()
        yield triage, billing
    finally:
        triage.stop()
        billing.stop()


def settled(agent: AgentProcess, task_id: str) -> dict[str, Any]:
    def check() -> dict[str, Any] | None:
        task: dict[str, Any] = result(agent.rpc("GetTask", {"id": task_id}))
        working = ("TASK_STATE_SUBMITTED", "TASK_STATE_WORKING")
        return task if task["status"]["state"] not in working else None

    found: dict[str, Any] = wait_for(check)
    return found


def test_the_billing_card_offers_grpc_alone_and_refuses_messages_over_http(
    tmp_path: Path,
) -> None:
    with agents(tmp_path) as (_, billing):
        card = httpx.get(billing.url + ".well-known/agent-card.json", timeout=10.0).json()
        assert [i["protocolBinding"] for i in card["supportedInterfaces"]] == ["GRPC"]
        refused = billing.rpc("SendMessage", message(REFUND))
        assert refused["error"]["code"] == -32601  # type: ignore[index]


def test_a_handoff_to_a_grpc_only_target_is_transferred_and_completes(tmp_path: Path) -> None:
    with agents(tmp_path) as (triage, billing):
        ctx = f"ctx-{uuid.uuid4()}"
        source = result(triage.rpc("SendMessage", message(REFUND, ctx)))["task"]
        assert ext(source)["state"] == "TRANSFERRED", source
        pointer = ext(source)["transfer"]
        assert pointer["agentName"] == "billing"
        assert pointer["contextId"] == ctx
        target = settled(billing, pointer["taskId"])
        assert target["history"][0]["referenceTaskIds"] == [source["id"]]
        assert target["status"]["state"] == "TASK_STATE_COMPLETED"
        assert target["artifacts"][0]["parts"][0]["data"]["orderId"] == "12345"
        received = result(billing.rpc("ListHandoffs", {"contextId": ctx}))["received"]
        assert [(e["outcome"], e["taskId"]) for e in received] == [("accepted", target["id"])]


def test_a_handoff_retried_over_grpc_creates_no_second_task(tmp_path: Path) -> None:
    # Billing dies once it created the task, before it answers: triage tries the same
    # envelope again over gRPC until billing is back, which answers with that task.
    with agents(tmp_path, **{ENV_VAR: "receive.after_create"}) as (triage, billing):
        ctx = f"ctx-{uuid.uuid4()}"
        sent = message(REFUND, ctx, returnImmediately=True)
        source = result(triage.rpc("SendMessage", sent))["task"]
        assert billing.proc is not None
        assert billing.proc.wait(30) == EXIT_CODE
        billing.env = {}
        billing.start()

        def transferred() -> dict[str, Any] | None:
            task: dict[str, Any] = result(triage.rpc("GetTask", {"id": source["id"]}))
            return task if ext(task).get("state") == "TRANSFERRED" else None

        pointer = ext(wait_for(transferred, timeout=30))["transfer"]
        successors = tasks_in(billing, ctx)
        assert [t["id"] for t in successors] == [pointer["taskId"]]
        received = result(billing.rpc("ListHandoffs", {"contextId": ctx}))["received"]
        assert [e["outcome"] for e in received] == ["accepted", "duplicate"]
        assert {e["taskId"] for e in received} == {pointer["taskId"]}
