"""The operator's commands mean what they say (issue 17): real CLI, real agents.

A reply to a request for permission is information, not a denial; acting twice is told the
escalation is already decided; `inbox` at an agent that is no human agent says so; the user's
`send` says at once that it waits for an operator, and the command that shows them the
escalation (it said nothing for the whole wait); following a conversation whose tasks are
over asks for them, and subscribes to none (each such subscription was an error the agents
counted: `SubscribeToTask outcome="UnsupportedOperationError"`); the operator's commands take
the start of a task id, as ids are shortened to read them (they refused it: not found).
"""

from __future__ import annotations

import itertools
import re
import subprocess
import sys
from pathlib import Path

from tests.integration.handoff_support import result, tasks_in, wait_for
from tests.integration.test_escalation import (  # the escalation desk: module-scoped agents
    BIG_REFUND,
    Desk,
    cli,
    desk,
    inbox,
    session_task,
    waiting_from,
    with_artifacts,
)
from tests.support import ROOT, AgentProcess, Cli, _http

__all__ = ["cli", "desk"]  # fixtures, used by name


def test_a_reply_to_a_permission_is_a_note_and_the_escalation_still_waits(
    desk: Desk, cli: Cli, tmp_path: Path
) -> None:
    code, _ = cli.run("--wait", "2", "send", "--entry", desk.triage.url, BIG_REFUND)
    assert code == 4
    operator = Cli(tmp_path / "operator.json")
    item = waiting_from(operator, desk.human, session_task(cli, "billing"))
    assert item["need"] == "permission"
    code, out = operator.run("reply", item["taskId"], "ok go ahead", "--agent", desk.human.url)
    assert code == 0, out
    assert f"noted on {item['taskId']}" in out
    assert "still waits for `approve` or `deny`" in out

    def noted() -> bool:
        task = result(desk.human.rpc("GetTask", {"id": item["taskId"]}))
        text = task["status"].get("message", {}).get("parts", [{}])[0].get("text", "")
        return task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED" and "ok go ahead" in text

    wait_for(noted)
    # Still in the inbox; billing neither refunded nor refused.
    assert any(i["taskId"] == item["taskId"] for i in inbox(operator, desk.human))
    assert not with_artifacts(desk.billing, item["contextId"])
    states = {t["status"]["state"] for t in tasks_in(desk.billing, item["contextId"])}
    assert "TASK_STATE_REJECTED" not in states

    # `reply --approve` decides: the refund is issued, once.
    code, out = operator.run(
        "reply", "--approve", item["taskId"], "checked", "--agent", desk.human.url
    )
    assert code == 0, out
    assert f"answered {item['taskId']}: approved" in out
    code, out = cli.run("watch")  # the session's task: the escalation, followed to billing
    assert code == 0, out
    assert "[billing] completed: Refund of $750.00 issued for order 4242" in out
    assert len(with_artifacts(desk.billing, item["contextId"])) == 1

    # Acting again on a decided escalation: told so, nothing internal.
    code, out = operator.run("deny", item["taskId"], "--agent", desk.human.url)
    assert code == 1
    assert f"escalation {item['taskId']} is already decided" in out
    assert "TRANSFERRED" not in out


def test_inbox_at_an_agent_that_is_not_a_human_agent_says_so(desk: Desk, cli: Cli) -> None:
    code, out = cli.run("inbox", "--agent", desk.billing.url)
    assert code == 64
    assert f"{desk.billing.url} is not a human agent" in out
    assert "no escalation is waiting" not in out
    code, out = cli.run("inbox", "--agent", desk.human.url)
    assert code == 0, out


def test_send_says_at_once_that_it_waits_for_an_operator_and_where(
    desk: Desk, cli: Cli, tmp_path: Path
) -> None:
    user = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "orchestrator",
            "--session",
            str(cli.session),
            "--wait",
            "60",
            "send",
            "--entry",
            desk.triage.url,
            BIG_REFUND,
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert user.stdout is not None
    try:
        for line in user.stdout:
            if "escalated to a human operator" in line:
                break
        waiting = user.stdout.readline().rstrip("\n")  # the next line, before the wait ends
        assert user.poll() is None, waiting  # still waiting: this line is not its end
        inbox_command = f"python -m orchestrator inbox --agent {desk.human.url}"
        assert waiting == (
            "waiting up to 60 s for a human operator at human to answer; an operator sees it"
            f" with `{inbox_command}` (or the console)"
        )
        # The command, as printed, shows an operator the escalation; they approve it.
        shown = re.search(r"`python -m orchestrator (inbox [^`]+)`", waiting)
        assert shown is not None
        operator = Cli(tmp_path / "operator.json")
        code, items = operator.events(*shown.group(1).split())
        assert code == 0
        (item,) = [i for i in items if i["sourceTaskId"] == session_task(cli, "billing")]
        code, out = operator.run("approve", item["taskId"], "--agent", desk.human.url)
        assert code == 0, out
        rest, _ = user.communicate(timeout=60)
        assert user.returncode == 0, rest
        assert "[billing] completed: Refund of $750.00 issued for order 4242" in rest
    finally:
        if user.poll() is None:
            user.kill()
            user.wait(10)


