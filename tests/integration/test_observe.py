"""What an operator sees of real agents: /metrics moved by exactly what happened, and JSON log
lines that parse and carry the ids (triage → billing → human and back, under the shipped
contracts, plus one forged handoff refused)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from a2a_handoff.protocol.extension import HANDOFF_EXTENSION_URI as URI
from tests.integration.handoff_support import ext, message, result, tasks_in, wait_for
from tests.integration.trust_support import forged
from tests.support import ROOT, AgentProcess, Cli, _http, wire_trust

BIG_REFUND = "I was charged twice, I want a refund of $750 for order 4242"

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


@dataclass
class Desk:
    triage: AgentProcess
    billing: AgentProcess
    human: AgentProcess

    def all(self) -> list[AgentProcess]:
        return [self.human, self.billing, self.triage]


@pytest.fixture(scope="module")
def desk(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Desk]:
    tmp = tmp_path_factory.mktemp("observe")

    def agent(name: str, *extra: str) -> AgentProcess:
        process = AgentProcess(
            name,
            f"sqlite:///{tmp / name}.db",
            extra=(
                "--recovery-interval",
                "0.3",
                "--contracts",
                str(ROOT / "contracts"),
                "--log-format",
                "json",
                *extra,
            ),
        )
        process.log_path = tmp / f"{name}.log"
        return process

    human = agent("human")
    billing = agent("billing", f"--route=human={human.url}")
    triage = agent("triage", f"--route=billing={billing.url}")
    desk = Desk(triage, billing, human)
    wire_trust(desk.all())
    for process in desk.all():
        process.start()
    try:
        yield desk
    finally:
        for process in desk.all():
            process.stop()


def scrape(agent: AgentProcess) -> Samples:
    response = _http().get(agent.url + "metrics")
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain")
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(response.text)
        for s in family.samples
    }


def moved(before: Samples, after: Samples) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """The counters (and histogram counts) that changed, by how much."""
    return {
        key: value - before.get(key, 0.0)
        for key, value in after.items()
        if (key[0].endswith(("_total", "_count"))) and value != before.get(key, 0.0)
    }


def key(name: str, **labels: str) -> tuple[str, frozenset[tuple[str, str]]]:
    return name, frozenset(labels.items())


def edge(source: str, target: str, kind: str, outcome: str) -> dict[str, str]:
    return {"source": source, "target": target, "kind": kind, "outcome": outcome}


def test_metrics_move_by_exactly_what_happened(desk: Desk, tmp_path: Path) -> None:
    before = {a.name: scrape(a) for a in desk.all()}

    # A refund over the limit: triage → billing → (escalation) human, approved, → billing.
    reply = desk.triage.rpc("SendMessage", message(BIG_REFUND))
    context = result(reply)["task"]["contextId"]
    waiting = wait_for(
        lambda: [
            t
            for t in tasks_in(desk.human, context)
            if t["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        ]
    )
    assert scrape(desk.human)[key("a2a_escalations_waiting")] == 1
    code, out = Cli(tmp_path / "op.json").run(
        "approve", waiting[0]["id"], "verified", "--agent", desk.human.url
    )
    assert code == 0, out
    wait_for(
        lambda: any(
            t["status"]["state"] == "TASK_STATE_COMPLETED" for t in tasks_in(desk.billing, context)
        )
    )
    # And a forged (unsigned) handoff, refused at billing's edge.
    forged_envelope = forged()
    msg = message("please", forged_envelope["contextId"])
    msg["message"]["metadata"] = {URI: forged_envelope}
    refused = result(desk.billing.rpc("SendMessage", msg))["task"]
    assert ext(refused)["rejected"] == "envelope_unsigned"

    def settled() -> dict[str, dict[tuple[str, frozenset[tuple[str, str]]], float]] | None:
        # The last terminations land just after the tasks the test waited on.
        found = {a.name: moved(before[a.name], scrape(a)) for a in desk.all()}
        if found["human"].get(key("a2a_task_transitions_total", state="transferred")) == 1:
            return found
        return None

    delta = wait_for(settled)
    triage, billing, human = delta["triage"], delta["billing"], delta["human"]

    assert triage[key("a2a_requests_total", method="SendMessage", outcome="ok")] == 1
    assert (
        triage[key("a2a_handoffs_sent_total", **edge("triage", "billing", "handoff", "accepted"))]
        == 1
    )
    assert triage[key("a2a_task_transitions_total", state="transferred")] == 1
    assert triage[key("a2a_task_transitions_total", state="working")] >= 1
    for stage in ("created", "terminated"):
        latency = key(
            "a2a_handoff_latency_seconds_count",
            source="triage",
            target="billing",
            kind="handoff",
            stage=stage,
        )
        assert triage[latency] == 1
    # The contract's own metrics, from the ledger: one handoff, none rejected.
    contract = key("a2a_contract_handoff_latency_ms_count", contract="triage-to-billing")
    assert triage[contract] == 1
    assert key("a2a_contract_handoff_rejected_total", contract="triage-to-billing") not in triage
    assert triage[key("a2a_store_commit_seconds_count")] >= 2

    assert (
        billing[
            key("a2a_handoffs_received_total", **edge("triage", "billing", "handoff", "accepted"))
        ]
        == 1
    )
    assert (
        billing[
            key(
                "a2a_handoffs_received_total",
                **edge("unknown", "unknown", "handoff", "rejected:envelope_unsigned"),
            )
        ]
        == 1
    )
    assert (
        billing[
            key("a2a_handoffs_sent_total", **edge("billing", "human", "escalation", "accepted"))
        ]
        == 1
    )
    assert billing[key("a2a_contract_handoff_escalated_total", contract="any-to-human")] == 1
    assert (
        billing[
            key("a2a_handoffs_received_total", **edge("human", "billing", "return", "accepted"))
        ]
        == 1
    )
    assert billing[key("a2a_task_transitions_total", state="completed")] == 1
    # The forged message was answered, and refused: no task of it stored.
    assert key("a2a_task_transitions_total", state="rejected") not in billing

    assert (
        human[
            key("a2a_handoffs_received_total", **edge("billing", "human", "escalation", "accepted"))
        ]
        == 1
    )
    assert human[key("a2a_escalations_total", event="received")] == 1
    assert human[key("a2a_escalations_total", event="decided")] == 1
    assert key("a2a_escalations_total", event="timed_out") not in human
    assert (
        human[key("a2a_handoffs_sent_total", **edge("human", "billing", "return", "accepted"))] == 1
    )
    assert human[key("a2a_task_transitions_total", state="input_required")] == 1

    # Nothing else moved on any handoff counter: no duplicate, no failure counted.
    for name, moves in delta.items():
        handoffs = {k: v for k, v in moves.items() if k[0].startswith("a2a_handoffs_")}
        expected = {"triage": 1, "billing": 4, "human": 2}[name]
        assert sum(handoffs.values()) == expected, (name, handoffs)
    # The gauges are there too, read from the store and the client.
    now = scrape(desk.triage)
    assert now[key("a2a_outbox_pending")] == 0
    assert scrape(desk.human)[key("a2a_escalations_waiting")] == 0
    assert key("a2a_open_streams") in now


def test_metrics_need_a_key_under_auth_unless_public(tmp_path: Path) -> None:
    keys = tmp_path / "keys"
    keys.write_text("ops=secret-ops-key-0001\n")
    closed = AgentProcess("echo", f"sqlite:///{tmp_path}/a.db", extra=("--auth-keys", str(keys)))
    public = AgentProcess(
        "echo", f"sqlite:///{tmp_path}/b.db", extra=("--auth-keys", str(keys), "--metrics-public")
    )
    for agent in (closed, public):
        agent.start()
    try:
        assert _http().get(closed.url + "metrics").status_code == 401
        answer = _http().get(closed.url + "metrics", headers={"X-API-Key": "secret-ops-key-0001"})
        assert answer.status_code == 200
        assert "a2a_requests_total" in answer.text
        assert _http().get(public.url + "metrics").status_code == 200
    finally:
        for agent in (closed, public):
            agent.stop()


def json_lines(agent: AgentProcess) -> list[dict[str, Any]]:
    assert agent.log_path is not None
    lines = [line for line in agent.log_path.read_text().splitlines() if line.strip()]
    return [json.loads(line) for line in lines]  # every line parses


def test_json_log_lines_parse_and_carry_the_ids(desk: Desk) -> None:
    reply = desk.triage.rpc("SendMessage", message("please send the invoice for order 777"))
    task = result(reply)["task"]
    assert ext(task)["state"] == "TRANSFERRED"
    context, handoff_id = task["contextId"], ext(task)["handoffId"]

    def logged(agent: AgentProcess, event: str) -> list[dict[str, Any]] | None:
        lines = [e for e in json_lines(agent) if e.get("context_id") == context]
        return lines if any(e["event"] == event for e in lines) else None

    triage = wait_for(lambda: logged(desk.triage, "handoff.sent"))
    billing = wait_for(lambda: logged(desk.billing, "task.transition"))
    states = {e["state"] for e in triage if e["event"] == "task.transition"}
    assert states >= {"working", "transferred"}
    steps = [e["event"] for e in triage if e.get("handoff_id") == handoff_id]
    assert steps[:2] == ["handoff.checkpointed", "handoff.sent"]
    received = next(e for e in billing if e["event"] == "handoff.received")
    assert received["handoff_id"] == handoff_id
    for line in triage + billing:
        assert line["agent"] in ("triage", "billing")
        assert line["task_id"] in (task["id"], received["task_id"])
        assert line["level"] in ("INFO", "WARNING")
        assert line["time"]
        assert line["logger"].startswith("a2a_handoff")
    # One trace id for the whole conversation, on both agents: the envelope's.
    assert {e["trace_id"] for e in triage + billing} == {received["trace_id"]}
    assert len(received["trace_id"]) == 32


def test_the_orchestrator_starts_a_trace_per_message_and_prints_its_id(
    desk: Desk, tmp_path: Path
) -> None:
    user = Cli(tmp_path / "user.json")
    code, events = user.events("send", "--entry", desk.triage.url, "the invoice for order 555")
    assert code == 0, events
    assert events[0]["event"] == "trace"
    trace_id = events[0]["traceId"]
    assert len(trace_id) == 32
    context = json.loads(user.session.read_text())["context_id"]
    # The envelope triage signed carries it: billing's task is in the same trace.
    (received,) = tasks_in(desk.billing, context)
    assert ext(received)["handoff"]["traceId"] == trace_id
    # A second message is a trace of its own.
    code, again = user.events("send", "and for order 556")
    assert again[0]["event"] == "trace"
    assert again[0]["traceId"] != trace_id
