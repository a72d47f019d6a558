"""The CLI gives the right reason when a message cannot go (the real CLI, real processes): a
message over the agent's size limit says the limit (it said "connection reset"), a URL that
answers HTTP but is no agent says so (it said "cannot reach … (HTTP 501, not JSON)")."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.integration.handoff_support import wait_for
from tests.support import A2A_HEADERS, AgentProcess, Cli, free_port


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    return Cli(tmp_path / "session.json")


@pytest.fixture
def web_page(tmp_path: Path) -> Iterator[str]:
    """A plain web server (python -m http.server): it answers, and is no agent."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}/"

    def serving() -> bool:
        try:
            return httpx.get(url, timeout=1).status_code == 200
        except httpx.TransportError:
            return False

    try:
        wait_for(serving, 20)
        yield url
    finally:
        proc.kill()
        proc.wait(10)


def test_a_message_over_the_agents_limit_says_the_limit(echo_agent: AgentProcess, cli: Cli) -> None:
    line = "x" * 8_000_000  # over the 1 MiB an agent takes (and over what socket buffers hold)
    code, out = cli.run("chat", "--entry", echo_agent.url, stdin=line + "\n")
    assert code == 64, out[-500:]  # a usage error: the message, not the agent
    assert (
        "echo refused your message: request body over 1048576 bytes (1 MiB);"
        " it was not delivered: send a shorter one" in out
    ), out[-500:]
    assert "connection reset" not in out
    # the piped line is shown back cut, not 3 MB of it
    (echoed,) = [row for row in out.splitlines() if row.startswith("you> ")]
    assert echoed.endswith("… (8000000 characters)")
    assert len(echoed) < 300
    # the agent answered at once and kept the connection usable
    with httpx.Client(timeout=30) as http:
        body = b'{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"' + b"y" * 8_000_000
        answer = http.post(echo_agent.url, content=body + b'"}}', headers=A2A_HEADERS)
        assert answer.status_code == 413
        assert answer.json()["error"]["code"] == -32100
        ask = {"jsonrpc": "2.0", "id": 2, "method": "GetTask", "params": {"id": "none"}}
        again = http.post(echo_agent.url, json=ask, headers=A2A_HEADERS)
        assert again.json()["error"]["code"] == -32001


def test_a_url_that_is_not_an_agent_says_so(
    web_page: str, echo_agent: AgentProcess, cli: Cli
) -> None:
    code, out = cli.run("send", "--entry", web_page, "hello")
    assert code == 64, out
    assert (
        f"{web_page} is not an A2A agent (no agent card at {web_page}.well-known/agent-card.json);"
        " your message was not delivered" in out
    ), out
    assert "cannot reach" not in out
    assert "not JSON" not in out
    wrong_path = echo_agent.url + "a2a"
    code, out = cli.run("send", "--new", "--entry", wrong_path, "hello")
    assert code == 64, out
    assert f"{wrong_path} is not an A2A agent (no agent card at {wrong_path}/.well-known/" in out
