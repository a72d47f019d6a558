"""The contract linter: the seven rules of the handoff-contract spec, and conformance levels.

Errors (any one fails the lint):
  orphan-target         the target is not in the agent registry
  unreachable-handoff   nothing in the source exposes the trigger: its tool_call is not one of
                        the source's tools, or (without a tool_call) the target is not one of
                        the source's routes
  missing-recovery      on_reject, on_timeout or on_error is absent
  loop-risk             no loop_guard, and the target's contracts lead back to the source
  retry-non-idempotent  max_retries > 0 on an edge that is not idempotent
  schema-drift          the payload schema is missing, or its SHA-256 is not the recorded one
  permission-mismatch   the permission_check is not in the permission registry, or the
                        registry does not grant it to the target
  invalid-contract      the file is not a contract (with what is wrong and where)
  invalid-registry      the agent or permission registry is not what it should be
  unknown-recovery-target  a recovery path names neither source, human nor a known agent
Warnings:
  full-history          the payload carries the conversation history without a strategy, or
                        with `full` and no written justification
  short-replay-window   a dedupe window shorter than a handoff envelope's default TTL
Levels (§6): L1 every required field; L2 L1 + version, observability, idempotency;
L3 L2 + reviewed_by, a frozen schema (its hash recorded) and no lint error.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from a2a_handoff.contracts.contract import ANY, SOURCE, Contract, contract_files, load_contract
from a2a_handoff.contracts.registry import Registry, registry_file
from a2a_handoff.errors import ContractError
from a2a_handoff.protocol.extension import DEFAULT_TTL_SECONDS


@dataclass(frozen=True, slots=True)
class Finding:
    rule: str
    message: str
    severity: str = "error"  # error | warning


@dataclass
class ContractReport:
    file: str
    id: str = ""
    version: str = ""
    level: str = "none"
    findings: list[Finding] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)  # what the next level still needs

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "error"]

    @property
    def warnings(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "warning"]

    def to_json(self) -> dict[str, Any]:
        return {
            "file": self.file,
            "id": self.id,
            "version": self.version,
            "level": self.level,
            "missing": list(self.missing),
            "errors": [{"rule": f.rule, "message": f.message} for f in self.errors],
            "warnings": [{"rule": f.rule, "message": f.message} for f in self.warnings],
        }


def lint(
    directory: Path, agents: Path | None = None, permissions: Path | None = None
) -> list[ContractReport]:
    """Lint every contract in `directory` (registries default to DIR/agents.yaml and
    DIR/permissions.yaml when present)."""
    agents = agents or registry_file(directory, "agents")
    permissions = permissions or registry_file(directory, "permissions")
    reports: list[ContractReport] = []
    try:
        registry = Registry.load(agents, permissions)
    except ContractError as exc:
        reports.append(
            ContractReport(
                str(agents or permissions), findings=[Finding("invalid-registry", str(exc))]
            )
        )
        registry = Registry()
    contracts: list[Contract] = []
    for path in contract_files(directory):
        try:
            contract = load_contract(path)
        except ContractError as exc:
            reports.append(
                ContractReport(str(path), findings=[Finding("invalid-contract", str(exc))])
            )
            continue
        contracts.append(contract)
        reports.append(ContractReport(str(path), contract.id, contract.version or ""))
    by_file = {r.file: r for r in reports}
    for contract in contracts:
        report = by_file[contract.path]
        report.findings += _check(contract, contracts, registry)
        report.level = _level(contract, report)
    return reports


def _check(contract: Contract, every: list[Contract], registry: Registry) -> list[Finding]:
    """What every rule finds in `contract`, rule by rule."""
    return [finding for rule in _RULES for finding in rule(contract, every, registry)]


def _edges(contract: Contract, every: list[Contract], registry: Registry) -> Iterator[Finding]:
    """Orphan target, unreachable handoff: the edge's agents and how the source gets there."""
    agents = registry.agents
    cid = contract.id
    if contract.target != SOURCE and contract.target not in agents:
        yield Finding("orphan-target", f"{cid}: target {contract.target!r} is not in the registry")
    sources = list(agents) if contract.source == ANY else [contract.source]
    for source in sources:
        entry = agents.get(source)
        tool = contract.trigger.tool_call
        if entry is None:
            reason = f"source {source!r} is not in the registry"
        elif tool is not None and tool not in entry.tools:
            reason = f"{source} exposes no tool {tool!r}"
        elif tool is None and contract.source != ANY and contract.target not in entry.routes:
            reason = f"{source} has no route to {contract.target!r}"
        else:
            continue
        yield Finding("unreachable-handoff", f"{cid}: {reason}")


