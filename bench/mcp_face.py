"""What the MCP face costs an agent: start-up time and idle memory, with `--mcp-server` and
without, over a few fresh `python -m servers billing` processes each.

    .venv/bin/python bench/mcp_face.py [ROUNDS]

Start-up: from spawning the process to its first 200 on `/health`. Idle RSS: psutil's, read
once the agent has answered one `tools/list` (with MCP) or one `GetTask` (without) and then
stood idle for a second. The rounds alternate on and off. (That an agent without the option
never imports `mcp` is a test: tests/integration/test_mcp_server.py.)
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.support import ROOT, free_port


def one(mcp: bool, tmp: Path) -> tuple[float, float]:
    port = free_port()
    db = tmp / f"billing-{port}.db"
    cmd = [
        sys.executable,
        "-m",
        "servers",
        "billing",
        "--port",
        str(port),
        "--store",
        f"sqlite:///{db}",
    ] + (["--mcp-server"] if mcp else [])
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/"
    try:
        with httpx.Client(timeout=5) as http:
            while True:
                try:
                    if http.get(url + "health").status_code == 200:
                        break
                except httpx.TransportError:
                    time.sleep(0.01)
            ready = time.perf_counter() - started
            if mcp:
                body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
                headers = {
                    "Accept": "application/json, text/event-stream",
                    "MCP-Protocol-Version": "2025-11-25",
                }
                assert http.post(url + "mcp", json=body, headers=headers).status_code == 200
            else:
                body = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "x"}}
                http.post(url, json=body, headers={"A2A-Version": "1.0"})
            time.sleep(1.0)
            rss = psutil.Process(proc.pid).memory_info().rss / 2**20
        return ready, rss
    finally:
        proc.terminate()
        proc.wait(10)


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    results: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(rounds):
            for mcp in (False, True):
                results[mcp].append(one(mcp, Path(tmp)))
    for mcp, runs in results.items():
        ready = statistics.median(r[0] for r in runs)
        rss = statistics.median(r[1] for r in runs)
        print(
            f"mcp {'on ' if mcp else 'off'}: start-up p50 {ready * 1000:.0f} ms,"
            f" idle RSS p50 {rss:.1f} MiB ({len(runs)} runs)"
        )


if __name__ == "__main__":
    main()
