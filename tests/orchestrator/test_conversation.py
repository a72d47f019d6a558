"""The conversation as a person lives it (issue 17): the real CLI against real agents.

Each test is one of the traps a new user fell into: a new topic going to the wrong agent, a
message dropped while the agent worked, errors that talked about internals, a trace out of
order, `watch` asking for what the session knows.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.handoff_support import REFUND, Agents, result, running, tasks_in
from tests.support import AgentProcess, Cli, free_port


@pytest.fixture(scope="module")
def agents(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Agents]:
    with running(tmp_path_factory.mktemp("conversation")) as agents:
        yield agents


@pytest.fixture(scope="module")
def echo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AgentProcess]:
    tmp = tmp_path_factory.mktemp("echo")
    agent = AgentProcess("echo", f"sqlite:///{tmp / 'echo.db'}")
    agent.log_path = tmp / "echo.log"
    agent.start()
    try:
        yield agent
    finally:
        agent.stop()


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    return Cli(tmp_path / "session.json")


def session(cli: Cli) -> dict[str, object]:
    data: dict[str, object] = json.loads(cli.session.read_text())
    return data


def refunded(agents: Agents, context: str) -> list[str]:
    """The order ids billing refunded in a context."""
    params = {"contextId": context, "includeArtifacts": True}
    orders = []
    for task in result(agents.billing.rpc("ListTasks", params))["tasks"]:
        for artifact in task.get("artifacts") or []:
            for part in artifact["parts"]:
                if "data" in part and part["data"].get("status") == "refunded":
                    orders.append(part["data"]["orderId"])
    return orders


# -- 1. a new topic goes to the entry agent, not to whoever answered last ------------------


def test_a_new_topic_after_a_completed_task_is_routed_again_by_the_entry_agent(
    agents: Agents, cli: Cli
) -> None:
    code, _ = cli.run("send", "--entry", agents.triage.url, REFUND)
    assert code == 0
    first = session(cli)
    assert first["owner_name"] == "billing"
    # The same --entry (as the README's user typed it): a new topic, triage routes it.
    code, events = cli.events(
        "send", "--entry", agents.triage.url, "where is my package? order 555"
    )
    assert code == 0, events
    hops = [(e["from"], e["to"]) for e in events if e["event"] == "transferred"]
    assert hops == [("triage", "logistics")]
    assert events[-1]["event"] == "completed"
    assert events[-1]["agent"] == "logistics"
    after = session(cli)
    assert after["context_id"] == first["context_id"]  # the same conversation
    assert "555" not in refunded(agents, str(first["context_id"]))  # billing was not asked
    assert [h["agent_name"] for h in after["chain"]] == [  # type: ignore[attr-defined]
        "triage",
        "billing",
        "triage",
        "logistics",
    ]


def test_a_follow_up_without_entry_also_starts_at_the_entry_agent(agents: Agents, cli: Cli) -> None:
    assert cli.run("send", "--entry", agents.triage.url, REFUND)[0] == 0
    code, events = cli.events("send", "and the tracking of my package for order 909")
    assert code == 0
    assert [e["to"] for e in events if e["event"] == "transferred"] == ["logistics"]


def test_new_and_send_new_start_a_fresh_conversation(agents: Agents, cli: Cli) -> None:
    assert cli.run("send", "--entry", agents.triage.url, "I want a refund")[0] == 2
    asked = session(cli)
    code, out = cli.run("new")
    assert code == 0
    assert f"a new conversation: the next message starts it at {agents.triage.url}" in out
    fresh = session(cli)
    assert fresh["entry"] == agents.triage.url
    assert fresh["context_id"] is None
    assert fresh["task_id"] is None
    # "order 404" would have answered billing's question; after `new` it is a new request.
    code, events = cli.events("send", "refund order 404")
    assert code == 0
    assert session(cli)["context_id"] != asked["context_id"]
    assert [e["to"] for e in events if e["event"] == "transferred"] == ["billing"]
    # send --new: the same, in one command.
    assert cli.run("send", "I want a refund")[0] == 2
    before = session(cli)["context_id"]
    code, _ = cli.run("send", "--new", "refund order 505")
    assert code == 0
    assert session(cli)["context_id"] != before


def test_a_different_entry_starts_a_new_conversation_and_says_so(
    agents: Agents, echo: AgentProcess, cli: Cli
) -> None:
    assert cli.run("send", "--entry", agents.triage.url, "I want a refund")[0] == 2
    context = session(cli)["context_id"]
    code, events = cli.events("send", "--entry", echo.url, "order 121")
    assert code == 0, events
    assert events[0]["event"] == "new_conversation"
    assert f"a new conversation at {echo.url}" in events[0]["message"]
    assert agents.triage.url in events[0]["message"]
    assert events[-1]["agent"] == "echo"  # not billing's question answered
    assert session(cli)["context_id"] != context
    assert session(cli)["entry"] == echo.url


# -- 2. no message is dropped -------------------------------------------------------------


def test_a_message_for_a_working_task_waits_then_is_delivered_or_refused(
    echo: AgentProcess, cli: Cli
) -> None:
    # Long enough that the next CLI (a Python start-up: seconds on a loaded machine) finds it
    # working; the last send then waits for its end.
    code, out = cli.run("--wait", "0.5", "send", "--entry", echo.url, "sleep:15")
    assert code == 4
    working = str(session(cli)["task_id"])
    assert f"echo is still working on task {working}" in out  # the id `watch` needs
    # Still working after --wait: the message is refused, saying so, with its own code.
    code, events = cli.events("--wait", "0.3", "send", "again")
    assert code == 6
    assert events[-1]["event"] == "not_delivered"
    assert "your message was not delivered: echo is still working" in events[-1]["message"]
    history = result(echo.rpc("GetTask", {"id": working}))["history"]
    assert all("again" not in json.dumps(m) for m in history)
    # Given the time, the message waits for the task to end, then goes (a new task: it ended).
    code, events = cli.events("--wait", "40", "send", "again")
    assert code == 0, events
    assert [e["event"] for e in events][-1] == "completed"
    echoed = [e for e in events if e["event"] == "artifact"]
    assert echoed[-1]["parts"] == [{"text": "again"}]
    assert echoed[-1]["taskId"] != working


# -- 7, 10. errors in the user's words; watch and trace from the session ------------------


def test_an_agent_that_is_down_is_named_with_the_reason(cli: Cli) -> None:
    url = f"http://127.0.0.1:{free_port()}/"
    code, out = cli.run("send", "--entry", url, "hello")
    assert code == 3
    assert f"cannot reach {url} (connection refused)" in out
    assert "circuit" not in out
    assert "ConnectError" not in out
    assert "Traceback" not in out


def test_a_url_without_a_scheme_is_a_usage_error(cli: Cli) -> None:
    code, out = cli.run("send", "--entry", "127.0.0.1:8999", "hello")
    assert code == 64
    assert (
        "argument --entry: '127.0.0.1:8999' is not an http:// or https:// URL;"
        " write http://127.0.0.1:8999" in out
    )
    assert "circuit" not in out
    code, out = cli.run("inbox", "--agent", "://")
    assert code == 64
    assert "argument --agent: '://' is not an http:// or https:// URL" in out


def test_inbox_at_an_agent_that_is_down_says_so(cli: Cli) -> None:
    url = f"http://127.0.0.1:{free_port()}/"
    code, out = cli.run("inbox", "--agent", url)
    assert code == 3
    assert f"cannot reach {url} (connection refused)" in out
    assert "ConnectError" not in out


def test_watch_and_trace_default_to_the_session(agents: Agents, cli: Cli) -> None:
    code, out = cli.run("trace")
    assert code == 64
    assert "no conversation yet" in out
    assert cli.run("send", "--entry", agents.triage.url, REFUND)[0] == 0
    assert cli.run("send", "where is my package? order 770")[0] == 0
    code, out = cli.run("watch")  # the session's task, at its agent
    assert code == 0, out
    assert "[logistics] completed" in out
    context = str(session(cli)["context_id"])
    code, out = cli.run("--json", "trace", "--context", context)  # --agent: the entry
    assert code == 0, out
    rows = [json.loads(line) for line in out.splitlines()]
    assert [r["agent_name"] for r in rows] == ["triage", "billing", "triage", "logistics"]
    assert [r["at"] for r in rows] == sorted(r["at"] for r in rows)
    # Every task of the context at triage is there: it was routed twice.
    assert len(tasks_in(agents.triage, context)) == 2
