"""The catalog an agent enforces at run time: which contract an edge has, what a source may
send under it, and which acceptance criterion a target's check fails."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from a2a_handoff.contracts import Catalog, ContractError
from a2a_handoff.contracts.contract import Contract
from tests.support import ROOT

SHIPPED = ROOT / "contracts"
REFUND: dict[str, Any] = {
    "intent": "refund",
    "entities": {"orderId": "12345", "amount": 40},
    "summary": "Customer asks for help with a refund for order 12345",
}


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return Catalog.load(SHIPPED)


@pytest.fixture
def contracts(tmp_path: Path) -> Path:
    directory = tmp_path / "contracts"
    shutil.copytree(SHIPPED, directory)
    return directory


def contract(catalog: Catalog, cid: str) -> Contract:
    found = catalog.by_id(cid)
    assert found is not None
    return found


def test_load_reads_every_contract_and_both_registries(catalog: Catalog) -> None:
    assert sorted(c.id for c in catalog.contracts) == [
        "any-to-human",
        "human-to-source",
        "triage-to-billing",
        "triage-to-logistics",
    ]
    assert set(catalog.registry.agents) == {"triage", "billing", "logistics", "human"}
    assert catalog.registry.permissions["refunds.issue"] == {"billing"}
    assert set(catalog.validators) == {c.id for c in catalog.contracts}


def test_load_refuses_what_it_could_not_enforce(tmp_path: Path, contracts: Path) -> None:
    with pytest.raises(ContractError, match="not a directory"):
        Catalog.load(tmp_path / "nowhere")
    schema = contracts / "schemas" / "billing-request.schema.json"
    schema.write_text(json.dumps({"type": 12}))
    with pytest.raises(ContractError, match="triage-to-billing: bad schema"):
        Catalog.load(contracts)
    schema.unlink()
    with pytest.raises(ContractError, match="triage-to-billing: its payload schema is missing"):
        Catalog.load(contracts)


def test_load_refuses_a_contract_that_does_not_parse(contracts: Path) -> None:
    path = contracts / "triage-to-logistics.yaml"
    path.write_text(path.read_text().replace("state.intent == 'shipping'", "state.intent = 1"))
    with pytest.raises(ContractError, match=r"trigger\.predicate: .*at position 13"):
        Catalog.load(contracts)


def test_for_edge_finds_named_edges_and_any_as_a_source_wildcard(catalog: Catalog) -> None:
    assert contract(catalog, "triage-to-billing") is catalog.for_edge("triage", "billing")
    assert catalog.for_edge("billing", "human") is contract(catalog, "any-to-human")
    assert catalog.for_edge("logistics", "human") is contract(catalog, "any-to-human")
    assert catalog.for_edge("billing", "logistics") is None  # no contract: no handoff
    assert catalog.for_edge("billing", "triage") is None


def test_a_returned_decision_uses_the_edge_to_source(catalog: Catalog) -> None:
    # `target: source` is the agent that escalated; only a return (kind="return") takes it.
    assert catalog.for_edge("human", "billing", "return") is contract(catalog, "human-to-source")
    assert catalog.for_edge("human", "triage", "return") is contract(catalog, "human-to-source")
    assert catalog.for_edge("human", "billing") is None


def test_a_named_source_is_preferred_over_any(contracts: Path) -> None:
    data = yaml.safe_load((contracts / "any-to-human.yaml").read_text())
    data.update(id="billing-to-human", source="billing")
    (contracts / "billing-to-human.yaml").write_text(yaml.safe_dump(data))
    catalog = Catalog.load(contracts)
    assert contract(catalog, "billing-to-human") is catalog.for_edge("billing", "human")
    assert contract(catalog, "any-to-human") is catalog.for_edge("logistics", "human")


def test_an_edge_may_have_a_contract_for_delegations(contracts: Path) -> None:
    data = yaml.safe_load((contracts / "triage-to-billing.yaml").read_text())
    data.update(id="triage-asks-billing", kinds=["delegation"])
    (contracts / "triage-asks-billing.yaml").write_text(yaml.safe_dump(data))
    catalog = Catalog.load(contracts)
    assert catalog.for_edge("triage", "billing", "delegation") is contract(
        catalog, "triage-asks-billing"
    )
    assert catalog.for_edge("triage", "billing") is contract(catalog, "triage-to-billing")
    # a contract for every kind governs a delegation where none names it
    assert catalog.for_edge("billing", "human", "delegation") is contract(catalog, "any-to-human")


def test_by_id_takes_an_optional_version(catalog: Catalog) -> None:
    assert contract(catalog, "triage-to-billing@1.0.0").id == "triage-to-billing"
    assert catalog.by_id("triage-to-billing@2.0.0") is None  # another version: not this one
    assert catalog.by_id("triage-to-nowhere") is None


def test_accepted_by_lists_the_contracts_an_agent_takes_for_its_card(catalog: Catalog) -> None:
    assert catalog.accepted_by("billing") == [
        {"id": "human-to-source", "version": "1.0.0"},  # it may escalate, so decisions return
        {"id": "triage-to-billing", "version": "1.0.0"},
    ]
    assert {"id": "any-to-human", "version": "1.0.0"} in catalog.accepted_by("human")
    assert catalog.accepted_by("nobody-escalates-here") == [
        {"id": "human-to-source", "version": "1.0.0"}  # `any` may escalate: any may get one
    ]


def test_the_namespace_predicates_see(catalog: Catalog) -> None:
    namespace = catalog.namespace(REFUND, "billing", {"hop": 1})
    assert namespace["payload"] == namespace["state"] == REFUND
    assert namespace["card"] is namespace["target"]
    assert namespace["card"]["capabilities"] == ["invoices", "refunds"]
    assert namespace["card"]["domains"] == ["billing"]
    assert namespace["envelope"] == {"hop": 1}
    assert catalog.namespace({}, "stranger")["card"] == {"name": "stranger"}


def test_outbound_accepts_the_triage_context(catalog: Catalog) -> None:
    assert catalog.outbound(contract(catalog, "triage-to-billing"), REFUND, "billing") == []
    shipping = {**REFUND, "intent": "shipping"}
    edge = contract(catalog, "triage-to-logistics")
    assert catalog.outbound(edge, shipping, "logistics") == []


def test_outbound_names_each_problem(catalog: Catalog) -> None:
    edge = contract(catalog, "triage-to-billing")
    wrong_intent = catalog.outbound(edge, {**REFUND, "intent": "shipping"}, "billing")
    assert (
        wrong_intent[0] == "trigger predicate does not hold: state.intent in ['refund', 'invoice']"
    )
    assert any(p.startswith("schema: intent: ") for p in wrong_intent)
    no_summary = {k: v for k, v in REFUND.items() if k != "summary"}
    problems = catalog.outbound(edge, no_summary, "billing")
    assert "required key missing: summary" in problems
    assert any(p.startswith("schema: (root): 'summary' is a required property") for p in problems)
    bad_order = {**REFUND, "entities": {"orderId": "12a"}}
    assert catalog.outbound(edge, bad_order, "billing") == [
        "schema: entities/orderId: '12a' does not match '^[0-9]{3,}$'"
    ]
    transcript = {**REFUND, "messages": ["every", "word"]}  # the raw history is not a field
    assert catalog.outbound(edge, transcript, "billing") == [
        "schema: (root): Additional properties are not allowed ('messages' was unexpected)"
    ]


def test_acceptance_passes_at_the_right_agent(catalog: Catalog) -> None:
    assert catalog.acceptance(contract(catalog, "triage-to-billing"), REFUND, "billing") is None


def test_acceptance_names_a_missing_or_null_required_field(catalog: Catalog) -> None:
    edge = contract(catalog, "triage-to-billing")
    missing = {k: v for k, v in REFUND.items() if k != "intent"}
    assert catalog.acceptance(edge, missing, "billing") == "required_fields: intent is missing"
    null = {**REFUND, "summary": None}
    assert catalog.acceptance(edge, null, "billing") == "required_fields: summary is missing"


def test_acceptance_checks_the_domain_over_the_receiving_agents_card(catalog: Catalog) -> None:
    # Logistics has neither the billing domain nor the refunds capability.
    edge = contract(catalog, "triage-to-billing")
    failed = catalog.acceptance(edge, REFUND, "logistics")
    assert failed == (
        "domain_match: 'billing' in target.domains and 'refunds' in target.capabilities"
    )


def test_acceptance_checks_the_permission_registry(contracts: Path) -> None:
    permissions = contracts / "permissions.yaml"
    permissions.write_text(permissions.read_text().replace("refunds.issue: [billing]", ""))
    catalog = Catalog.load(contracts)
    edge = contract(catalog, "triage-to-billing")
    assert catalog.acceptance(edge, REFUND, "billing") == (
        "permission_check: billing does not hold refunds.issue"
    )


def test_acceptance_reports_the_first_failed_criterion(catalog: Catalog) -> None:
    # Required fields come before the domain, which comes before the permission.
    edge = contract(catalog, "triage-to-billing")
    failed = catalog.acceptance(edge, {"summary": "x"}, "logistics")
    assert failed == "required_fields: intent is missing"


def test_a_decision_is_accepted_only_from_an_operator_or_the_fallback(catalog: Catalog) -> None:
    edge = contract(catalog, "human-to-source")
    decision = {
        "summary": "Approved",
        "decision": {"verdict": "approved", "by": "operator", "escalation": {}},
    }
    assert catalog.outbound(edge, decision, "billing") == []
    assert catalog.acceptance(edge, decision, "billing") is None
    forged = {**decision, "decision": {**decision["decision"], "by": "billing"}}
    assert catalog.acceptance(edge, forged, "billing") == (
        "domain_match: payload.decision.by in ['operator', 'fallback']"
    )
    assert catalog.acceptance(edge, decision, "human") == (
        "permission_check: human does not hold decisions.return"
    )


def test_an_unresolvable_schema_ref_refuses_the_payload_instead_of_crashing(
    tmp_path: Path,
) -> None:
    directory = tmp_path / "contracts"
    shutil.copytree(ROOT / "contracts", directory)
    schema = directory / "schemas" / "billing-request.schema.json"
    data = json.loads(schema.read_text())
    data["properties"]["summary"] = {"$ref": "https://example.invalid/summary.json"}
    schema.write_text(json.dumps(data))
    catalog = Catalog.load(directory)
    contract = catalog.for_edge("triage", "billing")
    assert contract is not None
    payload = {"intent": "refund", "summary": "refund order 12345"}
    problems = catalog.outbound(contract, payload, "billing")
    assert any(p.startswith("schema: cannot be evaluated") for p in problems)
