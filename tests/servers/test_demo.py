"""`scripts/demo` as a newcomer runs it: the terminal shows the conversation the README
shows, and where each agent's log went — not the agents' logs. Before: 137 lines mixing the
conversation with four agents' uvicorn and httpx INFO lines, "all serving" after `you>`."""

from __future__ import annotations

import os
import re
import signal
import subprocess
from pathlib import Path

import httpx
import pytest

from tests.support import ROOT
from tests.test_setup import machine_without_test_packages

LOG_LINE = re.compile(r"\b(DEBUG|INFO|WARNING|ERROR|CRITICAL)\b|uvicorn|Traceback|HTTP/1.1")


def readme_transcript() -> list[str]:
    readme = (ROOT / "README.md").read_text()
    block = readme.split("```\nyou> ", 1)[1].split("```", 1)[0]
    return ("you> " + block).splitlines()


def test_the_demo_shows_the_conversation_and_where_the_logs_are(tmp_path: Path) -> None:
    env = machine_without_test_packages(tmp_path)  # and installs nothing system-wide
    done = subprocess.run(
        ["scripts/demo"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=240,
    )
    lines = done.stdout.splitlines()
    assert done.returncode == 0, done.stdout
    assert not (tmp_path / "apt-get.log").exists()
    # First each agent, its URL and its log file; then "all serving", before any prompt.
    logs = {}
    for line, name in zip(lines, ("triage", "billing", "logistics", "human"), strict=False):
        shown, url, label, path = line.split()
        assert (shown, label) == (name, "log:"), line
        assert url.startswith("http://127.0.0.1:")
        logs[name] = Path(path)
    assert lines[4].startswith("all serving")
    assert lines[5] == ""
    # Then the README's transcript, line for line.
    transcript = readme_transcript()
    assert lines[6 : 6 + len(transcript)] == transcript
    assert "--- a refund over $500 ---" in lines
    assert "[billing] completed: Refund of $750.00 issued for order 4242." in lines
    # No agent's log line in the terminal: they are in the files printed.
    assert [line for line in lines if LOG_LINE.search(line)] == []
    assert len(lines) < 60, done.stdout
    for name, path in logs.items():
        assert path.name == f"{name}.log"
        assert " INFO " in path.read_text()
    assert "INSECURE: human keeps escalations without API keys" in logs["human"].read_text()


@pytest.mark.parametrize("after", ["all serving", "[billing] input required"])
def test_ctrl_c_stops_the_demo_and_its_agents_quietly(tmp_path: Path, after: str) -> None:
    """Ctrl-C in the terminal: SIGINT to the demo's whole process group, as a terminal sends
    it. The demo stops its agents and ends, exit 130, without a traceback."""
    env = machine_without_test_packages(tmp_path)
    demo = subprocess.Popen(
        ["scripts/demo"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    assert demo.stdout is not None
    seen = []
    for line in demo.stdout:
        seen.append(line)
        if line.startswith(after):
            break
    os.killpg(demo.pid, signal.SIGINT)
    rest, _ = demo.communicate(timeout=60)
    out = "".join(seen) + rest
    assert demo.returncode == 130, out
    assert "Traceback" not in out
    assert "KeyboardInterrupt" not in out
    urls = [line.split()[1] for line in seen if line.split()[1:2] and "log:" in line]
    assert urls
    for url in urls:  # every agent stopped
        with pytest.raises(httpx.ConnectError):
            httpx.get(url + "health", timeout=2)
