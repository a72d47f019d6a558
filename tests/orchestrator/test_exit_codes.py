"""One exit-code table for the three command lines, usage errors 64, options before or after
the command, --version everywhere, quiet broken pipes (issue 17). Each CLI runs for real."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

import a2a_handoff
from a2a_handoff.exits import EXIT_TABLE, ExitCode
from tests.support import ROOT, AgentProcess, Cli

CLIS = ("orchestrator", "servers", "a2a_handoff")
TABLE = {
    0: "completed",
    1: "failed",
    2: "input",
    3: "reached",
    4: "pending",
    5: "refused",
    6: "not delivered",
    64: "usage",
    130: "interrupted",
}


def run(*args: str, stdin: str | None = None) -> tuple[int, str, str]:
    done = subprocess.run(
        [sys.executable, "-m", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        input=stdin,
    )
    return done.returncode, done.stdout, done.stderr


@pytest.fixture(scope="module")
def echo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AgentProcess]:
    tmp = tmp_path_factory.mktemp("echo")
    agent = AgentProcess("echo", f"sqlite:///{tmp / 'echo.db'}")
    agent.start()
    try:
        yield agent
    finally:
        agent.stop()


def test_the_table_is_the_codes_the_clis_use() -> None:
    codes = {int(code) for code in ExitCode}
    assert codes == set(TABLE)
    listed = {int(m) for m in re.findall(r"^  (\d+) ", EXIT_TABLE, re.M)}
    assert listed == codes
    for code, word in TABLE.items():
        assert re.search(rf"^  {code} +.*{word}", EXIT_TABLE, re.M), (code, word)


@pytest.mark.parametrize("cli", CLIS)
def test_every_help_shows_the_table(cli: str) -> None:
    code, out, _ = run(cli, "--help")
    assert code == 0
    assert EXIT_TABLE in out


def test_the_cli_docs_show_the_table() -> None:
    docs = (ROOT / "docs" / "cli.md").read_text()
    assert EXIT_TABLE in docs


@pytest.mark.parametrize(
    "args",
    [
        ("orchestrator", "send"),  # TEXT missing
        ("orchestrator", "frobnicate"),
        ("orchestrator", "--wait", "soon", "trace"),
        ("servers", "billing"),  # --port missing
        ("servers", "all", "--base-port", "x"),
        ("a2a_handoff", "lint"),  # DIR missing
        ("a2a_handoff",),
    ],
    ids=lambda a: " ".join(a),
)
def test_usage_errors_exit_64_never_2(args: tuple[str, ...]) -> None:
    code, _, err = run(*args)
    assert code == 64, err  # 2 means "an agent asks for input"
    assert "usage:" in err


@pytest.mark.parametrize("cli", CLIS)
def test_version_everywhere(cli: str) -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert a2a_handoff.__version__ == pyproject["project"]["version"]
    code, out, _ = run(cli, "--version")
    assert code == 0
    assert out.split()[-1] == a2a_handoff.__version__


def test_options_work_after_the_command(echo: AgentProcess, tmp_path: Path) -> None:
    session = tmp_path / "s.json"
    code, out, err = run(
        "orchestrator", "send", "--json", "--session", str(session), "--entry", echo.url, "hi"
    )
    assert code == 0, err
    assert json.loads(out.splitlines()[-1])["event"] == "completed"
    assert session.exists()
    # before the command too, and `send --help` lists them
    code, out, _ = run("orchestrator", "--json", "--session", str(session), "send", "again")
    assert code == 0
    assert json.loads(out.splitlines()[-1])["event"] == "completed"
    code, out, _ = run("orchestrator", "send", "--help")
    assert "--session" in out
    assert "--json" in out
    assert "--wait" in out


def test_a_closed_pipe_ends_quietly(echo: AgentProcess, tmp_path: Path) -> None:
    cli = Cli(tmp_path / "s.json")
    for i in range(3):
        assert cli.run("send", "--entry", echo.url, f"hello {i}")[0] == 0
    data = json.loads(cli.session.read_text())
    data["chain"] = data["chain"] * 4000  # long enough to overflow a pipe buffer
    cli.session.write_text(json.dumps(data))
    for command in (["--json", "trace"], ["send", "tokens: " + "word " * 200]):
        proc = subprocess.Popen(
            [sys.executable, "-m", "orchestrator", "--session", str(cli.session), *command],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        assert proc.stdout is not None
        assert proc.stdout.readline()  # `| head -1`
        proc.stdout.close()
        _, err = proc.communicate(timeout=30)
        assert b"Traceback" not in err, err
        assert b"BrokenPipeError" not in err
        assert proc.returncode in (0, 130)  # 0: it had written everything already


def test_a_kid_starting_with_a_dash_is_a_kid_not_an_option(tmp_path: Path) -> None:
    # Kids are base64url: one in 64 starts with "-" (the README's `keys retire KID` met one).
    code, _, err = run(
        "a2a_handoff", "keys", "retire", "-LJLgcBi1Wj", "--key-file", str(tmp_path / "none.json")
    )
    assert "unrecognized arguments" not in err
    assert code == 1
    assert "no identity" in err
