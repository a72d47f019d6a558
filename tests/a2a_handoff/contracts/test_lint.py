"""The linter: each rule fires on a contract set that breaks exactly it, and nowhere else."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from a2a_handoff.contracts import lint
from tests.support import ROOT

SHIPPED = ROOT / "contracts"


@pytest.fixture
def contracts(tmp_path: Path) -> Path:
    """A copy of the shipped contracts, which lint clean."""
    directory = tmp_path / "contracts"
    shutil.copytree(SHIPPED, directory)
    return directory


def edit(directory: Path, name: str, change: Callable[[dict[str, Any]], None]) -> None:
    path = directory / f"{name}.yaml"
    data = yaml.safe_load(path.read_text())
    change(data)
    path.write_text(yaml.safe_dump(data, sort_keys=False))


def findings(directory: Path) -> dict[str, set[str]]:
    """contract id (or file) → the rules that fired on it."""
    return {(r.id or Path(r.file).name): {f.rule for f in r.findings} for r in lint(directory)}


def only(directory: Path, contract: str, rule: str) -> None:
    fired = {name: rules for name, rules in findings(directory).items() if rules}
    assert fired == {contract: {rule}}


def test_the_shipped_contracts_lint_clean_at_level_3() -> None:
    reports = lint(SHIPPED)
    assert {r.id for r in reports} == {
        "triage-to-billing",
        "triage-to-logistics",
        "any-to-human",
        "human-to-source",
    }
    assert all(not r.findings for r in reports), [r.to_json() for r in reports]
    assert {r.level for r in reports} == {"L3"}


def test_orphan_target(contracts: Path) -> None:
    edit(contracts, "triage-to-logistics", lambda c: c.update(target="warehouse"))
    rules = findings(contracts)["triage-to-logistics"]
    # A target nobody knows is also one triage has no route to: both are named.
    assert rules == {"orphan-target", "unreachable-handoff", "permission-mismatch"}
    registry = contracts / "agents.yaml"
    data = yaml.safe_load(registry.read_text())
    data["agents"]["triage"]["routes"].append("warehouse")
    registry.write_text(yaml.safe_dump(data))
    permissions = contracts / "permissions.yaml"
    granted = yaml.safe_load(permissions.read_text())
    granted["permissions"]["shipping.track"].append("warehouse")
    permissions.write_text(yaml.safe_dump(granted))
    only(contracts, "triage-to-logistics", "orphan-target")


def test_unreachable_handoff(contracts: Path) -> None:
    edit(contracts, "triage-to-billing", lambda c: c["trigger"].update(tool_call="to_billing"))
    only(contracts, "triage-to-billing", "unreachable-handoff")


def test_missing_recovery(contracts: Path) -> None:
    edit(contracts, "triage-to-billing", lambda c: c["recovery"].pop("on_timeout"))
    only(contracts, "triage-to-billing", "missing-recovery")
    report = next(r for r in lint(contracts) if r.id == "triage-to-billing")
    assert "on_timeout" in report.errors[0].message
    assert report.level == "none"  # L1 needs every recovery path


def test_loop_risk_without_a_guard(contracts: Path) -> None:
    # billing → triage exists, so triage → billing can loop: without a guard it is flagged.
    (contracts / "billing-to-triage.yaml").write_text(
        (contracts / "triage-to-billing.yaml")
        .read_text()
        .replace("id: triage-to-billing", "id: billing-to-triage")
        .replace("source: triage", "source: TMP")
        .replace("target: billing", "target: triage")
        .replace("source: TMP", "source: billing")
        .replace("permission_check: refunds.issue", "permission_check: decisions.return")
        .replace("'billing' in target.domains and 'refunds' in target.capabilities", "true")
    )
    registry = contracts / "agents.yaml"
    data = yaml.safe_load(registry.read_text())
    data["agents"]["billing"]["routes"].append("triage")
    registry.write_text(yaml.safe_dump(data))
    assert not any(findings(contracts).values())  # guarded: fine
    edit(contracts, "triage-to-billing", lambda c: c["recovery"].pop("loop_guard"))
    only(contracts, "triage-to-billing", "loop-risk")


def test_retry_on_a_non_idempotent_edge(contracts: Path) -> None:
    edit(contracts, "triage-to-logistics", lambda c: c["idempotency"].update(idempotent=False))
    only(contracts, "triage-to-logistics", "retry-non-idempotent")
    edit(contracts, "triage-to-logistics", lambda c: c["recovery"].update(max_retries=0))
    assert not any(findings(contracts).values())


def test_schema_drift(contracts: Path) -> None:
    schema = contracts / "schemas" / "billing-request.schema.json"
    schema.write_text(schema.read_text().replace('"maxLength": 500', '"maxLength": 5000'))
    only(contracts, "triage-to-billing", "schema-drift")
    schema.unlink()
    only(contracts, "triage-to-billing", "schema-drift")
    report = next(r for r in lint(contracts) if r.id == "triage-to-billing")
    assert "missing" in report.errors[0].message


def test_permission_mismatch(contracts: Path) -> None:
    edit(
        contracts,
        "triage-to-billing",
        lambda c: c["acceptance_criteria"].update(permission_check="refunds.everything"),
    )
    only(contracts, "triage-to-billing", "permission-mismatch")
    edit(
        contracts,
        "triage-to-billing",
        lambda c: c["acceptance_criteria"].update(permission_check="shipping.track"),
    )
    only(contracts, "triage-to-billing", "permission-mismatch")  # declared, not granted


def test_full_history_without_a_justified_strategy_warns(contracts: Path) -> None:
    def full(c: dict[str, Any]) -> None:
        c["payload"].update(carries_history=True, history_strategy="full")

    edit(contracts, "triage-to-billing", full)
    report = next(r for r in lint(contracts) if r.id == "triage-to-billing")
    assert [f.rule for f in report.warnings] == ["full-history"]
    assert report.errors == []
    edit(
        contracts,
        "triage-to-billing",
        lambda c: c["payload"].update(history_justification="the auditor needs every word"),
    )
    assert not next(r for r in lint(contracts) if r.id == "triage-to-billing").findings


def test_an_invalid_contract_is_reported_with_what_is_wrong(contracts: Path) -> None:
    edit(contracts, "triage-to-billing", lambda c: c["trigger"].update(predicate="state.x =="))
    report = next(r for r in lint(contracts) if r.file.endswith("triage-to-billing.yaml"))
    assert [f.rule for f in report.errors] == ["invalid-contract"]
    assert "trigger.predicate" in report.errors[0].message
    assert "position" in report.errors[0].message


def test_levels(contracts: Path) -> None:
    edit(contracts, "triage-to-billing", lambda c: c.pop("reviewed_by"))
    edit(contracts, "triage-to-logistics", lambda c: c.pop("observability"))
    levels = {r.id: r.level for r in lint(contracts)}
    assert levels["triage-to-billing"] == "L2"
    assert levels["triage-to-logistics"] == "L1"
    assert levels["any-to-human"] == "L3"


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "a2a_handoff", "lint", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_the_cli_exit_codes_and_json(contracts: Path) -> None:
    clean = run_cli(str(SHIPPED))
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert "4 contract(s), 0 error(s), 0 warning(s)" in clean.stdout
    edit(contracts, "triage-to-billing", lambda c: c["recovery"].pop("on_error"))
    broken = run_cli(str(contracts), "--json")
    assert broken.returncode == 1
    summary = json.loads(broken.stdout)
    assert summary["errors"] == 1
    bad = next(c for c in summary["contracts"] if c["id"] == "triage-to-billing")
    assert bad["errors"][0]["rule"] == "missing-recovery"
    assert bad["level"] == "none"
    moved = contracts.parent / "registry"
    moved.mkdir()
    shutil.move(contracts / "agents.yaml", moved / "agents.yaml")
    explicit = run_cli(str(contracts), "--agents", str(moved / "agents.yaml"))
    assert "orphan-target" not in explicit.stdout
    assert run_cli(str(contracts / "nope")).returncode == 64


def test_a_replay_window_shorter_than_an_envelope_lives_warns(contracts: Path) -> None:
    edit(
        contracts,
        "triage-to-billing",
        lambda c: c["idempotency"].update(replay_window_ms=1500),
    )
    report = next(r for r in lint(contracts) if r.id == "triage-to-billing")
    assert [f.rule for f in report.warnings] == ["short-replay-window"]
    assert report.errors == []


def test_a_recovery_path_naming_nobody_is_an_error(contracts: Path) -> None:
    edit(contracts, "triage-to-billing", lambda c: c["recovery"].update(on_reject="supervisr"))
    only(contracts, "triage-to-billing", "unknown-recovery-target")
    edit(contracts, "triage-to-billing", lambda c: c["recovery"].update(on_reject="agent:human"))
    assert not any(findings(contracts).values())


@pytest.mark.parametrize(
    "text",
    ["- just\n- a list\n", "permissions: {refunds.issue: billing}\n", "permissions: [: :\n"],
)
def test_a_malformed_registry_is_reported_not_a_crash(contracts: Path, text: str) -> None:
    (contracts / "permissions.yaml").write_text(text)
    result = run_cli(str(contracts))
    assert result.returncode == 1
    assert "invalid-registry" in result.stdout
    assert "Traceback" not in result.stderr


def test_a_schema_with_a_remote_ref_is_not_frozen(contracts: Path) -> None:
    schema = contracts / "schemas" / "billing-request.schema.json"
    data = json.loads(schema.read_text())
    data["properties"]["summary"] = {"$ref": "https://example.invalid/summary.json"}
    schema.write_text(json.dumps(data))
    digest = hashlib.sha256(schema.read_bytes()).hexdigest()
    edit(contracts, "triage-to-billing", lambda c: c["payload"].update(schema_sha256=digest))
    report = next(r for r in lint(contracts) if r.id == "triage-to-billing")
    assert report.errors == []
    assert report.level == "L2"
