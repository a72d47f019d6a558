"""The demo behind `scripts/demo`: real agents on SQLite, a conversation with a handoff.

Starts triage, billing, logistics and the human agent (`python -m servers all`, with the
handoff contracts of `contracts/` enforced; their logs in files, whose paths it prints, so
the terminal shows the conversation the README shows), then talks
to triage through the orchestrator CLI: a refund request is handed off to billing, billing
asks for the order id, the answer completes the refund; the conversation's trace is printed.
Then a refund over $500: billing escalates it to the human agent before issuing it, an
operator finds it in the inbox and approves it, and the user's conversation follows the
decision back to billing, which issues the refund.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

AGENTS = ("triage", "billing", "logistics", "human")

SCRIPT = ["I was charged twice for my order, I want a refund", "order 12345"]
BIG_REFUND = "Please refund $750 for order 4242, the sofa arrived broken"


def _free_base_port(count: int = len(AGENTS)) -> int:
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


def _start_agents(work: Path, base: int) -> tuple[subprocess.Popen[str], dict[str, str]]:
    """`servers all`, its agents' logs in files: each agent's URL and log file printed, then
    "all serving" — before the first prompt. The agents' URLs by name (`all` prints each
    agent as it comes up, in no set order)."""
    contracts = Path(__file__).resolve().parent.parent / "contracts"
    logs = work / "logs"
    agents = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "servers",
            "all",
            "--base-port",
            str(base),
            "--data-dir",
            str(work / "data"),
            "--contracts",
            str(contracts),
            "--log-dir",
            str(logs),
        ],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert agents.stdout is not None
    urls: dict[str, str] = {}
    # `all` prints a line per agent once it serves, then "all serving" (or fails, exiting
    # within its own start-up bound: the pipe closes).
    try:
        for line in agents.stdout:
            if line.startswith("all serving"):
                for name in AGENTS:  # in a set order, whichever came up first
                    print(f"{name:10} {urls[name]:26} log: {logs / name}.log", flush=True)
                print(f"all serving; data in {work / 'data'}\n", flush=True)
                return agents, urls
            name, url = line.split()
            urls[name] = url
    except BaseException:
        _stop(agents)
        raise
    agents.wait(15)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(agents.pid, signal.SIGTERM)  # any agent that did start
    raise NotStarted(f"the agents did not start (servers all: exit {agents.returncode})")


class NotStarted(Exception):
    """`servers all` ended before all its agents served (a port taken meanwhile, say)."""


def _serving(work: Path, tries: int = 3) -> tuple[subprocess.Popen[str], dict[str, str]]:
    """`_start_agents` on free ports, tried again on others when a port free a moment ago
    was taken before an agent bound it (another program's, between the probe and the bind)."""
    for attempt in range(tries):
        try:
            return _start_agents(work, _free_base_port())
        except NotStarted as failed:
            if attempt == tries - 1:
                raise SystemExit(str(failed)) from None
    raise AssertionError("unreachable")


def _stop(agents: subprocess.Popen[str]) -> None:
    """`servers all` and its agents (its process group) stopped, waited for."""
    if agents.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(agents.pid, signal.SIGTERM)
    agents.wait(15)


def _call(cmd: list[str]) -> int:
    """A command the demo runs, out of the terminal's reach of Ctrl-C (which stops the demo,
    and the demo stops it: no half-run command's complaint)."""
    return subprocess.call(cmd, start_new_session=True)


def main() -> int:
    """The demo; Ctrl-C stops it and its agents quietly (exit 130)."""
    try:
        return _demo()
    except KeyboardInterrupt:
        print(flush=True)  # the terminal's ^C stays on a line of its own
        return 130


def _demo() -> int:
    work = Path(tempfile.mkdtemp(prefix="a2a-demo-"))
    agents, urls = _serving(work)
    orchestrator = [sys.executable, "-m", "orchestrator", "--session", str(work / "session.json")]
    try:
        for i, text in enumerate(SCRIPT):
            print(f"you> {text}", flush=True)
            entry = ["--entry", urls["triage"]] if i == 0 else []
            _call([*orchestrator, "send", *entry, text])
        print("\nyou$ python -m orchestrator trace", flush=True)
        _call([*orchestrator, "trace"])
        _escalation(work, urls["triage"], urls["human"])
        return 0
    finally:
        _stop(agents)


def _escalation(work: Path, triage: str, human: str) -> None:
    """A refund over the limit: escalated, approved by an operator, then issued."""
    user = [sys.executable, "-m", "orchestrator", "--session", str(work / "session2.json")]
    operator = [sys.executable, "-m", "orchestrator"]
    print(f"\n--- a refund over $500 ---\nyou> {BIG_REFUND}", flush=True)
    _call([*user, "--wait", "3", "send", "--entry", triage, BIG_REFUND])
    print(flush=True)
    print(f"operator$ python -m orchestrator inbox --agent {human}", flush=True)
    _call([*operator, "inbox", "--agent", human])
    listing = subprocess.run(
        [*operator, "--json", "inbox", "--agent", human],
        capture_output=True,
        text=True,
        start_new_session=True,
    )
    task = json.loads(listing.stdout.splitlines()[0])["taskId"]
    note = "checked the photos with the customer"
    print(f"\noperator$ python -m orchestrator approve {task} '{note}' --agent {human}")
    _call([*operator, "approve", task, note, "--agent", human])
    print(f"\nyou$ python -m orchestrator watch {task} --agent {human}", flush=True)
    _call([*user, "watch", task, "--agent", human])
    print("\nyou$ python -m orchestrator trace", flush=True)
    _call([*user, "trace"])


if __name__ == "__main__":
    sys.exit(main())
