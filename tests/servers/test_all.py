"""`python -m servers all` prints each agent's URL once that agent serves, and a taken port
is an error before anything starts (issue 17); it passes the agents' options on as written
(a duration keeps its unit), TLS included, and refuses mutual TLS without API keys."""

from __future__ import annotations

import contextlib
import json
import os
import pty
import select
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.integration.handoff_support import REFUND, ext, message, result
from tests.support import A2A_HEADERS, ROOT, Cli, free_port
from tests.tls_support import TestCA, client

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


def refused(base: int, data: Path, *extra: str) -> str:
    """`servers all` with `extra`, refused as a usage error before anything starts: its
    stderr (nothing was printed on stdout)."""
    proc = start(base, data, *extra)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 64, err
    assert out == ""
    return err


def keyed_and_logged(tmp_path: Path, logs: Path) -> tuple[str, ...]:
    """`all`'s flags for a key per agent and user (alice the operator), logs in `logs`."""
    keys = tmp_path / "keys"
    keys.write_text("triage=kt\nbilling=kb\nhuman=kh\nalice=ka\nuser=ku\n")
    keys.chmod(0o600)
    return ("--log-dir", str(logs), "--auth-keys", str(keys), "--operators", "alice")


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
    logs = tmp_path / "logs"
    base = four_free_ports()
    proc = start(
        base,
        tmp_path / "data",
        *keyed_and_logged(tmp_path, logs),
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
    err = refused(base, tmp_path / "data", "--auth-keys", str(keys), "--operators", "alice")
    assert f"{keys} has no key for billing, human" in err
    assert "add lines billing=KEY, human=KEY" in err
    keys.write_text("triage=kt\nbilling=kb\nhuman=kh\n")
    err = refused(base, tmp_path / "data", "--auth-keys", str(keys))
    assert "the human agent needs --operators" in err


def test_all_with_an_issuer_needs_api_keys_for_the_agents_calls(tmp_path: Path) -> None:
    # The agents call each other with API keys: with tokens alone every handoff would be 401.
    err = refused(four_free_ports(), tmp_path / "data", "--oidc-issuer", "https://id.example")
    assert "--oidc-issuer needs --auth-keys or --auth-env here" in err


def call(http: httpx.Client, url: str, method: str, params: dict[str, Any], key: str) -> Any:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    return http.post(url, json=body, headers={**A2A_HEADERS, "X-API-Key": key}).json()


@pytest.mark.timeout(90)
def test_all_passes_tls_the_drain_and_retention_on(tmp_path: Path) -> None:
    # Before: `servers all` took none of them; --retain, passed on as seconds, lost its unit.
    ca = TestCA(tmp_path / "pki")
    agents = ca.issue("agents")  # 127.0.0.1: every agent's host, whatever its port
    user = ca.issue("user", uris=("spiffe://example.org/user/u",))
    logs = tmp_path / "logs"
    base = four_free_ports()
    proc = start(
        base,
        tmp_path / "data",
        *keyed_and_logged(tmp_path, logs),
        f"--tls-cert={agents.cert}",
        f"--tls-key={agents.key}",
        f"--tls-client-ca={ca.cert}",
        f"--tls-ca={ca.cert}",
        "--drain-seconds",
        "3",
        "--close-seconds=4",
        "--retain",
        "1s",
    )
    urls = [f"https://127.0.0.1:{base + i}/" for i in range(4)]
    try:
        assert proc.stdout is not None
        lines = [proc.stdout.readline() for _ in range(5)]
        assert lines[-1].startswith("all serving"), lines
        assert sorted(line.split()[1] for line in lines[:-1]) == urls  # served over HTTPS
        with client(ca.cert, user) as http:
            card = http.get(urls[1] + ".well-known/agent-card.json").json()
            assert all(i["url"].startswith("https://") for i in card["supportedInterfaces"])
            assert "mutualTLS" in card["securitySchemes"]
            # A handoff over mutual TLS: triage presents the one certificate and its own key.
            source = result(call(http, urls[0], "SendMessage", message(REFUND), "ku"))["task"]
            assert ext(source)["state"] == "TRANSFERRED", source
            pointer = ext(source)["transfer"]
            assert pointer["agentUrl"] == urls[1]
            deadline = time.monotonic() + 20
            answer: dict[str, Any] = {}
            while time.monotonic() < deadline:  # completed, then deleted a second later
                answer = call(http, urls[1], "GetTask", {"id": pointer["taskId"]}, "ku")
                if "error" in answer:
                    break
                time.sleep(0.1)
            assert answer.get("error", {}).get("code") == -32001, answer  # --retain 1s
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=40)
    assert proc.returncode == 0, err
    for name in NAMES:  # each drained with --drain-seconds (its grace: a fifth of it)
        log = (logs / f"{name}.log").read_text()
        assert "new work refused in 0.6s, running tasks handed over in 3s" in log, log


