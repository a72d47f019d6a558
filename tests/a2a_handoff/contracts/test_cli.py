"""`python -m a2a_handoff lint` and the `a2a-handoff` console script, as a user runs them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from a2a_handoff.__main__ import main
from tests.support import ROOT

SHIPPED = ROOT / "contracts"


def test_the_console_script_lints_like_the_module() -> None:
    script = Path(sys.executable).parent / "a2a-handoff"
    assert script.is_file(), "pyproject.toml [project.scripts] declares a2a-handoff"
    ran = subprocess.run(
        [str(script), "lint", str(SHIPPED)], capture_output=True, text=True, timeout=60
    )
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.splitlines()[-1] == "4 contract(s), 0 error(s), 0 warning(s)"


def test_the_json_report_has_one_entry_per_contract(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lint", str(SHIPPED), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert set(report) == {"contracts", "errors", "warnings"}
    assert (report["errors"], report["warnings"]) == (0, 0)
    by_id = {entry["id"]: entry for entry in report["contracts"]}
    assert set(by_id) == {
        "triage-to-billing",
        "triage-to-logistics",
        "any-to-human",
        "human-to-source",
    }
    entry = by_id["triage-to-billing"]
    assert set(entry) == {"file", "id", "version", "level", "missing", "errors", "warnings"}
    assert entry["file"].endswith("triage-to-billing.yaml")
    assert (entry["version"], entry["level"], entry["errors"]) == ("1.0.0", "L3", [])


def test_the_human_report_has_a_line_per_contract(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lint", str(SHIPPED)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "triage-to-billing 1.0.0  L3  ok" in lines
    assert len(lines) == 5  # four contracts and the total


def test_a_registry_that_does_not_exist_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    missing = tmp_path / "agents.yaml"
    assert main(["lint", str(SHIPPED), "--agents", str(missing)]) == 64
    assert f"{missing} does not exist" in capsys.readouterr().err


def test_a_command_is_required() -> None:
    with pytest.raises(SystemExit) as caught:
        main([])
    assert caught.value.code == 64  # usage: argparse's own 2 means "input required" here


def test_a_contract_graded_none_says_what_level_1_needs(tmp_path: Path) -> None:
    # A valid contract (no finding) that lacks what L1 wants: the report must say what.
    import shutil

    import yaml

    directory = tmp_path / "contracts"
    shutil.copytree(SHIPPED, directory)
    path = directory / "triage-to-billing.yaml"
    data = yaml.safe_load(path.read_text())
    del data["acceptance_criteria"]["domain_match"]
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    ran = subprocess.run(
        [sys.executable, "-m", "a2a_handoff", "lint", str(directory)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    lines = ran.stdout.splitlines()
    at = lines.index("triage-to-billing 1.0.0  none  ok")
    assert lines[at + 1] == "  L1 needs: acceptance_criteria.domain_match"
    ran = subprocess.run(
        [sys.executable, "-m", "a2a_handoff", "lint", str(directory), "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    entry = next(c for c in json.loads(ran.stdout)["contracts"] if c["id"] == "triage-to-billing")
    assert entry["level"] == "none"
    assert entry["missing"] == ["acceptance_criteria.domain_match"]
