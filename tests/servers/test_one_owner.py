"""One SQLite file, one owner: a second agent process on a served file refuses to start,
naming the first, and the first's running task is left alone."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.integration.handoff_support import message, result, wait_for
from tests.support import ROOT, AgentProcess, free_port


def test_a_second_process_on_a_served_file_refuses_naming_the_first(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'echo.db'}"
    first = AgentProcess("echo", store)
    first.log_path = tmp_path / "first.log"
    first.start()
    try:
        running = result(first.rpc("SendMessage", message("sleep:2", returnImmediately=True)))
        task_id = running["task"]["id"]
        second = subprocess.run(
            [sys.executable, "-m", "servers", "echo", "--port", str(free_port()), "--store", store],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert second.returncode == 64, second.stderr  # refused at start: the arguments
        assert first.proc is not None
        assert f"already served by another process (pid {first.proc.pid}" in second.stderr
        assert "servers/__main__.py echo --port" in second.stderr  # its command line
        # The first one's task was not failed as "left running by a previous process".
        done = wait_for(
            lambda: (
                (task := result(first.rpc("GetTask", {"id": task_id})))["status"]["state"]
                == "TASK_STATE_COMPLETED"
                and task
            )
        )
        assert done["artifacts"][0]["parts"] == [{"text": "slept 2 s"}]
    finally:
        first.stop()
