"""Interoperability with A2A 0.3: the official a2a-sdk 0.3 client against real agents.

The 0.3 SDK cannot share a virtualenv with the 1.x SDK, so `scripts/bootstrap` installs it,
pinned to the last 0.3 release, in `.venv-a2a03`; each test runs `client03.py` there
(the SDK's card resolver, transport, request encoding and response parsing) and reads what the
client parsed. The client sends no `A2A-Version` header: the agents serve it as 0.3.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from a2a_handoff.protocol.extension import HANDOFF_EXTENSION_URI as URI
from tests.integration.handoff_support import REFUND, Agents, make_agents
from tests.support import ROOT, AgentProcess

PYTHON03 = ROOT / ".venv-a2a03" / "bin" / "python"
CLIENT = Path(__file__).with_name("client03.py")


@pytest.fixture(scope="module")
def agents(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[AgentProcess, Agents]]:
    """One echo agent and a triage → billing pair for the module."""
    assert PYTHON03.exists(), f"{PYTHON03} is missing: run scripts/bootstrap"
    tmp = tmp_path_factory.mktemp("interop03")
    echo = AgentProcess("echo", f"sqlite:///{tmp / 'echo.db'}")
    echo.log_path = tmp / "echo.log"
    pair = make_agents(tmp)
    started = [echo, pair.billing, pair.logistics, pair.triage]
    try:
        for agent in started:
            agent.start()
        yield echo, pair
    finally:
        for agent in started:
            agent.stop()


@pytest.fixture(scope="module")
def echo(agents: tuple[AgentProcess, Agents]) -> AgentProcess:
    return agents[0]


def client03(
    agent: AgentProcess, *commands: tuple[str, Any], how: str = "", api_key: str = ""
) -> list[Any]:
    """Run the 0.3 client; one parsed result per command (`how="connect"`: the client made by
    `ClientFactory.connect(url)` with every default; `api_key` sent with every request)."""
    env = {**os.environ, "CLIENT03_API_KEY": api_key}
    done = subprocess.run(
        [str(PYTHON03), str(CLIENT), agent.url, json.dumps(commands), how],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    results = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(results) == len(commands), done.stdout
    return results


def last_task(events: list[Any]) -> dict[str, Any]:
    """The task as the client's own task manager made it from a send's events."""
    last = events[-1]
    task: dict[str, Any] = last[0] if isinstance(last, list) else last
    assert task["type"] == "Task", task
    return task


def texts(task: dict[str, Any]) -> list[str]:
    return [p["text"] for a in task.get("artifacts", []) for p in a["parts"] if "text" in p]


def test_the_0_3_client_resolves_the_card_and_sends(echo: AgentProcess) -> None:
    card, sent, reply = client03(echo, ("card", None), ("send", "hello"), ("send", "reply: hi"))
    assert card["url"] == echo.url
    assert card["preferredTransport"] == "JSONRPC"
    assert card["protocolVersion"].startswith("0.3")
    assert card["capabilities"]["streaming"] is True
    task = last_task(sent)
    assert task["kind"] == "task"
    assert task["status"]["state"] == "completed"
    assert texts(task) == ["hello"]
    assert task["history"][0]["role"] == "user"
    assert reply[0]["type"] == "Message"
    assert reply[0]["role"] == "agent"
    assert reply[0]["parts"] == [{"kind": "text", "text": "hi"}]


def test_stream_get_and_input_required(echo: AgentProcess) -> None:
    streamed, asked = client03(echo, ("stream", "tokens: one two three"), ("send", "ask: Name?"))
    first, *rest = streamed
    assert first[0]["status"]["state"] == "submitted"
    updates = [event for _, event in rest if event is not None]
    assert {u["kind"] for u in updates} == {"status-update", "artifact-update"}
    chunks = [u for u in updates if u["kind"] == "artifact-update"]
    assert len({c["artifact"]["artifactId"] for c in chunks}) == 1
    assert chunks[-1]["lastChunk"] is True
    assert updates[-1]["final"] is True
    assert updates[-1]["status"]["state"] == "completed"
    done = last_task(streamed)
    task_id = done["id"]

    waiting = last_task(asked)
    assert waiting["status"]["state"] == "input-required"
    got, answered, after = client03(
        echo, ("get", task_id), ("answer", [waiting["id"], "Ada"]), ("get", waiting["id"])
    )
    assert got["status"]["state"] == "completed"
    assert texts(got) == ["one two three"]  # the chunks, stored as one artifact
    assert last_task(answered)["status"]["state"] == "completed"
    assert texts(after) == ["Ada"]


def test_cancel_and_resubscribe(echo: AgentProcess) -> None:
    # The short task must still run when the next client (a fresh 0.3 SDK process) subscribes.
    started, running = client03(echo, ("send_nowait", "sleep:30"), ("send_nowait", "sleep:4"))
    long_id = last_task(started)["id"]
    short_id = last_task(running)["id"]
    canceled, again, followed, terminal = client03(
        echo,
        ("cancel", long_id),
        ("cancel", long_id),
        ("resubscribe", short_id),
        ("resubscribe", long_id),
    )
    assert canceled["status"]["state"] == "canceled"
    assert again["code"] == -32002
    assert followed[0][0]["id"] == short_id
    assert last_task(followed)["status"]["state"] == "completed"
    assert followed[-1][1]["final"] is True
    assert terminal["code"] == -32004


def test_a_handed_off_task_is_completed_with_its_pointer(
    agents: tuple[AgentProcess, Agents],
) -> None:
    _, pair = agents
    [sent] = client03(pair.triage, ("send", REFUND))
    task = last_task(sent)
    assert task["status"]["state"] == "completed"  # TRANSFERRED has no 0.3 value
    ext = task["metadata"][URI]
    assert ext["state"] == "TRANSFERRED"
    pointer = ext["transfer"]
    assert pointer["agentName"] == "billing"
    [successor] = client03(pair.billing, ("get", pointer["taskId"]))
    assert successor["id"] == pointer["taskId"]
    assert successor["contextId"] == task["contextId"]
    assert successor["status"]["state"] == "completed"
    [refund] = successor["artifacts"]
    assert refund["parts"][0]["kind"] == "data"
    assert refund["parts"][0]["data"]["orderId"] == "12345"


def test_a_stock_0_3_client_connects_at_its_default_path(tmp_path: Path) -> None:
    """`ClientFactory.connect(url)` with every default reads `/.well-known/agent-card.json`:
    an agent started with `--card-v03` serves the 0.3 members there too."""
    agent = AgentProcess("echo", f"sqlite:///{tmp_path / 'echo.db'}", extra=("--card-v03",))
    agent.log_path = tmp_path / "echo.log"
    agent.start()
    try:
        card, sent, streamed = client03(
            agent, ("card", None), ("send", "hello"), ("stream", "again"), how="connect"
        )
    finally:
        agent.stop()
    assert card["url"] == agent.url
    assert card["protocolVersion"].startswith("0.3")
    assert last_task(sent)["status"]["state"] == "completed"
    assert texts(last_task(sent)) == ["hello"]
    assert last_task(streamed)["status"]["state"] == "completed"
