"""Escalation to a human, end to end: real agents, the operator's CLI, the user's session."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.integration.handoff_support import ext, message, result, tasks_in, wait_for
from tests.support import AgentProcess, Cli, wire_trust

BIG_REFUND = "I was charged twice, I want a refund of $750 for order 4242"
FAST = ("--recovery-interval", "0.3")


@dataclass
class Desk:
    triage: AgentProcess
    billing: AgentProcess
    human: AgentProcess
    clerk: AgentProcess

    def all(self) -> list[AgentProcess]:
        return [self.human, self.billing, self.triage, self.clerk]


def _agent(tmp: Path, name: str, *extra: str, module: str = "servers") -> AgentProcess:
    agent = AgentProcess(name, f"sqlite:///{tmp / name}.db", extra=(*FAST, *extra))
    agent.module = module
    agent.log_path = tmp / f"{name}.log"
    return agent


@pytest.fixture(scope="module")
def desk(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Desk]:
    tmp = tmp_path_factory.mktemp("escalation")
    human = _agent(tmp, "human")
    billing = _agent(tmp, "billing", f"--route=human={human.url}")
    triage = _agent(tmp, "triage", f"--route=billing={billing.url}")
    clerk = _agent(
        tmp, "clerk", f"--route=human={human.url}", module="tests.integration.escalating_agent"
    )
    desk = Desk(triage, billing, human, clerk)
    wire_trust(desk.all())
    for agent in desk.all():
        agent.start()
    try:
        yield desk
    finally:
        for agent in desk.all():
            agent.stop()


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    return Cli(tmp_path / "session.json")


def inbox(cli: Cli, human: AgentProcess) -> list[dict[str, Any]]:
    code, items = cli.events("inbox", "--agent", human.url)
    assert code == 0
    return items


def waiting_from(cli: Cli, human: AgentProcess, source_task: str) -> dict[str, Any]:
    """The inbox entry of the escalation `source_task` made, once it is there."""

    def find() -> dict[str, Any] | None:
        return next((i for i in inbox(cli, human) if i["sourceTaskId"] == source_task), None)

    found: dict[str, Any] = wait_for(find, timeout=20)
    return found


def session_task(cli: Cli, agent_name: str) -> str:
    """The task of `agent_name` the user's session went through first."""
    session = json.loads(cli.session.read_text())
    return next(h["task_id"] for h in session["chain"] if h["agent_name"] == agent_name)


def with_artifacts(agent: AgentProcess, context_id: str) -> list[dict[str, Any]]:
    """The tasks of a context that published artifacts (a refund, here)."""
    params = {"contextId": context_id, "includeArtifacts": True}
    tasks: list[dict[str, Any]] = result(agent.rpc("ListTasks", params))["tasks"]
    return [t for t in tasks if t.get("artifacts")]


