"""What an optional extra's absence says works from a clone of the repository (the package
is not published: `pip install '.[postgres]'`, not `a2a-handoff[postgres]`), and the README
names every extra."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.support import ROOT, free_port

WITHOUT = """import sys
for name in {blocked!r}:
    sys.modules[name] = None  # as if the extra were not installed: importing it fails
from servers.__main__ import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.parametrize(
    ("blocked", "options", "extra"),
    [
        (["asyncpg"], ["--store", "postgresql://127.0.0.1:1/db"], "postgres"),
        (["redis"], ["--store", "redis://127.0.0.1:1/0"], "redis"),
        (["opentelemetry.sdk"], ["--otlp-endpoint", "http://127.0.0.1:1"], "otel"),
        (["grpc"], ["--grpc-port", "0"], "grpc"),
        (["google.protobuf"], ["--grpc-port", "0"], "grpc"),
    ],
)
def test_a_missing_extra_says_how_to_install_it_from_the_clone(
    tmp_path: Path, blocked: list[str], options: list[str], extra: str
) -> None:
    cmd = [
        sys.executable,
        "-c",
        WITHOUT.format(blocked=blocked),
        "echo",
        "--port",
        str(free_port()),
        *options,
    ]
    if "--store" not in options:
        cmd += ["--store", "memory://"]
    else:
        cmd += ["--key-file", str(tmp_path / "keys.json")]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 64, done.stderr
    assert f"pip install '.[{extra}]' in the a2a-handoff clone" in done.stderr
    assert "a2a-handoff[" not in done.stderr
    assert done.stderr.count("\n") == 1, done.stderr


def test_the_readme_names_every_extra() -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    install = (ROOT / "README.md").read_text().split("## Install", 1)[1].split("\n## ", 1)[0]
    named = set(re.findall(r"`\[([a-z]+)\]`", install))
    assert named == set(extras), sorted(set(extras) - named)


def test_the_package_names_no_unpublished_distribution_to_install() -> None:
    said = [
        f"{path.relative_to(ROOT)}:{n}"
        for d in ("a2a_handoff", "servers", "orchestrator")
        for path in (ROOT / d).rglob("*.py")
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if "pip install 'a2a-handoff[" in line
        and not path.is_relative_to(ROOT / "a2a_handoff" / "adapters")  # another's to change
    ]
    assert said == []
