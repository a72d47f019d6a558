"""MCP tool calls under attack: a configured server that answers with a redirect elsewhere,
a server "name" a handler (or a model) makes up that is a URL, and credentials in a
configured server's URL, which nothing the agent shows may repeat; a server answering far
more than any tool result should (as JSON or as an event stream) fails the call rather
than filling the agent's memory, and a huge error text is cut before a task keeps it. (A
keyed call made again with other arguments is refused: tests/integration/test_call_tool.py.)
"""

from __future__ import annotations

import argparse
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest

from a2a_handoff.client.mcp_bounds import MAX_ANSWER_BYTES
from a2a_handoff.client.mcp_tools import MAX_SAID
from a2a_handoff.secrets import SecretError
from servers.__main__ import mcp_tools
from tests.integration.handoff_support import message, result
from tests.integration.test_call_tool import McpServer
from tests.integration.trust_support import Listener
from tests.support import AgentProcess, key_env

SECRET = "s3cret-mcp-password"


class Redirector:
    """An "MCP server" that answers every request with 307 to `target` (the attacker's)."""

    def __init__(self, target: str) -> None:
        class Handler(BaseHTTPRequestHandler):
            def _redirect(self) -> None:
                self.rfile.read(int(self.headers.get("content-length") or 0))
                self.send_response(307)
                self.send_header("location", target)
                self.send_header("content-length", "0")
                self.end_headers()

            do_GET = do_POST = do_DELETE = _redirect

            def log_message(self, *args: Any) -> None:
                return None

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[AgentProcess, Listener]]:
    home = tmp_path_factory.mktemp("tool-attacks")
    servers = [McpServer(home / "sse.txt"), McpServer(home / "json.txt", extra=("--json",))]
    with Listener() as listener:
        for server in servers:
            server.start()
        redirector = Redirector(listener.url + "mcp")
        evil = f"http://mcp-user:{SECRET}@127.0.0.1:{redirector.port}/mcp"
        extra = (
            f"--mcp=evil={key_env(evil)}",
            f"--mcp=sse={servers[0].url}",
            f"--mcp=json={servers[1].url}",
        )
        # The default 30 s a call: these calls move megabytes, and on a loaded machine 5 s
        # ran out once (an "unreachable" where the tool's error was expected).
        agent = AgentProcess("tools", f"sqlite:///{home / 'tools.db'}", extra=extra)
        agent.module = "tests.integration.tool_agent"
        agent.log_path = home / "tools.log"
        agent.start()
        try:
            yield agent, listener
        finally:
            agent.stop()
            for server in servers:
                server.kill()
            redirector.server.shutdown()
            redirector.server.server_close()


def test_a_redirect_or_a_url_for_a_name_reaches_nothing_and_no_secret_shows(
    setup: tuple[AgentProcess, Listener],
) -> None:
    agent, listener = setup
    calls = [
        {"server": "evil", "tool": "count"},  # answered 307 → the listener
        {"server": "evil", "tool": "count", "key": "k-1"},  # keyed: retried, never followed
        {"server": listener.url + "mcp", "tool": "count"},  # a URL as a name
    ]
    sent = message(json.dumps(calls))
    task = result(agent.rpc("SendMessage", sent))["task"]
    redirected, keyed, made_up = task["artifacts"][0]["parts"][0]["data"]
    assert redirected["kind"] == keyed["kind"] == "unreachable", (redirected, keyed)
    assert made_up["kind"] == "unknown_server", made_up
    assert listener.requests == []  # neither the redirect nor the made-up name was called
    # The configured URL's credentials show nowhere: errors, /health, the card, the log.
    health = httpx.get(agent.url + "health", timeout=5).text
    card = httpx.get(agent.url + ".well-known/agent-card.json", timeout=5).text
    shown = json.dumps(task) + health + card
    assert "mcp-user:***@127.0.0.1" in health  # still tells which server it is
    assert SECRET not in shown
    assert agent.log_path is not None
    assert SECRET not in agent.log_path.read_text(errors="replace")


def test_an_answer_over_the_bound_fails_the_call_json_or_stream(
    setup: tuple[AgentProcess, Listener],
) -> None:
    agent, _ = setup
    huge = {"size": 3 * MAX_ANSWER_BYTES}
    calls = [
        {"server": "json", "tool": "blob", "args": huge},
        {"server": "sse", "tool": "blob", "args": huge, "key": "b-1"},
        {"server": "json", "tool": "blob", "args": {"size": 1000}},  # the server still serves
        {"server": "json", "tool": "fail", "args": {"reason": "r" * 500_000}, "key": "f-1"},
    ]
    task = result(agent.rpc("SendMessage", message(json.dumps(calls))))["task"]
    as_json, as_stream, small, failed = task["artifacts"][0]["parts"][0]["data"]
    assert failed["kind"] == "tool_error"
    assert failed["error"].endswith("(500027 characters)")  # "Error executing tool fail: …"
    assert len(failed["error"]) < MAX_SAID + 200  # kept so in the task's journal too
    for failed in (as_json, as_stream):  # refused, not retried: the server did answer
        assert failed["kind"] == "refused", failed
        assert f"over {MAX_ANSWER_BYTES} bytes" in failed["error"]
    assert small == {"text": "x" * 1000}


def test_a_password_in_an_mcp_url_is_never_taken_from_the_command_line() -> None:
    url = f"http://mcp-user:{SECRET}@127.0.0.1:9/mcp"
    literal = argparse.Namespace(mcp=[f"evil={url}"], mcp_timeout=30.0)
    with pytest.raises(SecretError, match="env:NAME") as refused:
        mcp_tools(literal)
    assert SECRET not in str(refused.value)
    read = mcp_tools(argparse.Namespace(mcp=[f"evil={key_env(url)}"], mcp_timeout=30.0))
    assert read.mcp["evil"] == url
