"""An agent that refuses the CLI for want of a key: the CLI says how to pass one — `--api-key
@FILE` for the agent it starts at, `--keys-file` for the agents a conversation moves to."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import AgentProcess, Cli


@pytest.fixture
def guarded_echo(tmp_path: Path) -> Iterator[AgentProcess]:
    keys = tmp_path / "api-keys"
    keys.write_text("alice=alice-key-0123456789\n")
    keys.chmod(0o600)
    agent = AgentProcess("echo", "memory://", extra=("--auth-keys", str(keys)))
    agent.log_path = tmp_path / "echo.log"
    agent.start()
    yield agent
    agent.stop()


def test_an_authentication_error_says_how_to_pass_a_key(
    guarded_echo: AgentProcess, tmp_path: Path
) -> None:
    code, out = Cli(tmp_path / "session.json").run("send", "--entry", guarded_echo.url, "hi")
    assert code == 1, out
    assert "-32101" in out
    assert "--api-key @FILE" in out
    assert "--keys-file FILE" in out
