"""`python -m servers all` prints each agent's URL once that agent serves, and a taken port
is an error before anything starts (issue 17)."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
from pathlib import Path

import httpx

from tests.support import ROOT, free_port

NAMES = ("triage", "billing", "logistics", "human")


def four_free_ports() -> int:
    for _ in range(50):
        base = free_port()
        if base + 3 >= 65536:
            continue
        socks = []
        try:
            for port in range(base, base + 4):
                sock = socket.socket()
                socks.append(sock)
                sock.bind(("127.0.0.1", port))
        except OSError:
            continue
        finally:
            for sock in socks:
                sock.close()
        return base
    raise AssertionError("no four consecutive free ports")


def start(base: int, data: Path) -> subprocess.Popen[str]:
    cmd = [
        sys.executable,
        "-m",
        "servers",
        "all",
        "--base-port",
        str(base),
        "--data-dir",
        str(data),
    ]
    return subprocess.Popen(
        cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def test_each_url_is_printed_once_its_agent_serves(tmp_path: Path) -> None:
    base = four_free_ports()
    proc = start(base, tmp_path / "data")
    try:
        assert proc.stdout is not None
        seen = []
        for _ in NAMES:
            line = proc.stdout.readline()
            name, url = line.split()
            # Printed only once it serves: it answers at once.
            assert httpx.get(url + "health", timeout=2).status_code in (200, 503), line
            seen.append((name, url))
        assert sorted(seen) == sorted(
            (name, f"http://127.0.0.1:{base + i}/") for i, name in enumerate(NAMES)
        )
        assert proc.stdout.readline().startswith("all serving")
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)
    assert proc.returncode == 0


def test_a_taken_port_is_an_error_and_no_url_is_printed(tmp_path: Path) -> None:
    base = four_free_ports()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", base + 2))
        taken.listen()
        proc = start(base, tmp_path / "data")
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 64, err  # a usage error, as in the exit-code table
    assert f"port in use on 127.0.0.1: {base + 2} (logistics)" in err
    assert "http://" not in out
