"""An id holding a control character (NUL, a newline) is a bad parameter, said as one: -32602
over JSON-RPC, 400 over REST — never an HTTP 500 nor "store unavailable", and the store and
`/health` are as before. Before: a NUL in a task id got HTTP 500 over REST and -32105 over
JSON-RPC (the store refused the string)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.postgres_support import PostgresDatabase
from tests.support import A2A_HEADERS, AgentProcess

NUL_IDS = ["t\x00x", "\x00", "a\nb", "c\x7f"]


def message(**ids: str) -> dict[str, Any]:
    fields = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": "hi"}]}
    return {"message": {**fields, **ids}}


@pytest.fixture(params=["sqlite", "postgres"])
def agent(
    request: pytest.FixtureRequest, tmp_path: Path, postgres_database: PostgresDatabase
) -> Iterator[AgentProcess]:
    """An echo agent on SQLite, and on PostgreSQL (whose text refuses a NUL outright)."""
    if request.param == "sqlite":
        store = f"sqlite:///{tmp_path / 'echo.db'}"
    else:
        store = postgres_database.store_url()
    process = AgentProcess("echo", store)
    process.log_path = tmp_path / "echo.log"
    process.start()
    try:
        yield process
    finally:
        process.stop()


def test_an_id_with_a_control_character_is_a_bad_parameter_everywhere(
    agent: AgentProcess,
) -> None:
    echo_agent = agent
    done = echo_agent.rpc("SendMessage", message())
    task_id = done["result"]["task"]["id"]  # type: ignore[index]
    for bad in NUL_IDS:
        calls: list[tuple[str, dict[str, Any], str]] = [
            ("GetTask", {"id": bad}, "id"),
            ("CancelTask", {"id": bad}, "id"),
            ("SubscribeToTask", {"id": bad}, "id"),
            ("ListTasks", {"contextId": bad}, "contextId"),
            ("SendMessage", message(taskId=bad), "message.taskId"),
            ("SendMessage", message(contextId=bad), "message.contextId"),
            ("SendMessage", message(messageId=bad), "message.messageId"),
        ]
        for method, params, field in calls:
            answer = echo_agent.rpc(method, params)
            error = answer["error"]
            assert error["code"] == -32602, (method, bad, answer)  # type: ignore[index]
            assert field in error["message"], error  # type: ignore[index]
            assert "control characters" in error["message"], error  # type: ignore[index]
    with httpx.Client(timeout=10) as http:
        for path in ("tasks/t%00x", "tasks/%0A", "tasks/t%00x:cancel"):
            method = "POST" if path.endswith(":cancel") else "GET"
            answer = http.request(method, echo_agent.url + path, headers=A2A_HEADERS)
            assert answer.status_code == 400, (path, answer.text)
            assert answer.json()["error"]["status"] == "INVALID_ARGUMENT"
        health = http.get(echo_agent.url + "health")
        assert health.status_code == 200, health.text
    # The store serves as before.
    got = echo_agent.rpc("GetTask", {"id": task_id})
    assert got["result"]["status"]["state"] == "TASK_STATE_COMPLETED"  # type: ignore[index]
