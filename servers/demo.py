"""The demo behind `scripts/demo`: real agents on SQLite, a conversation with a handoff.

Starts triage, billing and logistics (`python -m servers all`), then talks to triage through
the orchestrator CLI: a refund request is handed off to billing, billing asks for the order
id, the answer completes the refund; then the conversation's trace is printed.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

SCRIPT = ["I was charged twice for my order, I want a refund", "order 12345"]


def _free_base_port(count: int = 3) -> int:
    for _ in range(50):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            base = int(probe.getsockname()[1])
        if base + count >= 65535:
            continue
        try:
            for offset in range(count):
                with socket.socket() as other:
                    other.bind(("127.0.0.1", base + offset))
        except OSError:
            continue
        return base
    raise RuntimeError("no free ports")


def _wait_healthy(urls: list[str], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    for url in urls:
        while True:
            try:
                if httpx.get(url + "health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"{url} did not come up")
            time.sleep(0.1)


def main() -> int:
    work = Path(tempfile.mkdtemp(prefix="a2a-demo-"))
    base = _free_base_port()
    agents = subprocess.Popen(
        [sys.executable, "-m", "servers", "all", "--base-port", str(base),
         "--data-dir", str(work / "data")],
    )  # fmt: skip
    urls = [f"http://127.0.0.1:{base + i}/" for i in range(3)]
    orchestrator = [sys.executable, "-m", "orchestrator", "--session", str(work / "session.json")]
    try:
        _wait_healthy(urls)
        print(f"\nagents are up; data in {work / 'data'}\n", flush=True)
        for i, text in enumerate(SCRIPT):
            print(f"you> {text}", flush=True)
            entry = ["--entry", urls[0]] if i == 0 else []
            code = subprocess.call([*orchestrator, "send", *entry, text])
            print(f"(exit code {code})\n", flush=True)
        print("trace of the conversation:", flush=True)
        subprocess.call([*orchestrator, "trace"])
        return 0
    finally:
        agents.terminate()
        agents.wait(15)


if __name__ == "__main__":
    sys.exit(main())
