"""Keys belong to an agent name, and so does a store. Before: the lock error's hint
(`?shared=1`), followed with a different agent (logistics on billing.db), started logistics
signing with billing's keys — two agents, one JWKS, each able to pass for the other."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import ROOT, AgentProcess, _http, free_port


def start_other(*args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "servers", *args, "--port", str(free_port())]
    try:
        return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=30)
    except subprocess.TimeoutExpired:
        pytest.fail("another agent started on billing's store (it should be refused)")


def test_another_agent_on_a_shared_store_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "billing.db"
    billing = AgentProcess("billing", f"sqlite:///{db}?shared=1")
    billing.log_path = tmp_path / "billing.log"
    billing.start()
    try:
        # Its replica shares the file (and the keys beside it): same JWKS.
        replica = AgentProcess("billing", f"sqlite:///{db}?shared=1")
        replica.log_path = tmp_path / "replica.log"
        replica.start()
        try:
            jwks = [_http().get(p.url + ".well-known/jwks.json").json() for p in (billing, replica)]
            assert jwks[0] == jwks[1]
        finally:
            replica.stop()
        # Another agent is refused, saying why and what to do instead.
        done = start_other("logistics", "--store", f"sqlite:///{db}?shared=1")
        assert done.returncode == 64, done.stderr
        assert f"the signing keys ({tmp_path / 'billing.keys.json'}) belong to agent" in (
            done.stderr
        )
        assert "'billing', not 'logistics'" in done.stderr
        assert "give logistics a store of its own" in done.stderr
        # With a key file of its own, the store is still billing's: refused too.
        keys = tmp_path / "logistics.keys.json"
        init = [
            sys.executable,
            "-m",
            "a2a_handoff",
            "keys",
            "init",
            "--key-file",
            str(keys),
            "--agent",
            "logistics",
        ]
        subprocess.run(init, cwd=ROOT, check=True, capture_output=True, timeout=30)
        done = start_other(
            "logistics", "--store", f"sqlite:///{db}?shared=1", "--key-file", str(keys)
        )
        assert done.returncode == 64, done.stderr
        assert "'billing', not 'logistics'" in done.stderr
        # And billing's own key document, handed to another agent, is not that agent's.
        done = start_other(
            "logistics",
            "--store",
            f"sqlite:///{tmp_path / 'logistics.db'}",
            "--key-file",
            str(tmp_path / "billing.keys.json"),
        )
        assert done.returncode == 64, done.stderr
        assert "'billing', not 'logistics'" in done.stderr
    finally:
        billing.stop()


def test_the_lock_error_says_shared_is_for_replicas_of_one_agent(tmp_path: Path) -> None:
    db = tmp_path / "billing.db"
    billing = AgentProcess("billing", f"sqlite:///{db}")
    billing.log_path = tmp_path / "billing.log"
    billing.start()
    try:
        done = start_other("logistics", "--store", f"sqlite:///{db}")
        assert done.returncode == 64
        assert "?shared=1 if replicas of the same agent are meant to share the file" in (
            done.stderr
        )
        assert "another agent needs a store of its own" in done.stderr
    finally:
        billing.stop()