def by_kind(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [e for e in events if e["event"] == kind]


# -- the large refund: approve / deny ----------------------------------------------------


def test_a_large_refund_waits_for_an_operator_and_completes_once_approved(
    desk: Desk, cli: Cli, tmp_path: Path
) -> None:
    user = cli.start("--wait", "60", "send", "--entry", desk.triage.url, BIG_REFUND)
    operator = Cli(tmp_path / "operator.json")
    billing_task = wait_for(lambda: cli.session.exists() and session_task(cli, "billing"))
    item = waiting_from(operator, desk.human, billing_task)
    # The inbox entry carries its age, its source and all three parts of the message.
    assert item["source"] == "billing"
    assert item["tier"] == "blocking"
    assert item["trigger"] == "high_impact"
    assert item["need"] == "permission"
    assert "$750.00" in item["whatHappened"]
    assert any("nothing has been paid out" in t for t in item["whatWasTried"])
    assert item["whatIsNeeded"] == "permission to refund $750.00 on order 4242"
    assert item["ageSeconds"] >= 0
    # Before the operator answers, nothing was refunded.
    assert not with_artifacts(desk.billing, item["contextId"])

    code, out = operator.run("approve", item["taskId"], "verified", "--agent", desk.human.url)
    assert code == 0, out

    code, events = Cli.finish(user)
    assert code == 0, events
    assert by_kind(events, "escalated")[0]["text"] == item["whatIsNeeded"]
    hops = [(e["from"], e["to"]) for e in by_kind(events, "transferred")]
    assert hops == [("triage", "billing"), ("billing", "human"), ("human", "billing")]
    refund = by_kind(events, "artifact")[0]["parts"][0]["data"]
    assert refund == {"orderId": "4242", "amount": 750.0, "status": "refunded"}
    assert events[-1]["event"] == "completed"
    assert events[-1]["agent"] == "billing"
    # Exactly one refund, on the task the decision came back to.
    refunded = with_artifacts(desk.billing, item["contextId"])
    assert len(refunded) == 1
    assert refunded[0]["id"] == events[-1]["taskId"]
    assert not [i for i in inbox(operator, desk.human) if i["taskId"] == item["taskId"]]


def test_a_denied_refund_reaches_the_user_as_a_refusal(
    desk: Desk, cli: Cli, tmp_path: Path
) -> None:
    user = cli.start("--wait", "60", "send", "--entry", desk.triage.url, BIG_REFUND)
    operator = Cli(tmp_path / "operator.json")
    billing_task = wait_for(lambda: cli.session.exists() and session_task(cli, "billing"))
    item = waiting_from(operator, desk.human, billing_task)
    code, out = operator.run(
        "deny", item["taskId"], "the order was already refunded", "--agent", desk.human.url
    )
    assert code == 0, out
    code, events = Cli.finish(user)
    assert code == 1, events
    assert events[-1]["event"] == "rejected", events[-3:]
    assert events[-1]["event"] == "rejected"
    assert events[-1]["agent"] == "billing"
    assert "denied by operator: the order was already refunded" in events[-1]["text"]
    assert not by_kind(events, "artifact")
    assert not with_artifacts(desk.billing, item["contextId"])


def test_a_send_while_the_operator_decides_is_not_taken_as_the_answer(
    desk: Desk, cli: Cli, tmp_path: Path
) -> None:
    code, events = cli.events("--wait", "2", "send", "--entry", desk.triage.url, BIG_REFUND)
    assert code == 4
    assert by_kind(events, "escalated")
    assert "waiting for a human operator" in events[-1]["message"]
    operator = Cli(tmp_path / "operator.json")
    item = waiting_from(operator, desk.human, session_task(cli, "billing"))
    # The user writes again: the message must not answer the escalation in their place.
    code, events = cli.events("--wait", "1", "send", "approve")
    assert code == 6  # not delivered
    assert "your message was not delivered" in events[-1]["message"]
    assert any(i["taskId"] == item["taskId"] for i in inbox(operator, desk.human))
    operator.run("approve", item["taskId"], "--agent", desk.human.url)
    code, events = cli.events("watch", item["taskId"], "--agent", desk.human.url)
    assert code == 0
    assert events[-1]["event"] == "completed"


# -- the other triggers ------------------------------------------------------------------


def test_repeated_failure_escalates_on_its_own_listing_the_failures(desk: Desk, cli: Cli) -> None:
    context = str(uuid.uuid4())
    states = []
    for _ in range(3):
        task = result(desk.clerk.rpc("SendMessage", message("please fail", context)))["task"]
        states.append(task["status"]["state"])
    assert states[:2] == ["TASK_STATE_FAILED", "TASK_STATE_FAILED"]
    assert (
        states[2] == "TASK_STATE_COMPLETED"
    )  # TRANSFERRED, as a client without the extension sees it
    third = tasks_in(desk.clerk, context)[0]
    assert ext(third)["state"] == "TRANSFERRED"
    item = waiting_from(cli, desk.human, third["id"])
    assert item["trigger"] == "repeated_failure"
    assert item["need"] == "decision"
    assert "GatewayTimeout" in item["whatHappened"]
    assert len(item["whatWasTried"]) == 3
    assert all("payment gateway timed out" in t for t in item["whatWasTried"])
    failed = {t["id"] for t in tasks_in(desk.clerk, context)} - {third["id"]}
    assert all(any(f in t for t in item["whatWasTried"]) for f in failed)


def test_a_declared_value_uncertainty_escalates_and_the_reply_comes_back(
    desk: Desk, cli: Cli
) -> None:
    context = str(uuid.uuid4())
    task = result(desk.clerk.rpc("SendMessage", message("I am unsure", context)))["task"]
    item = waiting_from(cli, desk.human, task["id"])
    assert item["trigger"] == "value_uncertainty"
    assert item["whatIsNeeded"].startswith("should the account be closed")
    code, out = cli.run(
        "reply", item["taskId"], "settle", "the", "orders", "first", "--agent", desk.human.url
    )
    assert code == 0, out

    def answered() -> dict[str, Any] | None:
        done = [
            t
            for t in tasks_in(desk.clerk, context)
            if t["status"]["state"] == "TASK_STATE_COMPLETED" and t["id"] != task["id"]
        ]
        return done[0] if done else None

    back = wait_for(answered)
    text = back["status"]["message"]["parts"][0]["text"]
    assert text == "decision received: answered by operator: settle the orders first"


def test_an_incomplete_escalation_is_refused_and_nothing_reaches_the_human(
    desk: Desk, cli: Cli
) -> None:
    before = len(inbox(cli, desk.human))
    task = result(desk.clerk.rpc("SendMessage", message("send an incomplete one")))["task"]
    assert task["status"]["state"] == "TASK_STATE_FAILED"
    reason = task["status"]["message"]["parts"][0]["text"]
    assert "an escalation must say what happened" in reason
    assert len(inbox(cli, desk.human)) == before


def test_a_non_blocking_escalation_informs_the_human_and_the_task_goes_on(
    desk: Desk, cli: Cli
) -> None:
    context = str(uuid.uuid4())
    task = result(desk.clerk.rpc("SendMessage", message("notify the human", context)))["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    item = waiting_from(cli, desk.human, task["id"])
    assert item["tier"] == "non-blocking"
    assert item["taskId"] in task["status"]["message"]["parts"][0]["text"]
    # The operator may still intervene: the answer comes back as a new task.
    code, _ = cli.run("deny", item["taskId"], "looks like fraud", "--agent", desk.human.url)
    assert code == 0
    back = wait_for(lambda: [t for t in tasks_in(desk.clerk, context) if t["id"] != task["id"]])[0]
    wait_for(lambda: "denied" in str(tasks_in(desk.clerk, context)))
    assert back["contextId"] == context


# -- durability and the timeout fallback -------------------------------------------------


def test_a_restart_of_the_human_agent_loses_nothing(desk: Desk, cli: Cli) -> None:
    context = str(uuid.uuid4())
    task = result(desk.clerk.rpc("SendMessage", message("I am unsure", context)))["task"]
    item = waiting_from(cli, desk.human, task["id"])
    desk.human.kill()
    desk.human.start()
    again = waiting_from(cli, desk.human, task["id"])
    assert again["taskId"] == item["taskId"]
    assert again["whatWasTried"] == item["whatWasTried"]
    code, _ = cli.run("approve", item["taskId"], "--agent", desk.human.url)
    assert code == 0
    wait_for(lambda: "approved by operator" in str(tasks_in(desk.clerk, context)))


def test_an_unanswered_escalation_follows_the_deny_fallback(
    desk: Desk, cli: Cli, tmp_path: Path
) -> None:
    human = _agent(tmp_path, "human", "--answer-within", "1", "--check-every", "0.2")
    billing = _agent(tmp_path, "billing", f"--route=human={human.url}")
    wire_trust([human, billing])
    human.start()
    billing.start()
    try:
        context = str(uuid.uuid4())
        msg = message("refund $900 for order 5150", context)
        first = result(billing.rpc("SendMessage", msg))["task"]
        assert ext(first)["state"] == "TRANSFERRED"

        def refused() -> dict[str, Any] | None:
            done = [t for t in tasks_in(billing, context) if t["id"] != first["id"]]
            return done[0] if done and done[0]["status"]["state"] == "TASK_STATE_REJECTED" else None

        back = wait_for(refused, timeout=20)
        reason = back["status"]["message"]["parts"][0]["text"]
        assert "denied by fallback" in reason
        assert "no operator answered within 1 s" in reason
        held = tasks_in(human, context)[0]
        assert ext(held)["state"] == "TRANSFERRED"
        assert "fallback denies it" in ext(held)["transfer"]["reason"]
    finally:
        billing.stop()
        human.stop()


def test_an_unanswered_escalation_can_go_to_a_named_agent(
    desk: Desk, cli: Cli, tmp_path: Path
) -> None:
    # A first-line human desk that forwards to a supervisor (another human agent), which
    # returns its decision to the billing that escalated: it trusts that billing by name.
    supervisor = _agent(tmp_path / "sup", "human", "--trust-max-age", "1")
    first_line = _agent(
        tmp_path,
        "human",
        "--answer-within",
        "1",
        "--check-every",
        "0.2",
        "--fallback",
        "supervisor",
        f"--route=supervisor={supervisor.url}",
    )
    billing = _agent(tmp_path, "billing", f"--route=human={first_line.url}")
    wire_trust([first_line, billing, supervisor])
    supervisor.extra = (*supervisor.extra, f"--trust=billing={billing.url}")
    # The first-line desk forwards: the supervisor trusts it as a desk (`approvals: true`),
    # so the desk's `returnTo` (billing) is where the decision goes; from an ordinary agent
    # it would go back to that agent.
    desks = tmp_path / "desks.yaml"
    desks.write_text(f"agents:\n  - {{name: human, url: '{first_line.url}', approvals: true}}\n")
    supervisor.extra = (*supervisor.extra, f"--trust-file={desks}")
    # The supervisor's decisions reach billing: billing trusts it to approve.
    approvers = tmp_path / "approvers.yaml"
    approvers.write_text(
        f"agents:\n  - {{name: human, url: '{supervisor.url}', approvals: true}}\n"
    )
    billing.extra = (*billing.extra, f"--trust-file={approvers}")
    (tmp_path / "sup").mkdir()
    supervisor.start()
    first_line.start()
    billing.start()
    try:
        context = str(uuid.uuid4())
        first = result(billing.rpc("SendMessage", message("refund $640 for order 6006", context)))
        held = wait_for(
            lambda: [t for t in tasks_in(first_line, context) if ext(t).get("transfer")]
        )[0]
        assert "handed to supervisor" in ext(held)["transfer"]["reason"]
        item = wait_for(lambda: [i for i in inbox(cli, supervisor) if i["contextId"] == context])[0]
        assert item["whatIsNeeded"] == "permission to refund $640.00 on order 6006"
        code, _ = cli.run("approve", item["taskId"], "--agent", supervisor.url)
        assert code == 0

        # The decision goes back to billing — the agent that escalated — not to the desk.
        def refunded() -> list[dict[str, Any]]:
            return with_artifacts(billing, context)

        done = wait_for(refunded, timeout=20)[0]
        assert done["artifacts"][0]["parts"][0]["data"]["amount"] == 640.0
        assert first["task"]["id"] != done["id"]
    finally:
        billing.stop()
        first_line.stop()
        supervisor.stop()