def _recovery(contract: Contract, every: list[Contract], registry: Registry) -> Iterator[Finding]:
    """Missing recovery paths, recovery targets that name nobody, loops, unsafe retries."""
    cid = contract.id
    recovery = contract.recovery
    missing = [
        name
        for name in ("on_reject", "on_timeout", "on_error")
        if getattr(recovery, name) in (None, "")
    ]
    if missing:
        yield Finding("missing-recovery", f"{cid}: recovery lacks {', '.join(missing)}")
    for name in ("on_reject", "on_timeout", "on_error"):
        path = getattr(recovery, name)
        if not path or path in ("source", "human"):
            continue
        if path.removeprefix("agent:") not in registry.agents:
            yield Finding(
                "unknown-recovery-target",
                f"{cid}: recovery.{name} names {path!r}, not source, human or an agent"
                " of the registry",
            )
    if not recovery.loop_guard and _leads_back(contract, every):
        yield Finding(
            "loop-risk",
            f"{cid}: {contract.target}'s contracts lead back to {contract.source}"
            " and there is no loop_guard",
        )
    if recovery.max_retries > 0 and not contract.idempotent:
        yield Finding(
            "retry-non-idempotent",
            f"{cid}: max_retries is {recovery.max_retries} on an edge that is not idempotent",
        )


def _schema(contract: Contract, every: list[Contract], registry: Registry) -> Iterator[Finding]:
    """Schema drift: no schema, a missing one, or one changed since it was reviewed."""
    cid = contract.id
    schema = contract.schema_path()
    digest = contract.schema_digest()
    if schema is None:
        yield Finding("schema-drift", f"{cid}: the payload names no schema")
    elif digest is None:
        yield Finding("schema-drift", f"{cid}: schema {contract.payload.schema_} is missing")
    elif contract.payload.schema_sha256 and contract.payload.schema_sha256 != digest:
        yield Finding(
            "schema-drift",
            f"{cid}: schema {contract.payload.schema_} changed since it was reviewed"
            f" (sha256 {digest[:12]}…, recorded {contract.payload.schema_sha256[:12]}…)",
        )


def _permission(contract: Contract, every: list[Contract], registry: Registry) -> Iterator[Finding]:
    """Permission mismatch: the permission checked is unknown, or not the target's."""
    cid = contract.id
    permission = contract.acceptance_criteria.permission_check
    if not permission:
        return
    holders = registry.permissions.get(permission)
    if holders is None:
        yield Finding(
            "permission-mismatch",
            f"{cid}: permission {permission!r} is not in the permission registry",
        )
    elif contract.target != SOURCE and contract.target not in holders:
        yield Finding(
            "permission-mismatch",
            f"{cid}: the registry does not grant {permission!r} to {contract.target}",
        )


def _warnings(contract: Contract, every: list[Contract], registry: Registry) -> Iterator[Finding]:
    """A replay window shorter than an envelope lives (a late replay could make a second
    task), and the conversation history carried without a justified strategy."""
    cid = contract.id
    rules = contract.idempotency
    if (
        rules is not None
        and rules.dedupe_key
        and rules.replay_window_ms is not None
        and rules.replay_window_ms < DEFAULT_TTL_SECONDS * 1000
    ):
        yield Finding(
            "short-replay-window",
            f"{cid}: replay_window_ms {rules.replay_window_ms} is shorter than a handoff"
            f" envelope lives ({DEFAULT_TTL_SECONDS} s by default): a late replay of the"
            " same handoff would no longer be recognised",
            "warning",
        )
    payload = contract.payload
    if payload.carries_history and (
        payload.history_strategy is None
        or (payload.history_strategy == "full" and not payload.history_justification)
    ):
        yield Finding(
            "full-history",
            f"{cid}: the payload carries the conversation history without a justified"
            " strategy (set history_strategy, and history_justification for `full`)",
            "warning",
        )


