"""Handoff contracts enforced by real agents: refusals, rejections and every recovery path."""

from __future__ import annotations

import shutil
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.integration.handoff_support import REFUND, ext, message, result, tasks_in, wait_for
from tests.support import ROOT, AgentProcess, _http, free_port, wire_trust

SHIPPED = ROOT / "contracts"
SHIPPING = "Where is my package? order 12345, the tracking shows nothing"


def copy_contracts(tmp: Path, name: str) -> Path:
    directory = tmp / f"contracts-{name}"
    shutil.copytree(SHIPPED, directory)
    return directory


def edit(directory: Path, name: str, change: Callable[[dict[str, Any]], None]) -> None:
    path = directory / f"{name}.yaml"
    data = yaml.safe_load(path.read_text())
    change(data)
    path.write_text(yaml.safe_dump(data, sort_keys=False))


def agent(tmp: Path, name: str, contracts: Path, *extra: str, **kw: Any) -> AgentProcess:
    process = AgentProcess(
        name,
        f"sqlite:///{tmp / name}-{uuid.uuid4().hex[:6]}.db",
        extra=("--recovery-interval", "0.3", "--contracts", str(contracts), *extra),
        **kw,
    )
    process.log_path = tmp / f"{name}.log"
    return process


@pytest.fixture
def started() -> Iterator[list[AgentProcess]]:
    processes: list[AgentProcess] = []
    yield processes
    for process in processes:
        process.stop()


def run(started: list[AgentProcess], *processes: AgentProcess) -> None:
    wire_trust(processes)
    for process in processes:
        started.append(process)
        process.start()


def sent(source: AgentProcess, context: str) -> list[dict[str, Any]]:
    handoffs: list[dict[str, Any]] = result(source.rpc("ListHandoffs", {"contextId": context}))[
        "sent"
    ]
    return handoffs


def final(source: AgentProcess, context: str) -> dict[str, Any]:
    def settled() -> dict[str, Any] | None:
        tasks = tasks_in(source, context)
        done = tasks and ext(tasks[0]).get("state") in ("TRANSFERRED", "FAILED")
        return tasks[0] if done else None

    found: dict[str, Any] = wait_for(settled, timeout=20)
    return found


def text_of(task: dict[str, Any]) -> str:
    return str(task["status"]["message"]["parts"][0]["text"])


def test_handoffs_run_under_the_shipped_contracts_and_cards_list_them(
    tmp_path: Path, started: list[AgentProcess]
) -> None:
    billing = agent(tmp_path, "billing", SHIPPED)
    triage = agent(tmp_path, "triage", SHIPPED, f"--route=billing={billing.url}")
    run(started, billing, triage)
    context = str(uuid.uuid4())
    source = result(triage.rpc("SendMessage", message(REFUND, context)))["task"]
    assert ext(source)["state"] == "TRANSFERRED"
    card = _http().get(billing.url + ".well-known/agent-card.json").json()
    params = card["capabilities"]["extensions"][0]["params"]
    assert {"id": "triage-to-billing", "version": "1.0.0"} in params["contracts"]
    assert {"id": "human-to-source", "version": "1.0.0"} in params["contracts"]
    (entry,) = sent(triage, context)
    assert entry["contract"] == "triage-to-billing@1.0.0"
    assert entry["auditEvent"] == "handoff.triage_to_billing"
    assert entry["metrics"] == ["handoff.latency_ms", "handoff.rejected"]
    assert 0 <= entry["latencyMs"] < 10_000


def test_a_handoff_without_a_contract_is_refused_and_nothing_is_sent(
    tmp_path: Path, started: list[AgentProcess]
) -> None:
    mine = copy_contracts(tmp_path, "triage")
    (mine / "triage-to-logistics.yaml").unlink()
    logistics = agent(tmp_path, "logistics", SHIPPED)
    triage = agent(tmp_path, "triage", mine, f"--route=logistics={logistics.url}")
    run(started, logistics, triage)
    context = str(uuid.uuid4())
    task = result(triage.rpc("SendMessage", message(SHIPPING, context)))["task"]
    assert task["status"]["state"] == "TASK_STATE_FAILED"
    assert "no handoff contract for the edge triage → logistics" in text_of(task)
    assert tasks_in(logistics, context) == []
    assert sent(triage, context) == []


