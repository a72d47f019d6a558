"""What the example servers' log levels show: info a line per task transition, debug a line
per HTTP request as well (real processes)."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx

from tests.support import A2A_HEADERS, ROOT, free_port


def serve_and_send(tmp_path: Path, level: str) -> str:
    """An echo agent at `level`: one message sent, then stopped; what it logged."""
    port = free_port()
    cmd = [sys.executable, "-m", "servers", "echo", "--port", str(port),
           "--store", "memory://", "--log-level", level]  # fmt: skip
    proc = subprocess.Popen(cmd, cwd=ROOT, stderr=subprocess.PIPE, text=True)
    try:
        url = f"http://127.0.0.1:{port}/"
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.get(url + ".well-known/agent-card.json", timeout=1)
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "the echo agent did not start"
                time.sleep(0.1)
        message = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": "hi"}]}
        body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}
        answer = httpx.post(url, json=body, headers=A2A_HEADERS, timeout=10).json()
        assert answer["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=20)
    return err


def test_info_shows_transitions_and_debug_adds_each_request(tmp_path: Path) -> None:
    info = serve_and_send(tmp_path, "info")
    assert "-> completed" in info
    assert '"POST / HTTP/1.1" 200' not in info
    debug = serve_and_send(tmp_path, "debug")
    assert "-> completed" in debug
    assert '"POST / HTTP/1.1" 200' in debug
