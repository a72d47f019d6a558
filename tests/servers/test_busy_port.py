"""A port another process listens on is a usage error (exit 64), said before anything is
printed or made: for an agent, and for the console (which printed its URL first, then died
of the bind error with exit 3, "unreachable" in the exit-code table)."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import ROOT, AgentProcess, free_port


@pytest.fixture
def busy() -> Iterator[int]:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        yield int(taken.getsockname()[1])


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=60
    )


def test_an_agent_on_a_busy_port_is_a_usage_error_before_anything(
    busy: int, tmp_path: Path
) -> None:
    store = tmp_path / "echo.db"
    done = run("-m", "servers", "echo", "--port", str(busy), "--store", f"sqlite:///{store}")
    assert done.returncode == 64, done.stderr
    assert done.stdout == ""
    assert done.stderr == (
        f"error: port in use on 127.0.0.1: {busy} (echo); stop what listens there, or pick"
        " another --port\n"
    )
    assert not store.exists()  # nothing made: no store, no keys


def test_the_console_on_a_busy_port_is_a_usage_error_and_prints_no_url(
    busy: int, tmp_path: Path
) -> None:
    done = run(
        "-m",
        "orchestrator",
        "--session",
        str(tmp_path / "s.json"),
        "console",
        "--agent",
        "http://127.0.0.1:9/",
        "--port",
        str(busy),
    )
    assert done.returncode == 64, done.stderr
    assert done.stdout == ""  # no URL that does not work
    assert f"cannot listen on 127.0.0.1:{busy} (in use)" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_port_a_stopped_agent_just_left_is_free_again(tmp_path: Path) -> None:
    # The check binds as uvicorn does (SO_REUSEADDR): a restart on the same port, with the
    # last connections still in TIME_WAIT, is not refused as busy.
    agent = AgentProcess("echo", f"sqlite:///{tmp_path / 'echo.db'}", port=free_port())
    agent.start()
    try:
        assert agent.rpc("GetTask", {"id": "none"})["error"]
        agent.stop()
        agent.start()
    finally:
        agent.stop()