def test_a_payload_that_violates_its_schema_never_leaves_the_source(
    tmp_path: Path, started: list[AgentProcess]
) -> None:
    mine = copy_contracts(tmp_path, "triage")
    schema = mine / "schemas" / "billing-request.schema.json"
    schema.write_text(schema.read_text().replace('"maxLength": 500', '"maxLength": 10'))
    billing = agent(tmp_path, "billing", SHIPPED)
    triage = agent(tmp_path, "triage", mine, f"--route=billing={billing.url}")
    run(started, billing, triage)
    context = str(uuid.uuid4())
    task = result(triage.rpc("SendMessage", message(REFUND, context)))["task"]
    assert task["status"]["state"] == "TASK_STATE_FAILED"
    reason = text_of(task)
    assert "contract triage-to-billing refused the transfer context" in reason
    assert "schema: summary" in reason
    assert "is too long" in reason
    assert tasks_in(billing, context) == []
    assert result(billing.rpc("ListHandoffs", {"contextId": context}))["received"] == []
    assert sent(triage, context) == []


def not_granted(tmp: Path) -> Path:
    """Contracts for a billing the permission registry does not grant refunds.issue to."""
    theirs = copy_contracts(tmp, "billing")
    permissions = theirs / "permissions.yaml"
    data = yaml.safe_load(permissions.read_text())
    data["permissions"]["refunds.issue"] = ["nobody"]
    permissions.write_text(yaml.safe_dump(data))
    return theirs


def test_a_failed_acceptance_criterion_rejects_and_on_reject_source_fails_the_task(
    tmp_path: Path, started: list[AgentProcess]
) -> None:
    billing = agent(tmp_path, "billing", not_granted(tmp_path))
    triage = agent(tmp_path, "triage", SHIPPED, f"--route=billing={billing.url}")
    run(started, billing, triage)
    context = str(uuid.uuid4())
    task = result(triage.rpc("SendMessage", message(REFUND, context)))["task"]
    assert task["status"]["state"] == "TASK_STATE_FAILED"
    reason = text_of(task)
    assert "contract_rejected" in reason
    assert "permission_check: billing does not hold refunds.issue" in reason
    assert "(triage-to-billing: on_reject → source)" in reason
    (rejected,) = tasks_in(billing, context)
    assert rejected["status"]["state"] == "TASK_STATE_REJECTED"


