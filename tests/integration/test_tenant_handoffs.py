"""Handoffs and delegations into a tenant, between real processes: an agent whose card names
a tenant ("acme", `--tenant`) receives there what other agents send it — the successor is
acme's (read in acme, -32001 without a tenant or in another), a retried envelope finds it
again in acme, and the same envelope sent in another tenant is not acme's task: never
answered with it, a handoff of its own there. On SQLite, Redis and PostgreSQL; a delegation
(its sub-task, the question it asks, the answer) into acme on SQLite, over JSON-RPC and to
an agent reachable over gRPC alone (the tenant in the gRPC requests)."""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from a2a_handoff.protocol.extension import HANDOFF_EXTENSION_URI as URI
from tests.integration import delegation_support
from tests.integration.delegation_support import ask, delegated, reply
from tests.integration.handoff_support import (
    REFUND,
    ext,
    make_agents,
    message,
    result,
    tasks_in,
    wait_for,
)
from tests.support import ROOT, AgentProcess, free_port, key_env

TASK_NOT_FOUND = -32001


def in_tenant(agent: AgentProcess, method: str, params: dict[str, Any], tenant: str | None) -> Any:
    named = params if tenant is None else {**params, "tenant": tenant}
    return agent.rpc(method, named, **{"A2A-Extensions": URI})


def code(answer: Any) -> int:
    assert "error" in answer, answer
    found: int = answer["error"]["code"]
    return found


def listed(agent: AgentProcess, context_id: str, tenant: str | None) -> list[str]:
    page = result(in_tenant(agent, "ListTasks", {"contextId": context_id}, tenant))
    return [task["id"] for task in page["tasks"]]


def settled_in(agent: AgentProcess, task_id: str, tenant: str) -> dict[str, Any]:
    def check() -> dict[str, Any] | None:
        task: dict[str, Any] = result(in_tenant(agent, "GetTask", {"id": task_id}, tenant))
        working = ("TASK_STATE_SUBMITTED", "TASK_STATE_WORKING")
        return task if task["status"]["state"] not in working else None

    found: dict[str, Any] = wait_for(check)
    return found


def resent(agent: AgentProcess, first: dict[str, Any], tenant: str | None) -> dict[str, Any]:
    """The handoff message `first` (its signed envelope and signature, as it arrived) sent to
    `agent` again, in `tenant`: a retry, or a replay by whoever holds a copy."""
    params = {
        "message": {
            "messageId": first["messageId"],
            "role": "ROLE_USER",
            "parts": first["parts"],
            "contextId": first["contextId"],
            "metadata": first["metadata"],
            "referenceTaskIds": first["referenceTaskIds"],
        },
        "configuration": {"returnImmediately": True},
    }
    task: dict[str, Any] = result(in_tenant(agent, "SendMessage", params, tenant))["task"]
    return task


@pytest.mark.timeout(120)
def test_a_handoff_to_an_agent_whose_card_names_a_tenant_is_received_in_it(
    stores: Callable[[str], str], tmp_path: Path
) -> None:
    agents = make_agents(tmp_path, stores=stores)
    agents.billing.extra = (*agents.billing.extra, "--tenant=acme")
    for agent in agents.all():
        agent.start()
    billing = agents.billing
    try:
        card = httpx.get(f"{billing.url}.well-known/agent-card.json", timeout=10).json()
        assert {i.get("tenant") for i in card["supportedInterfaces"]} == {"acme"}

        ctx = f"ctx-{uuid.uuid4()}"
        source = result(agents.triage.rpc("SendMessage", message(REFUND, ctx)))["task"]
        pointer = ext(source)["transfer"]
        assert ext(source)["state"] == "TRANSFERRED"
        successor = settled_in(billing, pointer["taskId"], "acme")
        assert successor["status"]["state"] == "TASK_STATE_COMPLETED"
        assert successor["artifacts"][0]["parts"][0]["data"]["orderId"] == "12345"
        # acme's: out of sight without a tenant, and in any other.
        for elsewhere in (None, "", "globex"):
            get = {"id": successor["id"]}
            assert code(in_tenant(billing, "GetTask", get, elsewhere)) == TASK_NOT_FOUND
            assert code(in_tenant(billing, "CancelTask", get, elsewhere)) == TASK_NOT_FOUND
            assert listed(billing, ctx, elsewhere) == []
        assert listed(billing, ctx, "acme") == [successor["id"]]

        # A retried envelope, in acme: the same task.
        first = successor["history"][0]
        again = resent(billing, first, "acme")
        assert again["id"] == successor["id"]
        assert ext(again)["duplicate"] is True
        # The same envelope in another tenant (or none): never acme's task, nothing of it
        # shown; a handoff of that tenant's own, itself found again by a retry there.
        made = {"acme": successor["id"]}
        for elsewhere in ("globex", None):
            other = resent(billing, first, elsewhere)
            assert other["id"] not in made.values()
            assert "duplicate" not in ext(other)
            assert resent(billing, first, elsewhere)["id"] == other["id"]
            made[str(elsewhere)] = other["id"]
        assert listed(billing, ctx, "acme") == [successor["id"]]
        assert listed(billing, ctx, "globex") == [made["globex"]]
        assert listed(billing, ctx, None) == [made["None"]]
        # triage's pointer still names acme's task, which is still the same one.
        assert settled_in(billing, pointer["taskId"], "acme")["id"] == successor["id"]
    finally:
        agents.stop()


