"""What the scripts install: `scripts/demo` nothing system-wide (before, it installed
redis-server, chromium and chromium-driver with apt, which only the tests need); the test
command's set-up installs those, as the README says."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.support import ROOT

SYSTEM = ("redis-server", "chromium", "chromium-browser", "chromedriver", "apt-get", "sudo")


def machine_without_test_packages(tmp_path: Path) -> dict[str, str]:
    """An environment whose PATH has every command but the tests' system packages, and an
    apt-get (and sudo) that only write down what they were asked to install."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for directory in os.environ["PATH"].split(os.pathsep):
        if not os.path.isdir(directory):
            continue
        for entry in os.scandir(directory):
            target = bin_dir / entry.name
            if entry.name not in SYSTEM and not target.exists():
                target.symlink_to(entry.path)
    asked = tmp_path / "apt-get.log"
    for stub in ("apt-get", "sudo"):
        script = bin_dir / stub
        script.write_text(f'#!/bin/sh\necho "{stub} $*" >> {asked}\n')
        script.chmod(0o755)
    return {**os.environ, "PATH": str(bin_dir)}


def test_the_demo_set_up_installs_nothing_system_wide(tmp_path: Path) -> None:
    env = machine_without_test_packages(tmp_path)
    done = subprocess.run(
        ["scripts/bootstrap", "demo"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    assert not (tmp_path / "apt-get.log").exists(), (tmp_path / "apt-get.log").read_text()
    assert "demo" in (ROOT / "scripts" / "demo").read_text().split("scripts/bootstrap", 1)[1]


def test_the_test_set_up_installs_redis_and_chromium(tmp_path: Path) -> None:
    env = machine_without_test_packages(tmp_path)
    done = subprocess.run(
        ["scripts/bootstrap"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr
    asked = (tmp_path / "apt-get.log").read_text()
    assert "apt-get install -y -q redis-server" in asked
    assert "apt-get install -y -q chromium chromium-driver" in asked
    assert "installing redis-server with apt-get (for the tests)" in done.stderr
    # The README says so, next to the test command.
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert "installs nothing outside the checkout" in readme
    assert "`redis-server` (the Redis tests)" in readme
    assert "`chromium` with `chromium-driver`" in readme
