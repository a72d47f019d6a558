"""The demo behind `scripts/demo`: real agents on SQLite and a scripted conversation."""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

HEADERS = {"A2A-Version": "1.0"}


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _send(url: str, text: str, task_id: str | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {
        "messageId": str(uuid.uuid4()),
        "role": "ROLE_USER",
        "parts": [{"text": text}],
    }
    if task_id:
        message["taskId"] = task_id
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}
    reply = httpx.post(url, json=body, headers=HEADERS, timeout=30).json()
    task: dict[str, Any] = reply["result"]["task"]
    return task


def _say(task: dict[str, Any]) -> None:
    status = task["status"]
    line = f"  task {task['id'][:8]} {status['state'].removeprefix('TASK_STATE_')}"
    if "message" in status:
        line += f": {status['message']['parts'][0].get('text', '')}"
    for artifact in task.get("artifacts", []):
        line += f"  [artifact {artifact.get('name', '')}: {artifact['parts'][0]}]"
    print(line)


def main() -> int:
    data = Path(tempfile.mkdtemp(prefix="a2a-demo-"))
    port = _free_port()
    url = f"http://127.0.0.1:{port}/"
    store = f"sqlite:///{data / 'echo.db'}"
    cmd = [sys.executable, "-m", "servers", "echo", "--port", str(port), "--store", store]
    proc = subprocess.Popen(cmd)
    try:
        for _ in range(200):
            try:
                httpx.get(url + "health", timeout=1)
                break
            except httpx.TransportError:
                time.sleep(0.05)
        print(f"echo agent at {url} (store {store})")
        print("> hello")
        _say(_send(url, "hello"))
        print("> ask: What is your name?")
        task = _send(url, "ask: What is your name?")
        _say(task)
        print("> Ada")
        _say(_send(url, "Ada", task_id=task["id"]))
        return 0
    finally:
        proc.terminate()
        proc.wait(10)


if __name__ == "__main__":
    sys.exit(main())
