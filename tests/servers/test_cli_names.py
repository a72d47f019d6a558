"""`--help` and `--version` name the command that was run: the console script's name when
installed (`a2a-agent`, `a2a-handoff`), `python -m …` when run as a module."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import ROOT

SCRIPT = """import sys
from {module}.__main__ import main
if __name__ == '__main__':
    sys.exit(main())
"""


def run(cmd: list[str]) -> str:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize(
    ("script", "module"), [("a2a-agent", "servers"), ("a2a-handoff", "a2a_handoff")]
)
def test_the_console_script_names_itself(tmp_path: Path, script: str, module: str) -> None:
    path = tmp_path / script  # what pip writes for a [project.scripts] entry
    path.write_text(SCRIPT.format(module=module))
    assert run([sys.executable, str(path), "--help"]).startswith(f"usage: {script} ")
    assert run([sys.executable, str(path), "--version"]).startswith(f"{script} ")


def test_run_as_a_module_it_says_python_m() -> None:
    assert run([sys.executable, "-m", "servers", "--version"]).startswith("python -m servers ")
    help_all = run([sys.executable, "-m", "servers", "all", "--help"])
    assert help_all.startswith("usage: python -m servers all ")