@pytest.mark.timeout(120)
@pytest.mark.parametrize("grpc", [False, True], ids=["json-rpc", "grpc-alone"])
def test_a_delegation_to_an_agent_whose_card_names_a_tenant_is_worked_in_it(
    tmp_path: Path, grpc: bool
) -> None:
    agents = delegation_support.make_agents(tmp_path)
    grpc_port = (f"--grpc-port={free_port()}",) if grpc else ()
    agents.billing.extra = (*agents.billing.extra, "--tenant=acme", *grpc_port)
    agents.start()
    billing = agents.billing
    try:
        card = httpx.get(f"{billing.url}.well-known/agent-card.json", timeout=10).json()
        bindings = {i["protocolBinding"]: i.get("tenant") for i in card["supportedInterfaces"]}
        assert bindings == ({"GRPC": "acme"} if grpc else {"JSONRPC": "acme", "HTTP+JSON": "acme"})
        ctx = str(uuid.uuid4())
        task = ask(agents.triage, "refund order 12345 please", ctx)
        assert task["status"]["state"] == "TASK_STATE_COMPLETED", task
        outcome = delegated(task)
        assert outcome["data"] == {"orderId": "12345", "status": "refunded"}
        assert listed(billing, ctx, "acme") == [outcome["taskId"]]
        assert listed(billing, ctx, None) == []
        assert code(in_tenant(billing, "GetTask", {"id": outcome["taskId"]}, None)) == (
            TASK_NOT_FOUND
        )

        # The sub-task's question, followed and answered in acme too.
        ctx = str(uuid.uuid4())
        task = ask(agents.triage, "refund, a question first", ctx)
        assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", task
        [sub] = listed(billing, ctx, "acme")
        assert tasks_in(billing, ctx) == []
        task = reply(agents.triage, task, "order 4242")
        assert task["status"]["state"] == "TASK_STATE_COMPLETED", task
        assert delegated(task)["data"] == {"orderId": "order 4242", "status": "refunded"}
        answered = result(in_tenant(billing, "GetTask", {"id": sub}, "acme"))
        assert answered["status"]["state"] == "TASK_STATE_COMPLETED"
        assert len(agents.work(ctx)) == 2  # the question, then the work: once each
    finally:
        agents.stop()


@pytest.mark.timeout(60)
def test_an_agent_refuses_a_tenant_that_is_no_name_before_it_serves(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'echo.db'}"
    cmd = [sys.executable, "-m", "servers", "echo", f"--port={free_port()}", f"--store={store}"]
    done = subprocess.run(
        [*cmd, "--tenant=a/b"], cwd=ROOT, capture_output=True, text=True, timeout=50
    )
    assert done.returncode == 64, done.stderr
    assert "--tenant: tenant: 'a/b' is not a tenant name" in done.stderr


@pytest.mark.timeout(120)
def test_with_keys_the_user_and_the_sender_read_the_successor_in_its_tenant_alone(
    stores: Callable[[str], str], tmp_path: Path
) -> None:
    keys = tmp_path / "keys"
    keys.write_text("alice=k-alice\nbob=k-bob\ntriage=k-triage\n")
    agents = make_agents(tmp_path, f"--credential=billing={key_env('k-triage')}", stores=stores)
    for agent in (agents.billing, agents.triage):
        agent.extra = (*agent.extra, f"--auth-keys={keys}")
    agents.billing.extra = (*agents.billing.extra, "--tenant=acme")
    agents.billing.start()
    agents.triage.start()
    billing = agents.billing

    def get(key: str, task_id: str, tenant: str | None) -> Any:
        params = {"id": task_id} if tenant is None else {"id": task_id, "tenant": tenant}
        return billing.rpc("GetTask", params, **{"X-API-Key": key})

    try:
        ctx = f"ctx-{uuid.uuid4()}"
        alice = {"X-API-Key": "k-alice"}
        source = result(agents.triage.rpc("SendMessage", message(REFUND, ctx), **alice))["task"]
        successor = ext(source)["transfer"]["taskId"]
        # alice (for whom triage handed it over) and triage (which owns it) read it in acme …
        for key in ("k-alice", "k-triage"):
            assert result(get(key, successor, "acme"))["id"] == successor
            for elsewhere in (None, "globex"):
                assert code(get(key, successor, elsewhere)) == TASK_NOT_FOUND
        page = billing.rpc("ListTasks", {"contextId": ctx, "tenant": "acme"}, **alice)
        assert [t["id"] for t in result(page)["tasks"]] == [successor]
        page = billing.rpc("ListTasks", {"contextId": ctx}, **alice)
        assert result(page)["tasks"] == []
        # … and bob neither there nor anywhere.
        for tenant in ("acme", None):
            assert code(get("k-bob", successor, tenant)) == TASK_NOT_FOUND
        # A user holding a copy of the signed envelope delivers nothing, in any tenant.
        first = result(get("k-alice", successor, "acme"))["history"][0]
        for tenant in ("acme", "globex"):
            params = {"message": {**first, "messageId": str(uuid.uuid4())}, "tenant": tenant}
            params["message"].pop("taskId", None)
            replayed = result(billing.rpc("SendMessage", params, **{"X-API-Key": "k-bob"}))
            assert replayed["task"]["status"]["state"] == "TASK_STATE_REJECTED"
            assert ext(replayed["task"])["rejected"] == "untrusted_source"
    finally:
        agents.stop()