def refused_subscriptions(agent: AgentProcess) -> float:
    """How many SubscribeToTask calls `agent` answered -32004 (the task was already over)."""
    text = _http().get(agent.url + "metrics").text
    found = re.search(
        r'^a2a_requests_total\{method="SubscribeToTask",outcome="UnsupportedOperationError"\}'
        r" (\S+)$",
        text,
        re.M,
    )
    return float(found.group(1)) if found else 0.0


def test_following_a_conversation_that_is_over_subscribes_to_none_of_its_tasks(
    desk: Desk, cli: Cli, tmp_path: Path
) -> None:
    code, _ = cli.run("--wait", "2", "send", "--entry", desk.triage.url, BIG_REFUND)
    assert code == 4
    operator = Cli(tmp_path / "operator.json")
    item = waiting_from(operator, desk.human, session_task(cli, "billing"))
    code, out = operator.run("approve", item["taskId"], "--agent", desk.human.url)
    assert code == 0, out
    wait_for(lambda: with_artifacts(desk.billing, item["contextId"]))  # the refund: all over
    before = {agent.name: refused_subscriptions(agent) for agent in desk.all()}
    code, out = cli.run("watch")  # the escalation, over, then billing's task, over
    assert code == 0, out
    assert "[human] transferred to billing" in out
    assert "[billing] completed: Refund of $750.00 issued for order 4242" in out
    after = {agent.name: refused_subscriptions(agent) for agent in desk.all()}
    assert after == before  # a normal flow makes no error the agents count


def test_an_operator_names_an_escalation_by_the_start_of_its_id(desk: Desk, tmp_path: Path) -> None:
    users = [Cli(tmp_path / f"user{n}.json") for n in (1, 2)]
    sending = [
        u.start("--wait", "120", "send", "--entry", desk.triage.url, BIG_REFUND) for u in users
    ]
    try:
        operator = Cli(tmp_path / "operator.json")
        billing = [
            wait_for(lambda u=u: u.session.exists() and session_task(u, "billing"), 60)
            for u in users
        ]
        mine, theirs = (waiting_from(operator, desk.human, task) for task in billing)
        waiting = [item["taskId"] for item in inbox(operator, desk.human)]
        # The start both share (UUIDv7 ids made moments apart share their time's high digits):
        # refused, naming both, and neither decided.
        pairs = zip(mine["taskId"], theirs["taskId"], strict=True)
        shared = "".join(a for a, _ in itertools.takewhile(lambda pair: pair[0] == pair[1], pairs))
        assert len(shared) >= 4
        code, out = operator.run("approve", shared, "--agent", desk.human.url)
        assert code == 64, out
        assert f"{shared} is the start of" in out
        assert mine["taskId"] in out
        assert theirs["taskId"] in out
        assert {mine["taskId"], theirs["taskId"]} <= {
            i["taskId"] for i in inbox(operator, desk.human)
        }
        # A start only one has, shortened as a person writes it (`01a2…-f522-…`): that one.
        unique = next(
            mine["taskId"][:n]
            for n in range(14, 37)
            if [t for t in waiting if t.startswith(mine["taskId"][:n])] == [mine["taskId"]]
        )
        code, out = operator.run("approve", unique + "…", "verified", "--agent", desk.human.url)
        assert code == 0, out
        assert f"answered {mine['taskId']}: approved" in out
        still = [i["taskId"] for i in inbox(operator, desk.human)]
        assert mine["taskId"] not in still
        assert theirs["taskId"] in still
        code, out = operator.run("deny", theirs["taskId"], "--agent", desk.human.url)
        assert code == 0, out
        # Each user's conversation follows its own decision.
        (code, events), (their_code, their_events) = (Cli.finish(p, 120) for p in sending)
        assert (code, events[-1]["event"]) == (0, "completed"), events[-3:]
        assert (their_code, their_events[-1]["event"]) == (1, "rejected"), their_events[-3:]
    finally:
        for proc in sending:
            if proc.poll() is None:
                proc.kill()
                proc.communicate(timeout=10)
