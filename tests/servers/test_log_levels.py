"""What the example servers' log levels show: info a line per task transition, debug a line
per HTTP request as well; every line's time is ISO 8601, and JSON lines carry no ANSI
escapes (uvicorn's `color_message`) — real processes."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx

from tests.support import A2A_HEADERS, ROOT, free_port


def serve_and_send(tmp_path: Path, level: str, fmt: str = "text") -> str:
    """An echo agent at `level`: one message sent, then stopped; what it logged."""
    port = free_port()
    cmd = [
        sys.executable,
        "-m",
        "servers",
        "echo",
        "--port",
        str(port),
        "--store",
        "memory://",
        "--log-level",
        level,
        "--log-format",
        fmt,
    ]
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


ISO_8601 = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")


def test_json_lines_carry_no_color_message_and_every_time_is_iso_8601(tmp_path: Path) -> None:
    lines = [json.loads(line) for line in serve_and_send(tmp_path, "debug", "json").splitlines()]
    loggers = {line["logger"] for line in lines}
    assert {"uvicorn.error", "uvicorn.access", "a2a_handoff.events"} <= loggers
    running = [line for line in lines if line["message"].startswith("Uvicorn running on")]
    assert running  # the line uvicorn gives a `color_message` (ANSI escapes) to
    assert not [line for line in lines if "color_message" in line or "\x1b" in json.dumps(line)]
    assert all(ISO_8601.fullmatch(line["time"]) for line in lines), [x["time"] for x in lines]


def test_text_lines_start_with_an_iso_8601_time(tmp_path: Path) -> None:
    lines = serve_and_send(tmp_path, "debug").splitlines()
    assert any("Uvicorn running on" in line for line in lines)
    assert any("-> completed" in line for line in lines)  # the event lines' fast path too
    assert all(ISO_8601.match(line.split(" ", 1)[0]) for line in lines), lines
