"""A stuck test ends the run with a clear failure and every thread's stack (tests/timeouts.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support import ROOT

# Stuck where pytest-timeout's signal cannot end it: the signal's exception lands in the
# event loop, and asyncio.run's teardown then waits for a task that will not be cancelled.
STUCK = """
import asyncio

import pytest


@pytest.mark.timeout(1)
def test_stuck_in_asyncio_teardown():
    async def stubborn():
        while True:
            try:
                await asyncio.sleep(10)
            except asyncio.CancelledError:
                pass

    async def main():
        asyncio.get_running_loop().create_task(stubborn())
        await asyncio.sleep(3600)

    asyncio.run(main())


def test_after_it():
    pass
"""


def run_pytest(
    tmp_path: Path, *args: str, ini_timeout: bool = False
) -> tuple[subprocess.CompletedProcess[str], float]:
    """`ini_timeout`: the stuck test has no marker; the run's timeout is the ini file's, as
    this suite's is (pyproject's `timeout`)."""
    stuck = STUCK
    if ini_timeout:
        stuck = STUCK.replace("@pytest.mark.timeout(1)\n", "")
        assert stuck != STUCK
    (tmp_path / "pytest.ini").write_text("[pytest]\n" + ("timeout = 1\n" if ini_timeout else ""))
    (tmp_path / "test_stuck.py").write_text(stuck)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "A2A_TEST_TIMEOUT_GRACE": "2"}
    started = time.monotonic()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "tests.timeouts",
            "-p",
            "no:cacheprovider",
            "-q",
            *args,
            "test_stuck.py",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return done, time.monotonic() - started


@pytest.mark.parametrize("ini_timeout", [False, True], ids=["marker", "ini"])
def test_a_test_stuck_past_its_timeout_ends_the_run_with_its_stack(
    tmp_path: Path, ini_timeout: bool
) -> None:
    done, took = run_pytest(tmp_path, ini_timeout=ini_timeout)
    output = done.stdout + done.stderr
    assert done.returncode != 0, output
    assert "STUCK TEST" in output
    assert "test_stuck.py::test_stuck_in_asyncio_teardown" in output
    assert "its timeout is 1 s" in output
    assert "in _cancel_all_tasks" in output  # the main thread's stack, where it waits
    assert "in stubborn" in output  # the asyncio task that does not end
    assert took < 30, took


def test_under_xdist_the_stuck_test_fails_and_the_others_still_run(tmp_path: Path) -> None:
    done, took = run_pytest(tmp_path, "-n", "1", "-p", "xdist")
    output = done.stdout + done.stderr
    assert done.returncode == 1, output
    assert "STUCK TEST" in output
    assert "crashed while running 'test_stuck.py::test_stuck_in_asyncio_teardown'" in output
    assert "1 failed, 1 passed" in output, output
    assert took < 40, took
