"""Secure by default: the combinations that would let money move without an operator refuse to
start, or say so at start-up. Each test is an attack on the agents configured as the docs
show, which succeeded before the defaults changed."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from a2a_handoff.protocol.extension import HANDOFF_EXTENSION_URI as URI
from tests.integration.handoff_support import message, result, wait_for
from tests.integration.trust_support import AGENT_KEYS, USERS, Bank, bank, keys_file
from tests.support import ROOT, Cli, free_port

ALICE, MALLORY = USERS["alice"], USERS["mallory"]


def serve(*args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    """`python -m servers …` expected to refuse to start: its exit code and output."""
    return subprocess.run(
        [sys.executable, "-m", "servers", *args], cwd=ROOT, capture_output=True, text=True,
        timeout=timeout,
    )  # fmt: skip


def test_a_human_agent_under_auth_without_operators_refuses_to_start(tmp_path: Path) -> None:
    # Before: it started, and the user an escalation was about approved it with her own key.
    done = serve(
        "human", "--port", str(free_port()), "--store", f"sqlite:///{tmp_path / 'h.db'}",
        f"--auth-keys={keys_file(tmp_path, 'human', {})}",
    )  # fmt: skip
    assert done.returncode == 64, done.stderr
    assert "names no operators" in done.stderr
    assert "--operators" in done.stderr


@pytest.fixture(scope="module")
def agents(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bank]:
    with bank(tmp_path_factory.mktemp("secure")) as running:  # no fallback: nothing times out
        yield running


def escalated(agents: Bank, tmp_path: Path, key: str = ALICE) -> dict[str, Any]:
    """A refund over billing's limit, asked for by the user of `key`: its escalation, as the
    operator's inbox lists it."""
    big = "I was charged twice, I want a refund of $750 for order 4242"
    reply = agents.triage.rpc("SendMessage", message(big), **{"X-API-Key": key})
    context = result(reply)["task"]["contextId"]
    operator = Cli(tmp_path / "op.json")

    def waiting() -> list[dict[str, Any]]:
        code, items = operator.events("--api-key", "operator-key", "inbox",
                                      "--agent", agents.human.url)  # fmt: skip
        assert code == 0
        return [i for i in items if i["contextId"] == context]

    return wait_for(waiting, timeout=20)[0]


def refunds(agents: Bank, context: str, key: str) -> list[dict[str, Any]]:
    page = result(agents.billing.rpc("ListTasks", {"contextId": context, "includeArtifacts": True},
                                     **{"X-API-Key": key}))  # fmt: skip
    return [a for t in page["tasks"] for a in t.get("artifacts") or [] if a.get("name") == "refund"]


def test_only_operators_decide_an_escalation_a_user_adds_a_note(
    agents: Bank, tmp_path: Path
) -> None:
    item = escalated(agents, tmp_path)
    human = agents.human
    # The user the escalation is about sees it and answers "approve" with her own key: kept
    # as a note, never a decision; the escalation still waits, nothing is paid.
    code, out = Cli(tmp_path / "u.json").run(
        "--api-key", ALICE, "approve", item["taskId"], "--agent", human.url
    )
    assert code == 1, out
    assert "operators decide" in out
    assert "note" in out
    task = result(human.rpc("GetTask", {"id": item["taskId"]}, **{"X-API-Key": ALICE}))
    assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert task["history"][-1]["metadata"][URI] == {"note": {"by": "alice"}}
    # The agent that escalated (billing's own key at the human agent) cannot decide either.
    reply = human.rpc("SendMessage", {"message": {
        "messageId": "billing-approves", "role": "ROLE_USER", "parts": [{"text": "approve"}],
        "taskId": item["taskId"], "metadata": {URI: {"decision": {"verdict": "approved"}}},
    }}, **{"X-API-Key": AGENT_KEYS[("billing", "human")]})  # fmt: skip
    assert result(reply)["task"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    time.sleep(1.0)  # a return, had one been sent, would have reached billing by now
    assert refunds(agents, item["contextId"], ALICE) == []
    # Another user does not even see it.
    code, items = Cli(tmp_path / "m.json").events(
        "--api-key", MALLORY, "inbox", "--agent", human.url
    )
    assert [i for i in items if i["contextId"] == item["contextId"]] == []
    # The operator decides: the refund is paid, once.
    code, out = Cli(tmp_path / "op.json").run(
        "--api-key", "operator-key", "approve", item["taskId"], "--agent", human.url
    )
    assert code == 0, out
    paid = wait_for(lambda: refunds(agents, item["contextId"], ALICE), timeout=20)
    assert len(paid) == 1
