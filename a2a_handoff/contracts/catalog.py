"""The contracts an agent enforces while it runs (`HandoffConfig(contracts=Catalog.load(DIR))`).

Sending: a handoff needs a contract for its edge (refused otherwise); its transfer context
must satisfy the contract's trigger predicate, its JSON Schema and its required keys —
checked before anything leaves the source. Receiving: the acceptance criteria — required
fields, the domain predicate over this agent's card, and the permission registry granting
the contract's permission to this agent — and a failed one rejects the handoff, naming it.
Predicates see `payload` (the transfer context; `state` is the same), `target` and `card`
(the receiving agent: its capabilities, skills and the registry's domains) and `envelope`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from a2a_handoff.contracts.contract import (
    ANY,
    MISSING,
    SOURCE,
    Contract,
    contract_files,
    load_contract,
    lookup,
)
from a2a_handoff.contracts.registry import Registry, registry_file
from a2a_handoff.errors import ContractError

if TYPE_CHECKING:  # jsonschema is slow to import: loaded when a catalog is
    from jsonschema import Draft202012Validator


@dataclass(frozen=True, slots=True)
class Catalog:
    """Loaded contracts, their schemas, and the registries they refer to."""

    contracts: tuple[Contract, ...]
    registry: Registry
    validators: Mapping[str, Draft202012Validator]

    @classmethod
    def load(
        cls,
        directory: str | Path,
        agents: str | Path | None = None,
        permissions: str | Path | None = None,
    ) -> Catalog:
        """Every contract of `directory` (a path or a str); ContractError when one cannot be
        enforced."""
        directory = Path(directory)
        agents = Path(agents) if agents is not None else None
        permissions = Path(permissions) if permissions is not None else None
        if not directory.is_dir():
            raise ContractError(f"{directory} is not a directory of contracts")
        registry = Registry.load(
            agents or registry_file(directory, "agents"),
            permissions or registry_file(directory, "permissions"),
        )
        contracts = tuple(load_contract(path) for path in contract_files(directory))
        from jsonschema import Draft202012Validator
        from jsonschema.exceptions import SchemaError

        validators: dict[str, Draft202012Validator] = {}
        for contract in contracts:
            path = contract.schema_path()
            if path is None or not path.is_file():
                raise ContractError(f"{contract.id}: its payload schema is missing")
            try:
                schema = json.loads(path.read_text())
                Draft202012Validator.check_schema(schema)
            except (ValueError, SchemaError) as exc:
                raise ContractError(f"{contract.id}: bad schema {path}: {exc}") from None
            validators[contract.id] = Draft202012Validator(schema)
        return cls(contracts, registry, validators)

    def for_edge(self, source: str, target: str, kind: str = "handoff") -> Contract | None:
        """The contract of source → target for messages of `kind`: a named source before
        `any`, a contract naming the kind (`kinds`) before one for every kind; for the return
        of a decision, the `source` target (the agent that escalated) too."""
        targets = (SOURCE, target) if kind == "return" else (target,)
        for wanted_target in targets:
            for wanted_source in (source, ANY):
                edge = [
                    c
                    for c in self.contracts
                    if c.source == wanted_source
                    and c.target == wanted_target
                    and (c.kinds is None or kind in c.kinds)
                ]
                named = [c for c in edge if c.kinds is not None]
                if named or edge:
                    return (named or edge)[0]
        return None

    def by_id(self, ref: str) -> Contract | None:
        """`id@version` (or `id`) → the contract, when this catalog has that version."""
        cid, _, version = ref.partition("@")
        for contract in self.contracts:
            if contract.id == cid and (not version or contract.version == version):
                return contract
        return None

    def accepted_by(self, agent: str) -> list[dict[str, Any]]:
        """The contracts (id, version) whose edges end at `agent`: for its card."""
        accepted = [
            {"id": c.id, "version": c.version or ""}
            for c in self.contracts
            if c.target == agent
            or (
                c.target == SOURCE
                and any(
                    o.target != SOURCE and o.source in (agent, ANY)
                    for o in self.contracts
                    if o.target == c.source
                )
            )
        ]
        return sorted(accepted, key=lambda c: c["id"])

    def namespace(
        self, payload: Mapping[str, Any], target: str, envelope: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        card = self.registry.card(target) or {"name": target}
        return {
            "payload": dict(payload),
            "state": dict(payload),
            "target": card,
            "card": card,
            "envelope": dict(envelope or {}),
        }

    def outbound(self, contract: Contract, payload: Mapping[str, Any], target: str) -> list[str]:
        """What is wrong with sending `payload` under `contract` (empty: nothing)."""
        problems = []
        trigger = contract.trigger.compiled()
        if trigger is not None and not trigger.evaluate(self.namespace(payload, target)):
            problems.append(f"trigger predicate does not hold: {contract.trigger.predicate}")
        try:
            for error in self.validators[contract.id].iter_errors(dict(payload)):
                where = "/".join(str(p) for p in error.absolute_path) or "(root)"
                problems.append(f"schema: {where}: {error.message}")
        except Exception as exc:  # e.g. a $ref nobody can resolve: refuse, do not crash
            problems.append(f"schema: cannot be evaluated: {type(exc).__name__}: {exc}")
        for key in contract.payload.required:
            if lookup(payload, key) is MISSING:
                problems.append(f"required key missing: {key}")
        return problems

    def acceptance(
        self,
        contract: Contract,
        payload: Mapping[str, Any],
        me: str,
        envelope: Mapping[str, Any] | None = None,
    ) -> str | None:
        """The first acceptance criterion `payload` fails at agent `me` (None: accepted)."""
        criteria = contract.acceptance_criteria
        for key in criteria.required_fields:
            if lookup(payload, key) in (MISSING, None):
                return f"required_fields: {key} is missing"
        if criteria.domain_match:
            from a2a_handoff.contracts.predicate import parse

            namespace = self.namespace(payload, me, envelope)
            if not parse(criteria.domain_match).evaluate(namespace):
                return f"domain_match: {criteria.domain_match}"
        permission = criteria.permission_check
        if permission and me not in self.registry.permissions.get(permission, frozenset()):
            return f"permission_check: {me} does not hold {permission}"
        return None