def in_a_terminal(*args: str) -> tuple[int, int]:
    """`python -m servers all ARGS` in the foreground of a terminal of its own (a pty): its
    pid, and the terminal's end a user types into."""
    pid, terminal = pty.fork()
    if pid == 0:  # the child: exec at once
        try:
            os.chdir(ROOT)
            os.execv(sys.executable, [sys.executable, "-m", "servers", "all", *args])
        finally:
            os._exit(127)
    return pid, terminal


def read_until(terminal: int, text: str, within: float) -> str:
    seen = b""
    deadline = time.monotonic() + within
    while text.encode() not in seen and time.monotonic() < deadline:
        ready, _, _ = select.select([terminal], [], [], 0.2)
        if ready:
            try:
                seen += os.read(terminal, 4096)
            except OSError:  # the other end closed: it exited
                break
    return seen.decode(errors="replace")


def exit_status(pid: int, within: float) -> int:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.1)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    raise AssertionError(f"servers all still runs {within} s after Ctrl-C")


@pytest.mark.timeout(90)
def test_ctrl_c_in_a_terminal_lets_every_agent_drain(tmp_path: Path) -> None:
    # The terminal's Ctrl-C reaches the agents too (its foreground process group): `all`
    # sending them another signal cut their drain short.
    logs = tmp_path / "logs"
    base = four_free_ports()
    pid, terminal = in_a_terminal(
        f"--base-port={base}",
        f"--data-dir={tmp_path / 'data'}",
        f"--log-dir={logs}",
        "--drain-seconds=3",
    )
    try:
        said = read_until(terminal, "all serving", within=60)
        assert "all serving" in said, said
        os.write(terminal, b"\x03")  # Ctrl-C, typed
        assert exit_status(pid, within=40) == 130
    finally:
        os.close(terminal)
        with contextlib.suppress(ProcessLookupError, ChildProcessError):
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
    for name in NAMES:
        log = (logs / f"{name}.log").read_text()
        assert "draining: not ready; new work refused in 0.6s" in log, log
        assert "drained: 0 task(s) handed over" in log, log
        assert "cut short" not in log, log


def test_all_refuses_mutual_tls_without_api_keys(tmp_path: Path) -> None:
    ca = TestCA(tmp_path / "pki")
    agents = ca.issue("agents")
    err = refused(
        four_free_ports(),
        tmp_path / "data",
        f"--tls-cert={agents.cert}",
        f"--tls-key={agents.key}",
        f"--tls-client-ca={ca.cert}",
    )
    assert "--tls-client-ca needs --auth-keys or --auth-env here" in err


def test_all_says_when_its_agents_would_not_accept_their_certificate(tmp_path: Path) -> None:
    # No --tls-ca: the agents would check each other against the system's CAs, which do not
    # know the test CA. Said at once, rather than after a minute of "not serving".
    ca = TestCA(tmp_path / "pki")
    agents = ca.issue("agents")
    err = refused(
        four_free_ports(),
        tmp_path / "data",
        "--log-dir",
        str(tmp_path / "logs"),
        f"--tls-cert={agents.cert}",
        f"--tls-key={agents.key}",
    )
    assert ": its certificate is not one its peers accept at https://127.0.0.1:" in err
    assert "unable to get local issuer certificate" in err
    assert "(check --tls-ca, and that the certificate names --host)" in err


def test_all_refuses_a_bad_duration_or_bound_before_anything_starts(tmp_path: Path) -> None:
    err = refused(four_free_ports(), tmp_path / "data", "--retain", "30")
    assert "argument --retain: a duration is a positive number and a unit" in err
    err = refused(four_free_ports(), tmp_path / "data", "--close-seconds", "-1")
    assert "close must be a number of seconds 0 or more" in err
