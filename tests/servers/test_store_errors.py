"""A store an agent cannot use is one line on stderr saying what is wrong and what fixes it,
exit 64, before anything listens: no driver's traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.postgres_support import HOST, PORT, USER
from tests.support import ROOT, free_port


def serve_echo(store: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    cmd = [
        sys.executable,
        "-m",
        "servers",
        "echo",
        "--port",
        str(free_port()),
        "--store",
        store,
        "--key-file",
        str(tmp_path / "echo.keys.json"),
    ]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize(
    ("store", "said"),
    [
        (
            "postgresql://127.0.0.1:1/nope",
            "cannot reach PostgreSQL at 127.0.0.1:1 (Connection refused): start it",
        ),
        (
            f"postgresql://{USER}@{HOST}:{PORT}/a2a_test_no_such_db",
            f"PostgreSQL at {HOST}:{PORT} has no database 'a2a_test_no_such_db'",
        ),
    ],
)
def test_a_postgres_store_that_cannot_be_used_is_one_line_with_the_fix(
    tmp_path: Path, store: str, said: str
) -> None:
    done = serve_echo(store, tmp_path)
    assert done.returncode == 64, done.stderr
    assert done.stderr.startswith(f"error: {said}"), done.stderr
    assert done.stderr.count("\n") == 1, done.stderr  # one line, no traceback
    if "no database" in said:
        assert "create it (createdb -h" in done.stderr
