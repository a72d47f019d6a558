"""A stale or damaged session never locks the user out: the CLI starts a new conversation
and says so in one line. Before: after the agent's data was wiped every `send` answered
`error -32001: task … not found` (exit 1), and a session file that was not JSON, or not an
object, or had fields of the wrong type gave a traceback."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.support import AgentProcess, Cli


@pytest.fixture
def agent(tmp_path: Path) -> AgentProcess:
    data = tmp_path / "data"
    data.mkdir()
    process = AgentProcess("echo", f"sqlite:///{data / 'echo.db'}")
    process.log_path = tmp_path / "echo.log"
    return process


def wipe(agent: AgentProcess, data: Path) -> None:
    """The agent's data is gone (a fresh store, fresh keys): it restarts on the same port."""
    agent.stop()
    shutil.rmtree(data)
    data.mkdir()
    agent.start()


@pytest.mark.parametrize(
    ("first", "code"),
    [("ask: what is your name?", 2), ("sleep:30", 4)],
    ids=["waiting-for-input", "still-working"],
)
def test_a_conversation_whose_task_was_wiped_starts_again(
    agent: AgentProcess, tmp_path: Path, first: str, code: int
) -> None:
    cli = Cli(tmp_path / "session.json")
    agent.start()
    try:
        assert cli.run("--wait", "1", "send", "--entry", agent.url, first)[0] == code
        stale = json.loads(cli.session.read_text())["task_id"]
        wipe(agent, tmp_path / "data")
        done, out = cli.run("--wait", "10", "send", "Bob")
        assert done == 0, out
        lines = out.splitlines()
        assert lines[0] == (
            f"task {stale} is no longer at echo (its data was wiped?): a new conversation"
            f" starts at {agent.url}"
        )
        assert "[echo] artifact echo: Bob" in lines
        assert "error" not in out
        session = json.loads(cli.session.read_text())
        assert session["task_id"] != stale
        assert [hop["task_id"] for hop in session["chain"]] == [session["task_id"]]
        assert cli.run("send", "again")[0] == 0  # and the conversation goes on from there
    finally:
        agent.stop()


DAMAGED = {
    "not-json": b'{"entry": "http://127.0.0.1:1/", "task_',
    "not-utf8": b"\xff\xfe\x00{",
    "a-list": b"[1, 2]",
    "chain-not-a-list": b'{"entry": "ENTRY", "chain": {"pop": 1}}',
    "hop-not-a-task": b'{"entry": "ENTRY", "chain": [{"agent_url": 5}]}',
    "state-unknown": b'{"entry": "ENTRY", "task_id": "t", "state": "TASK_STATE_NAPPING"}',
    "entry-not-a-url": b'{"entry": ["x"], "owner_url": "file:///etc/passwd"}',
}


@pytest.mark.parametrize("content", DAMAGED.values(), ids=DAMAGED.keys())
def test_a_damaged_session_file_starts_a_new_conversation(
    echo_agent: AgentProcess, tmp_path: Path, content: bytes
) -> None:
    cli = Cli(tmp_path / "session.json")
    cli.session.write_bytes(content.replace(b"ENTRY", echo_agent.url.encode()))
    kept_entry = b"ENTRY" in content
    args = ("send", "hello") if kept_entry else ("send", "--entry", echo_agent.url, "hello")
    code, out = cli.run(*args)
    assert code == 0, out
    assert "Traceback" not in out
    first, *rest = out.splitlines()
    assert first.startswith(f"the session file {cli.session} is damaged (")
    assert first.endswith(
        f"a new conversation starts at {echo_agent.url}"
        if kept_entry
        else "a new conversation starts"
    )
    assert "[echo] artifact echo: hello" in rest
    assert json.loads(cli.session.read_text())["entry"] == echo_agent.url  # written anew
    # Read again: sound now, nothing said.
    assert "damaged" not in cli.run("send", "hello again")[1]


def test_a_damaged_session_without_an_entry_says_the_one_command(tmp_path: Path) -> None:
    cli = Cli(tmp_path / "session.json")
    cli.session.write_text('{"chain": "x"}')
    code, out = cli.run("send", "hello")
    assert code == 64
    assert out.splitlines() == [
        f"the session file {cli.session} is damaged ('chain' is not a list): a new"
        " conversation starts",
        "error: no conversation yet: pass --entry URL",
    ]
    code, out = cli.run("trace")
    assert code == 64
    assert "Traceback" not in out
