"""What is not loaded until it is used: importing the library, and an agent started with the
default options serving requests, load none of OpenTelemetry, prometheus-client, jsonschema,
openai, mcp, grpc or protobuf (`google`) (start-up time and idle memory); joserfc only where
keys sign or verify (an agent signs its card when it starts, so there it is loaded; the bare
import has no key)."""

from __future__ import annotations

import ast
import subprocess
import sys
import uuid
from pathlib import Path

import httpx
import pytest

from tests.support import ROOT, AgentProcess

LAZY = ("opentelemetry", "prometheus_client", "jsonschema", "openai", "mcp", "grpc", "google")


def test_importing_the_library_loads_none_of_them() -> None:
    code = "import sys, a2a_handoff\nprint(sorted({m.split('.')[0] for m in sys.modules}))"
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    loaded = set(ast.literal_eval(done.stdout))
    assert "a2a_handoff" in loaded
    assert not loaded & {*LAZY, "joserfc"}


def test_the_stores_load_no_driver_they_are_not_asked_for_and_never_pytest(
    tmp_path: Path,
) -> None:
    # The scheme table knows Redis and PostgreSQL without importing them; the conformance
    # kit (a2a_handoff.stores.conformance) is the tests' own, with pytest.
    code = (
        "import sys\n"
        "from a2a_handoff.stores import open_store\n"
        f"open_store('sqlite:///{tmp_path}/a.db'), open_store('memory://')\n"
        "print(sorted({m.split('.')[0] for m in sys.modules}))\n"
        "print('a2a_handoff.stores.conformance' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    packages, kit = done.stdout.splitlines()
    loaded = set(ast.literal_eval(packages))
    assert {"a2a_handoff", "aiosqlite"} <= loaded
    assert not loaded & {"redis", "asyncpg", "pytest", "_pytest"}, loaded
    assert kit == "False"


def _imported(log: Path) -> set[str]:
    """Top-level packages in `-X importtime` lines (PYTHONPROFILEIMPORTTIME) of a log."""
    names = set()
    for line in log.read_text(errors="replace").splitlines():
        if line.startswith("import time:") and "|" in line:
            names.add(line.rsplit("|", 1)[1].strip().split(".")[0])
    return names


@pytest.mark.timeout(60)
def test_a_started_agent_serving_requests_loads_them_only_when_asked(tmp_path: Path) -> None:
    log = tmp_path / "echo.log"
    agent = AgentProcess(
        "echo",
        f"sqlite:///{tmp_path}/echo.db",
        env={"PYTHONPROFILEIMPORTTIME": "1"},
        log_path=log,
    )
    agent.start()
    try:
        for _ in range(2):
            message = {
                "messageId": str(uuid.uuid4()),
                "role": "ROLE_USER",
                "parts": [{"text": "hi"}],
            }
            reply = agent.rpc("SendMessage", {"message": message})
            assert reply["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"  # type: ignore[index]
        card = httpx.get(agent.url + ".well-known/agent-card.json").json()
        assert card["signatures"]  # signed at start: joserfc is needed there
        loaded = _imported(log)
        assert {"a2a_handoff", "uvicorn", "joserfc"} <= loaded  # the log is the import log
        assert not loaded & set(LAZY), sorted(loaded & set(LAZY))

        # Asked for, the metrics are all there: the requests counted before the registry
        # was made, and the push notifications' collector registered at start.
        text = httpx.get(agent.url + "metrics").text
        assert 'a2a_requests_total{method="SendMessage",outcome="ok"} 2.0' in text
        assert "a2a_push_deliveries_total" in text
        assert "a2a_open_streams 0.0" in text
        assert "prometheus_client" in _imported(log)
    finally:
        agent.stop()
