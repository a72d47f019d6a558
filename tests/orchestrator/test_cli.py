"""The orchestrator CLI against real agent processes."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.handoff_support import REFUND, Agents, make_agents, running, tasks_in
from tests.support import ROOT, AgentProcess, Cli, free_port


@pytest.fixture(scope="module")
def agents(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Agents]:
    with running(tmp_path_factory.mktemp("cli")) as agents:
        yield agents


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    return Cli(tmp_path / "session.json")


def test_a_transfer_is_followed_mid_stream(agents: Agents, cli: Cli) -> None:
    code, events = cli.events("send", "--entry", agents.triage.url, REFUND)
    assert code == 0
    kinds = [(e["event"], e.get("agent") or e.get("from")) for e in events]
    assert ("transferred", "triage") in kinds
    assert kinds[-1] == ("completed", "billing")
    artifact = next(e for e in events if e["event"] == "artifact")
    assert artifact["parts"][0]["data"]["orderId"] == "12345"
    assert kinds.index(("transferred", "triage")) < kinds.index(("completed", "billing"))
    session = json.loads(cli.session.read_text())
    assert session["owner_name"] == "billing"
    assert [hop["agent_name"] for hop in session["chain"]] == ["triage", "billing"]


def test_input_required_round_trip_across_two_sends(agents: Agents, cli: Cli) -> None:
    code, out = cli.run("send", "--entry", agents.triage.url, "I want a refund")
    assert code == 2
    assert "[billing] input required: Which order" in out
    asked = json.loads(cli.session.read_text())
    code, out = cli.run("send", "it is order 777")
    assert code == 0
    assert "Refund of $49.99 issued for order 777" in out
    after = json.loads(cli.session.read_text())
    assert after["task_id"] == asked["task_id"]  # the same billing task took the answer
    assert after["state"] == "TASK_STATE_COMPLETED"


def test_a_direct_reply_is_a_complete_answer(cli: Cli, echo_agent: AgentProcess) -> None:
    code, out = cli.run("send", "--entry", echo_agent.url, "reply: nothing to track")
    assert code == 0, out
    assert "[echo] nothing to track" in out


def test_chat_over_a_pipe(agents: Agents, cli: Cli) -> None:
    code, out = cli.run("chat", "--entry", agents.triage.url, stdin="I want a refund\norder 313\n")
    assert code == 0
    assert "you> I want a refund" in out
    assert "[triage] transferred to billing" in out
    assert "input required" in out
    assert "issued for order 313" in out


def test_trace_and_watch(agents: Agents, cli: Cli) -> None:
    cli.run("send", "--entry", agents.triage.url, REFUND)
    session = json.loads(cli.session.read_text())
    code, out = cli.run("trace")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split()[1:] == ["triage", session["chain"][0]["task_id"], "transferred"]
    assert lines[1].split()[1:4] == ["billing", session["task_id"], "completed"]
    code, out = cli.run("trace", "--context", session["context_id"], "--agent", agents.triage.url)
    assert code == 0
    assert [line.split()[1] for line in out.splitlines()] == ["triage", "billing"]
    first = session["chain"][0]
    code, out = cli.run("watch", first["task_id"], "--agent", agents.triage.url)
    assert code == 0
    assert "transferred to billing" in out
    assert "[billing] completed" in out


def test_a_loop_between_two_misconfigured_agents_is_stopped(tmp_path: Path) -> None:
    ports = {"ping": free_port(), "pong": free_port()}
    procs = []
    for name, peer in (("ping", "pong"), ("pong", "ping")):
        cmd = [
            sys.executable,
            str(Path(__file__).with_name("loop_agent.py")),
            "--name",
            name,
            "--port",
            str(ports[name]),
            "--peer-name",
            peer,
            "--peer-url",
            f"http://127.0.0.1:{ports[peer]}/",
        ]
        procs.append(subprocess.Popen(cmd, cwd=ROOT))
    try:
        for port in ports.values():
            AgentProcess("loop", "", port=port).wait_ready()
        cli = Cli(tmp_path / "session.json")
        code, out = cli.run("send", "--entry", f"http://127.0.0.1:{ports['ping']}/", "hi")
        assert code == 1
        assert "stopped following transfers" in out
        assert "ping task ping-1 was already visited" in out
        code, out = cli.run(
            "--max-hops", "0", "send", "--entry", f"http://127.0.0.1:{ports['ping']}/", "hi"
        )
        assert code == 1
        assert "more than 0 transfers" in out
    finally:
        for proc in procs:
            proc.kill()
            proc.wait(10)


def test_a_killed_agent_gives_exit_3_and_the_conversation_resumes(tmp_path: Path) -> None:
    agents = make_agents(tmp_path)
    for agent in agents.all():
        agent.start()
    cli = Cli(tmp_path / "session.json")
    try:
        code, _ = cli.run("send", "--entry", agents.triage.url, "I want a refund")
        assert code == 2
        agents.billing.kill()
        started = time.monotonic()
        code, out = cli.run("send", "order 12345", timeout=30)
        assert code == 3
        assert f"cannot reach billing at {agents.billing.url} (connection refused)" in out
        assert "circuit" not in out  # the breaker is not why: the agent is down
        assert "Traceback" not in out
        assert time.monotonic() - started < 20
        agents.billing.start()
        code, out = cli.run("send", "order 12345")
        assert code == 0
        assert "issued for order 12345" in out
    finally:
        agents.stop()


def test_a_down_handoff_target_leaves_the_handoff_pending_and_says_why(tmp_path: Path) -> None:
    agents = make_agents(tmp_path)
    agents.triage.start()  # billing is down
    cli = Cli(tmp_path / "session.json")
    try:
        code, out = cli.run("--wait", "5", "send", "--entry", agents.triage.url, "I want a refund")
        assert code == 4
        why = f"cannot reach billing at {agents.billing.url} (connection refused); retrying"
        # said as it happens (triage's status), and again in the pending line
        assert f"[triage] working: {why}, next try in" in out
        assert re.search(rf"handoff from triage is pending: {re.escape(why)}, next try in \d", out)
        assert "triage keeps trying until the handoff is taken, refused or expires" in out
        assert "`cancel` withdraws it" in out
        # Triage's log says what changed (the first failure, the breaker opening), not each
        # of the retries of these 5 s (two a second before).
        assert agents.triage.log_path is not None
        log = agents.triage.log_path.read_text()
        said = [line for line in log.splitlines() if "retrying" in line]
        assert 1 <= len(said) <= 3, said
        assert "circuit for http://127.0.0.1" in log  # the breaker's own change, once
        agents.billing.start()
        code, out = cli.run("send", "order 888")
        assert code == 0, out
        assert "transferred to billing" in out
        assert "issued for order 888" in out
    finally:
        agents.stop()


def test_no_entry_agent_is_a_usage_error(cli: Cli) -> None:
    code, out = cli.run("send", "hello")
    assert code == 64
    assert "--entry" in out


def test_cancel_withdraws_a_handoff_the_target_never_took(tmp_path: Path) -> None:
    agents = make_agents(tmp_path)
    agents.triage.start()  # billing is down: the handoff waits in triage's outbox
    cli = Cli(tmp_path / "session.json")
    try:
        code, _ = cli.run("--wait", "2", "send", "--entry", agents.triage.url, "I want a refund")
        assert code == 4
        code, out = cli.run("cancel")
        assert code == 0, out
        assert "[triage] canceled: Task canceled: its handoff to billing was withdrawn" in out
        code, out = cli.run("cancel")  # nothing left to cancel: said, exit 1
        assert code == 1
        assert "was not canceled" in out
        assert "TASK_STATE_CANCELED" in out or "CANCELED" in out
        agents.billing.start()
        context = json.loads(cli.session.read_text())["context_id"]
        assert tasks_in(agents.billing, context) == []  # nothing was delivered, then or now
    finally:
        agents.stop()
