"""The tests' agent processes: one that does not start says why (its log, even when the test
kept none) and is not left running behind the failed test."""

from __future__ import annotations

import pytest

from tests.support import AgentProcess


def test_an_agent_that_exits_shows_its_log_without_a_log_path() -> None:
    agent = AgentProcess("echo", "bogus://nowhere")
    with pytest.raises(RuntimeError) as raised:
        agent.start()
    said = str(raised.value)
    assert "its log ends:" in said
    assert "bogus://nowhere" in said.split("its log ends:")[1]


def test_an_agent_that_does_not_start_in_time_is_killed() -> None:
    agent = AgentProcess("echo", "memory://").start(wait=False)
    with pytest.raises(TimeoutError, match="did not start"):
        agent.wait_ready(timeout=0)
    assert agent.proc is not None
    assert agent.proc.poll() is not None  # killed, not left serving
    agent.stop()