_Rule = Callable[[Contract, list[Contract], Registry], Iterator[Finding]]
# In the order their findings are reported.
_RULES: tuple[_Rule, ...] = (_edges, _recovery, _schema, _permission, _warnings)


def _leads_back(contract: Contract, every: list[Contract]) -> bool:
    """Whether some chain of contracts goes from the target back to the source."""
    edges: dict[str, set[str]] = defaultdict(set)
    for other in every:
        edges[other.source].add(other.target)
    goal = contract.source
    seen: set[str] = set()
    frontier = [contract.target]
    while frontier:
        node = frontier.pop()
        if node in seen:
            continue
        seen.add(node)
        for nxt in edges.get(node, set()) | edges.get(ANY, set()):
            if nxt in (goal, SOURCE) or goal == ANY:
                return True
            frontier.append(nxt)
    return False


def _level(contract: Contract, report: ContractReport) -> str:
    """The contract's level; `report.missing` gets what the next level still needs."""
    criteria = contract.acceptance_criteria
    recovery = contract.recovery
    l1 = {
        "payload.schema": bool(contract.payload.schema_),
        "acceptance_criteria.required_fields": bool(criteria.required_fields),
        "acceptance_criteria.domain_match": bool(criteria.domain_match),
        "acceptance_criteria.permission_check": bool(criteria.permission_check),
        "recovery.on_reject": bool(recovery.on_reject),
        "recovery.on_timeout": bool(recovery.on_timeout),
        "recovery.on_error": bool(recovery.on_error),
        "recovery.loop_guard": bool(recovery.loop_guard),
    }
    report.missing = [name for name, present in l1.items() if not present]
    if report.missing:
        return "none"
    observed = contract.observability is not None and bool(contract.observability.trace_id_field)
    l2 = {
        "version": bool(contract.version),
        "observability.trace_id_field": observed,
        "idempotency": contract.idempotency is not None,
    }
    report.missing = [name for name, present in l2.items() if not present]
    if report.missing:
        return "L1"
    schema = contract.schema_path()
    remote_ref = schema is not None and schema.is_file() and '"$ref": "http' in schema.read_text()
    l3 = {
        "reviewed_by": bool(contract.reviewed_by),
        "payload.schema_sha256": bool(contract.payload.schema_sha256),
        "a local payload.schema": "://" not in (contract.payload.schema_ or ""),
        "no $ref to a URL in the schema": not remote_ref,  # it could change under the hash
        "no error": not report.errors,
    }
    report.missing = [name for name, present in l3.items() if not present]
    return "L2" if report.missing else "L3"


def render(reports: list[ContractReport]) -> str:
    """The human report: a line per contract, then its findings."""
    lines = []
    for report in reports:
        status = "ok" if not report.errors else f"{len(report.errors)} error(s)"
        name = report.id or Path(report.file).name
        version = f" {report.version}" if report.version else ""
        lines.append(f"{name}{version}  {report.level}  {status}")
        if report.missing:
            after = {"none": "L1", "L1": "L2", "L2": "L3"}.get(report.level, "the next level")
            lines.append(f"  {after} needs: {', '.join(report.missing)}")
        for finding in report.findings:
            lines.append(f"  {finding.severity} [{finding.rule}] {finding.message}")
    errors = sum(len(r.errors) for r in reports)
    warnings = sum(len(r.warnings) for r in reports)
    lines.append(f"{len(reports)} contract(s), {errors} error(s), {warnings} warning(s)")
    return "\n".join(lines)
