"""`ctx.tools.call` against a real MCP server (tests/mcp_tool_server.py, the official SDK):
a result, a tool's `isError` failing the task with its text, an unknown server, a call past
its timeout, the server killed -9 mid-call (a clear error; a new server on the port serves
the next call), a lost answer retried only for a keyed call (executed once), and a keyed
call not made again by the handler an agent killed -9 after the call runs again."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from a2a_handoff.client.mcp_tools import McpTools
from tests.integration.handoff_support import ext, message, result, wait_for
from tests.support import ROOT, AgentProcess, free_port

TIMEOUT = 5.0  # the agent's --mcp-timeout: the first call imports the MCP client (slow under load)


@dataclass
class McpServer:
    """tests/mcp_tool_server.py as a process: restartable on its port, killable."""

    counts: Path
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None
    extra: tuple[str, ...] = ()  # more options (`--json`)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def start(self) -> None:
        cmd = [
            sys.executable,
            "-m",
            "tests.mcp_tool_server",
            "--port",
            str(self.port),
            "--counts",
            str(self.counts),
            *self.extra,
        ]
        self.proc = subprocess.Popen(cmd, cwd=ROOT, stderr=subprocess.DEVNULL)
        wait_for(lambda: httpx.get(self.url, timeout=1.0).status_code > 0, every=0.05)

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def executions(self) -> list[str]:
        return self.counts.read_text().split() if self.counts.exists() else []


@pytest.fixture(scope="module")
def mcp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[McpServer]:
    server = McpServer(tmp_path_factory.mktemp("mcp") / "counts.txt")
    server.start()
    try:
        yield server
    finally:
        if server.proc is not None and server.proc.poll() is None:
            server.kill()


@pytest.fixture(scope="module")
def hold(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("hold") / "hold"


@pytest.fixture(scope="module")
def agent(
    tmp_path_factory: pytest.TempPathFactory, mcp: McpServer, hold: Path
) -> Iterator[AgentProcess]:
    home = tmp_path_factory.mktemp("agent")
    gone = f"http://127.0.0.1:{free_port()}/mcp"  # nothing listens there
    extra = (
        f"--mcp=calc={mcp.url}",
        f"--mcp=gone={gone}",
        f"--mcp-timeout={TIMEOUT}",
        f"--hold={hold}",
    )
    process = AgentProcess("tools", f"sqlite:///{home / 'tools.db'}", extra=extra)
    process.module = "tests.integration.tool_agent"
    process.log_path = home / "tools.log"
    process.start()
    try:
        yield process
    finally:
        process.stop()


def call(
    agent: AgentProcess,
    tool: str,
    args: dict[str, Any] | None = None,
    key: str | None = None,
    server: str = "calc",
    **config: Any,
) -> dict[str, Any]:
    """Send one call to the agent; the task (terminal, unless `returnImmediately`)."""
    text = json.dumps({"server": server, "tool": tool, "args": args or {}, "key": key})
    task: dict[str, Any] = result(agent.rpc("SendMessage", message(text, **config)))["task"]
    return task


def get(agent: AgentProcess, task_id: str) -> dict[str, Any]:
    task: dict[str, Any] = result(agent.rpc("GetTask", {"id": task_id}))
    return task


def state(task: dict[str, Any]) -> str:
    return str(task["status"]["state"]).removeprefix("TASK_STATE_")


def said(task: dict[str, Any]) -> str:
    return str(((task["status"].get("message") or {}).get("parts") or [{}])[0].get("text", ""))


def answer(task: dict[str, Any]) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = task["artifacts"][0]["parts"]
    return parts


def test_a_result_an_is_error_an_unknown_server_and_a_timeout(
    agent: AgentProcess, mcp: McpServer
) -> None:
    added = call(agent, "add", {"a": 2, "b": 3})
    assert state(added) == "COMPLETED", added
    assert answer(added)[1]["data"] == {"sum": 5}  # the structured content

    failed = call(agent, "fail", {"reason": "no refunds today"})
    assert state(failed) == "FAILED"
    assert said(failed).startswith("ToolCallError: calc/fail answered an error:")
    assert "no refunds today" in said(failed)

    unknown = call(agent, "add", {"a": 1, "b": 1}, server="http://127.0.0.1:1/mcp")
    assert state(unknown) == "FAILED"
    assert "no MCP server named 'http://127.0.0.1:1/mcp' is configured" in said(unknown)

    down = call(agent, "add", {"a": 1, "b": 1}, server="gone")
    assert state(down) == "FAILED"
    assert said(down).startswith("ToolCallError: MCP server gone (http://127.0.0.1:")
    assert "add failed:" in said(down), said(down)

    slow = call(agent, "sleep", {"seconds": TIMEOUT + 5})
    assert state(slow) == "FAILED"
    assert f"sleep gave no answer within {TIMEOUT:g} s" in said(slow)
    health = httpx.get(agent.url + "health").json()["mcpServers"]  # the timeout counted
    assert health["calc"] == {"url": mcp.url, "state": "closed", "consecutiveFailures": 1}
    assert health["gone"]["consecutiveFailures"] == 1


def test_a_server_killed_mid_call_is_a_clear_error_and_its_successor_serves(
    agent: AgentProcess, mcp: McpServer
) -> None:
    before = len(mcp.executions())
    task = call(agent, "count", {"hold": 30}, returnImmediately=True)
    wait_for(lambda: len(mcp.executions()) > before, every=0.02)  # executing now
    mcp.kill()
    failed = wait_for(lambda: (t := get(agent, task["id"])) and state(t) == "FAILED" and t)
    assert "calc/count" not in said(failed)  # not the tool's error: the server's failure
    assert said(failed).startswith(f"ToolCallError: MCP server calc ({mcp.url}): count failed")
    mcp.start()  # a new process on the same port: the agent connects again
    again = call(agent, "add", {"a": 1, "b": 2})
    assert state(again) == "COMPLETED", again
    assert answer(again)[1]["data"] == {"sum": 3}


@pytest.mark.anyio
async def test_a_server_that_forgot_its_session_gets_a_new_one(mcp: McpServer) -> None:
    """A server of the handshake era keeps sessions: restarted, it refuses ours before
    running the call, which is then made on a new session — keyed or not."""
    tools = McpTools({"calc": mcp.url}, mode="legacy")
    try:
        assert (await tools.call("calc", "add", {"a": 1, "b": 1})).structured == {"sum": 2}
        mcp.kill()
        mcp.start()
        assert (await tools.call("calc", "add", {"a": 2, "b": 2})).structured == {"sum": 4}
    finally:
        await tools.aclose()


def test_a_lost_answer_is_retried_only_for_a_keyed_call_which_executes_once(
    agent: AgentProcess, mcp: McpServer
) -> None:
    before = mcp.executions().count("-")
    unkeyed = call(agent, "count", {"lose": "a"})
    assert state(unkeyed) == "FAILED"  # executed, its answer lost (HTTP 502), not tried again
    assert "count failed: Server returned an error response" in said(unkeyed), said(unkeyed)
    assert mcp.executions().count("-") == before + 1  # a retry would have executed again

    keyed = call(agent, "count", {"lose": "b"}, key="order-7")
    assert state(keyed) == "COMPLETED", keyed  # the retry found the first execution
    assert answer(keyed)[0]["text"] == "done before (order-7)"
    assert mcp.executions().count("order-7") == 1


def test_a_keyed_call_made_again_is_answered_from_the_tasks_journal(
    agent: AgentProcess, mcp: McpServer
) -> None:
    calls = [
        {"server": "calc", "tool": "count", "key": "k-1"},
        {"server": "calc", "tool": "count", "key": "k-1"},  # the record: no call
        {"server": "calc", "tool": "count", "args": {"hold": 0.01}, "key": "k-1"},
        {"server": "calc", "tool": "fail", "args": {"reason": "declined"}, "key": "f-1"},
        {"server": "calc", "tool": "fail", "args": {"reason": "declined"}, "key": "f-1"},
    ]
    task = result(agent.rpc("SendMessage", message(json.dumps(calls))))["task"]
    first, again, other, failed, failed_again = answer(task)[0]["data"]
    assert first == again == {"text": "counted (k-1)"}  # the server would say "done before"
    assert other["kind"] == "replayed"
    assert "'k-1' was used before for another call (calc/count" in other["error"]
    assert failed["kind"] == failed_again["kind"] == "tool_error"
    assert failed_again["error"] == failed["error"]
    assert mcp.executions().count("k-1") == 1
    calls_made = ext(get(agent, task["id"]))["toolCalls"]
    assert sorted(calls_made) == ["f-1", "k-1"]
    assert calls_made["k-1"]["content"] == [{"type": "text", "text": "counted (k-1)"}]


def test_a_completed_call_is_not_made_again_by_a_restarted_agent(
    agent: AgentProcess, mcp: McpServer, hold: Path
) -> None:
    hold.touch()
    task = call(agent, "count", {}, key="charge-1", returnImmediately=True)
    wait_for(lambda: said(get(agent, task["id"])) == "called")  # recorded: then it waits
    agent.kill()
    hold.unlink()
    agent.start()  # resumes the task: its handler runs again and makes the same call
    done = wait_for(lambda: (t := get(agent, task["id"])) and state(t) == "COMPLETED" and t)
    # The server answers a repeated key "done before": this is the first call's answer.
    assert answer(done)[0]["text"] == "counted (charge-1)"
    assert mcp.executions().count("charge-1") == 1