def test_on_reject_human_escalates_the_task(tmp_path: Path, started: list[AgentProcess]) -> None:
    mine = copy_contracts(tmp_path, "triage")
    edit(mine, "triage-to-billing", lambda c: c["recovery"].update(on_reject="human"))
    human = agent(tmp_path, "human", SHIPPED)
    billing = agent(tmp_path, "billing", not_granted(tmp_path))
    triage = agent(
        tmp_path, "triage", mine, f"--route=billing={billing.url}", f"--route=human={human.url}"
    )
    run(started, human, billing, triage)
    context = str(uuid.uuid4())
    result(triage.rpc("SendMessage", message(REFUND, context)))
    source = final(triage, context)
    assert ext(source)["state"] == "TRANSFERRED"
    assert ext(source)["transfer"]["agentName"] == "human"
    (held,) = tasks_in(human, context)
    assert held["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    escalation = ext(held)["escalation"]
    assert "permission_check: billing does not hold refunds.issue" in escalation["whatHappened"]
    first, second = sent(triage, context)
    assert (first["status"], second["status"]) == ("failed", "done")
    assert "on_reject → human" in first["detail"]["reason"]


def test_on_reject_can_name_a_fallback_agent(tmp_path: Path, started: list[AgentProcess]) -> None:
    mine = copy_contracts(tmp_path, "triage")
    edit(mine, "triage-to-billing", lambda c: c["recovery"].update(on_reject="agent:backup"))
    billing = agent(tmp_path, "billing", not_granted(tmp_path))
    backup = agent(tmp_path, "billing", SHIPPED)  # a correctly configured billing
    triage = agent(
        tmp_path, "triage", mine, f"--route=billing={billing.url}", f"--route=backup={backup.url}"
    )
    run(started, billing, backup, triage)
    context = str(uuid.uuid4())
    result(triage.rpc("SendMessage", message(REFUND, context)))
    source = final(triage, context)
    assert ext(source)["state"] == "TRANSFERRED"
    assert ext(source)["transfer"]["agentUrl"] == backup.url
    (done,) = tasks_in(backup, context)
    assert wait_for(
        lambda: (
            result(backup.rpc("GetTask", {"id": done["id"]}))["status"]["state"]
            == "TASK_STATE_COMPLETED"
        )
    )


def test_on_error_follows_after_max_retries(tmp_path: Path, started: list[AgentProcess]) -> None:
    mine = copy_contracts(tmp_path, "triage")
    edit(
        mine,
        "triage-to-billing",
        lambda c: c["recovery"].update(on_error="agent:backup", max_retries=2),
    )
    broken = AgentProcess(
        "billing", "unused", module="tests.integration.broken_agent", port=free_port()
    )
    backup = agent(tmp_path, "billing", SHIPPED)
    triage = agent(
        tmp_path, "triage", mine, f"--route=billing={broken.url}", f"--route=backup={backup.url}"
    )
    run(started, broken, backup, triage)
    context = str(uuid.uuid4())
    result(triage.rpc("SendMessage", message(REFUND, context)))
    source = final(triage, context)
    assert ext(source)["transfer"]["agentUrl"] == backup.url
    assert _http().get(broken.url + "count").json()["SendMessage"] == 3  # 1 + max_retries
    first, _ = sent(triage, context)
    assert "failed 3 time(s)" in first["detail"]["reason"]
    assert "on_error → backup" in first["detail"]["reason"]


def test_on_timeout_when_the_target_stays_unreachable(
    tmp_path: Path, started: list[AgentProcess]
) -> None:
    mine = copy_contracts(tmp_path, "triage")
    edit(
        mine,
        "triage-to-billing",
        lambda c: c["recovery"].update(on_timeout="agent:backup", timeout_ms=800),
    )
    nowhere = f"http://127.0.0.1:{free_port()}/"  # nobody listens: requests never arrive
    backup = agent(tmp_path, "billing", SHIPPED)
    triage = agent(
        tmp_path, "triage", mine, f"--route=billing={nowhere}", f"--route=backup={backup.url}"
    )
    run(started, backup, triage)
    context = str(uuid.uuid4())
    task = result(triage.rpc("SendMessage", message(REFUND, context)))["task"]
    assert ext(task)["transfer"]["agentUrl"] == backup.url
    first, second = sent(triage, context)
    assert "unreachable for over 800 ms" in first["detail"]["reason"]
    assert "on_timeout → backup" in first["detail"]["reason"]
    assert second["status"] == "done"


def test_a_contract_dedupe_key_makes_one_task_per_order_within_its_window(
    tmp_path: Path, started: list[AgentProcess]
) -> None:
    mine = copy_contracts(tmp_path, "billing")
    edit(
        mine,
        "triage-to-billing",
        lambda c: c["idempotency"].update(
            dedupe_key="payload.entities.orderId", replay_window_ms=1500
        ),
    )
    billing = agent(tmp_path, "billing", mine)
    triage = agent(tmp_path, "triage", SHIPPED, f"--route=billing={billing.url}")
    run(started, billing, triage)

    def refund(text: str) -> str:
        task = result(triage.rpc("SendMessage", message(text, str(uuid.uuid4()))))["task"]
        pointer: str = ext(task)["transfer"]["taskId"]
        return pointer

    first = refund("Refund order 55501 please, I was charged twice")
    again = refund("I want my refund for order 55501, it is urgent")  # another conversation
    other = refund("Refund order 55502 please")
    assert again == first  # the same order within the window: one billing task
    assert other != first
    time.sleep(1.7)
    later = refund("Refund order 55501 please, I was charged twice")
    assert later != first  # the window is over: a new task


def test_a_non_idempotent_edge_is_never_retried(
    tmp_path: Path, started: list[AgentProcess]
) -> None:
    mine = copy_contracts(tmp_path, "triage")

    def once(c: dict[str, Any]) -> None:
        c["idempotency"].update(idempotent=False)
        c["recovery"].update(on_error="source", max_retries=5)  # the linter flags this

    edit(mine, "triage-to-billing", once)
    broken = AgentProcess(
        "billing", "unused", module="tests.integration.broken_agent", port=free_port()
    )
    triage = agent(tmp_path, "triage", mine, f"--route=billing={broken.url}")
    run(started, broken, triage)
    context = str(uuid.uuid4())
    task = result(triage.rpc("SendMessage", message(REFUND, context)))["task"]
    assert task["status"]["state"] == "TASK_STATE_FAILED"
    assert "(triage-to-billing: on_error → source)" in text_of(task)
    assert _http().get(broken.url + "count").json()["SendMessage"] == 1
