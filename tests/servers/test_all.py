"""`python -m servers all` prints each agent's URL once that agent serves, and a taken port
is an error before anything starts (issue 17)."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
from pathlib import Path

import httpx

from tests.support import A2A_HEADERS, ROOT, Cli, free_port

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


def start(base: int, data: Path, *extra: str) -> subprocess.Popen[str]:
    cmd = [
        sys.executable,
        "-m",
        "servers",
        "all",
        "--base-port",
        str(base),
        "--data-dir",
        str(data),
        *extra,
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


def test_all_passes_every_agent_option_on(tmp_path: Path) -> None:
    # Before: `servers all` refused --log-format, --log-level, --llm, limits and auth.
    keys = tmp_path / "keys"
    keys.write_text("triage=kt\nbilling=kb\nhuman=kh\nalice=ka\nuser=ku\n")
    keys.chmod(0o600)
    logs = tmp_path / "logs"
    base = four_free_ports()
    proc = start(
        base,
        tmp_path / "data",
        "--log-dir",
        str(logs),
        "--auth-keys",
        str(keys),
        "--operators",
        "alice",
        "--log-format",
        "json",
        "--log-level",
        "debug",
        "--llm",
        "--max-streams",
        "7",
        "--ttl",
        "60",
    )
    urls = [f"http://127.0.0.1:{base + i}/" for i in range(4)]
    try:
        assert proc.stdout is not None
        lines = [proc.stdout.readline() for _ in range(5)]
        assert lines[-1].startswith("all serving"), lines
        call = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "none"}}
        for url in urls:  # --auth-keys: every agent asks for a key
            assert httpx.post(url, json=call, headers=A2A_HEADERS).status_code == 401
            known = {**A2A_HEADERS, "X-API-Key": "ku"}
            assert httpx.post(url, json=call, headers=known).json()["error"]["code"] == -32001
        # Under auth, a handoff goes through: each agent presents its own principal's key.
        origins = tmp_path / "origins"
        origins.write_text("".join(f"{url.rstrip('/')}=ku\n" for url in urls))
        origins.chmod(0o600)
        cli = Cli(tmp_path / "session.json")
        code, out = cli.run(
            "--keys-file",
            str(origins),
            "send",
            "--entry",
            urls[0],
            "I was charged twice for order 12345, I want a refund",
        )
        assert code == 0, out
        assert "[billing] completed: Refund of $49.99 issued for order 12345." in out
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert err == ""  # the agents' output went to their log files
    triage = (logs / "triage.log").read_text().splitlines()
    assert "--llm: no --llm-url and no $OPENAI_BASE_URL: routing by keywords" in triage
    records = [json.loads(line) for line in triage if line.startswith("{")]
    assert records, triage  # --log-format json
    assert any('"POST / HTTP/1.1"' in r.get("message", "") for r in records)  # debug
    assert (logs / "human.log").stat().st_mode & 0o077 == 0


def test_all_under_auth_needs_a_key_per_calling_agent_and_operators(tmp_path: Path) -> None:
    keys = tmp_path / "keys"
    keys.write_text("triage=kt\nuser=ku\n")
    keys.chmod(0o600)
    base = four_free_ports()
    proc = start(base, tmp_path / "data", "--auth-keys", str(keys), "--operators", "alice")
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 64
    assert f"{keys} has no key for billing, human" in err
    assert "add lines billing=KEY, human=KEY" in err
    keys.write_text("triage=kt\nbilling=kb\nhuman=kh\n")
    proc = start(base, tmp_path / "data", "--auth-keys", str(keys))
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 64
    assert "the human agent needs --operators" in err
    assert out == ""


def test_all_with_an_issuer_needs_api_keys_for_the_agents_calls(tmp_path: Path) -> None:
    # The agents call each other with API keys: with tokens alone every handoff would be 401.
    proc = start(four_free_ports(), tmp_path / "data", "--oidc-issuer", "https://id.example")
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 64
    assert "--oidc-issuer needs --auth-keys or --auth-env here" in err
    assert out == ""
