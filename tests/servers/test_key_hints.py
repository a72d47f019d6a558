"""A missing key file's hints name a `keys init` command with every flag it needs: run as
said, it makes the identity, and the agent starts."""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

from tests.support import ROOT, AgentProcess

HINT = "python -m a2a_handoff keys init"


def run(*cmd: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=60)


def hinted(stderr: str) -> list[str]:
    """The `keys init` command the error names, as arguments."""
    assert HINT in stderr, stderr
    line = stderr[stderr.index(HINT) :].splitlines()[0]
    return shlex.split(line.split(" makes one")[0].rstrip(")"))[3:]  # after `python -m MOD`


def test_the_agent_s_hint_runs_as_said_and_the_agent_starts(tmp_path: Path) -> None:
    key_file = tmp_path / "echo.keys.json"
    agent = AgentProcess("echo", "memory://", extra=("--key-file", str(key_file)))
    refused = run(
        sys.executable,
        "-m",
        "servers",
        "echo",
        "--port",
        str(agent.port),
        "--store",
        "memory://",
        "--key-file",
        str(key_file),
    )
    assert refused.returncode == 64
    made = run(sys.executable, "-m", "a2a_handoff", *hinted(refused.stderr))
    assert made.returncode == 0, made.stderr
    agent.log_path = tmp_path / "echo.log"
    agent.start()
    agent.stop()


def test_keys_list_names_the_flags_of_keys_init(tmp_path: Path) -> None:
    key_file = tmp_path / "keys.json"
    listed = run(sys.executable, "-m", "a2a_handoff", "keys", "list", "--key-file", str(key_file))
    assert listed.returncode == 1
    assert f"keys init --key-file {key_file} --agent NAME makes one" in listed.stderr
