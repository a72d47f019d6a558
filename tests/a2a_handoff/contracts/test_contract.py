"""The contract model: what a contract file may say, and how a bad one is reported."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from a2a_handoff.contracts import Contract, ContractError, load_contract
from a2a_handoff.contracts.contract import MISSING, contract_files, lookup
from tests.support import ROOT

SHIPPED = ROOT / "contracts"


def shipped(name: str) -> dict[str, Any]:
    data = yaml.safe_load((SHIPPED / f"{name}.yaml").read_text())
    assert isinstance(data, dict)
    return data


def write(tmp_path: Path, data: dict[str, Any], name: str = "edge.yaml") -> Path:
    path = tmp_path / name
    if path.suffix == ".json":
        path.write_text(json.dumps(data))
    else:
        path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_a_shipped_contract_reads_into_every_field() -> None:
    contract = load_contract(SHIPPED / "triage-to-billing.yaml")
    assert (contract.id, contract.version) == ("triage-to-billing", "1.0.0")
    assert (contract.source, contract.target) == ("triage", "billing")
    assert contract.trigger.compiled() is not None
    assert contract.payload.schema_ == "schemas/billing-request.schema.json"
    assert contract.payload.history_strategy == "summary"
    assert contract.acceptance_criteria.permission_check == "refunds.issue"
    assert contract.recovery.on_error == "human"
    assert contract.recovery.max_retries == 3
    assert contract.observability is not None
    assert contract.observability.trace_id_field == "envelope.traceId"
    assert contract.idempotent
    assert not contract.human_target
    assert contract.path == str(SHIPPED / "triage-to-billing.yaml")


def test_json_and_yaml_read_the_same_contract(tmp_path: Path) -> None:
    data = shipped("triage-to-logistics")
    from_yaml = load_contract(write(tmp_path, data, "edge.yaml"))
    from_json = load_contract(write(tmp_path, data, "edge.json"))
    assert from_yaml.model_dump() == from_json.model_dump()


def test_human_in_the_loop_is_a_flag_or_a_block() -> None:
    assert load_contract(SHIPPED / "any-to-human.yaml").human_target
    assert not load_contract(SHIPPED / "human-to-source.yaml").human_target
    flag = Contract.model_validate({**shipped("human-to-source"), "human_in_the_loop": True})
    assert flag.human_target


def test_optional_blocks_default_to_absent_and_safe(tmp_path: Path) -> None:
    data = shipped("triage-to-billing")
    for key in ("version", "observability", "idempotency", "reviewed_by", "recovery"):
        data.pop(key)
    contract = load_contract(write(tmp_path, data))
    assert contract.version is None
    assert contract.observability is None
    assert not contract.idempotent  # no idempotency block: not idempotent, so never retried
    assert contract.recovery.max_retries == 0  # the spec's default
    assert contract.recovery.on_reject is None  # absent: a lint error, not a parse failure


@pytest.mark.parametrize(
    ("change", "where"),
    [
        (lambda c: c.update(colour="blue"), "colour"),
        (lambda c: c["recovery"].update(on_rejekt="source"), "recovery.on_rejekt"),
        (lambda c: c.update(id="Triage_To_Billing"), "id"),
        (lambda c: c.update(version="v1"), "version"),
        (lambda c: c.update(trigger={}), "trigger"),
        (lambda c: c["payload"].update(history_strategy="everything"), "history_strategy"),
        (lambda c: c["recovery"].update(max_retries=-1), "recovery.max_retries"),
        (lambda c: c["recovery"].update(timeout_ms=0), "recovery.timeout_ms"),
        (lambda c: c.pop("acceptance_criteria"), "acceptance_criteria"),
        (lambda c: c["idempotency"].update(idempotent="perhaps"), "idempotency.idempotent"),
    ],
)
def test_a_bad_field_is_named_in_the_error(tmp_path: Path, change: Any, where: str) -> None:
    data = shipped("triage-to-billing")
    change(data)
    path = write(tmp_path, data)
    with pytest.raises(ContractError) as caught:
        load_contract(path)
    assert str(path) in str(caught.value)
    assert where in str(caught.value)


@pytest.mark.parametrize(
    ("block", "field", "text"),
    [
        ("trigger", "predicate", "state.intent === 'refund'"),
        ("acceptance_criteria", "domain_match", "target.capabilities.count() > 0"),
    ],
)
def test_a_predicate_that_does_not_parse_fails_the_contract_with_its_position(
    tmp_path: Path, block: str, field: str, text: str
) -> None:
    data = shipped("triage-to-billing")
    data[block][field] = text
    with pytest.raises(ContractError, match=rf"{block}\.{field}: .*at position \d+"):
        load_contract(write(tmp_path, data))


@pytest.mark.parametrize(
    "text",
    ["id: [unclosed", "- a list\n- not a mapping\n", "just a string"],
)
def test_a_file_that_is_not_a_mapping_is_a_contract_error(tmp_path: Path, text: str) -> None:
    path = tmp_path / "edge.yaml"
    path.write_text(text)
    with pytest.raises(ContractError, match=r"edge\.yaml"):
        load_contract(path)


def test_yaml_cannot_construct_python_objects(tmp_path: Path) -> None:
    path = tmp_path / "edge.yaml"
    path.write_text("id: !!python/object/apply:os.system ['true']\n")
    with pytest.raises(ContractError, match="cannot read"):
        load_contract(path)


def test_the_schema_digest_follows_the_file(tmp_path: Path) -> None:
    directory = tmp_path / "contracts"
    shutil.copytree(SHIPPED, directory)
    contract = load_contract(directory / "triage-to-billing.yaml")
    schema = directory / "schemas" / "billing-request.schema.json"
    assert contract.schema_path() == schema  # relative to the contract, not the cwd
    assert contract.schema_digest() == hashlib.sha256(schema.read_bytes()).hexdigest()
    assert contract.schema_digest() == contract.payload.schema_sha256
    schema.write_text(schema.read_text() + "\n")
    assert contract.schema_digest() != contract.payload.schema_sha256
    schema.unlink()
    assert contract.schema_digest() is None


def test_covers_takes_any_as_a_source_wildcard() -> None:
    escalation = load_contract(SHIPPED / "any-to-human.yaml")
    assert escalation.covers("billing", "human")
    assert escalation.covers("logistics", "human")
    assert not escalation.covers("billing", "logistics")
    billing = load_contract(SHIPPED / "triage-to-billing.yaml")
    assert billing.covers("triage", "billing")
    assert not billing.covers("logistics", "billing")


def test_contract_files_leave_out_the_registries_and_schemas() -> None:
    names = [path.name for path in contract_files(SHIPPED)]
    assert names == [
        "any-to-human.yaml",
        "human-to-source.yaml",
        "triage-to-billing.yaml",
        "triage-to-logistics.yaml",
    ]


def test_lookup_walks_mappings_only() -> None:
    data = {"entities": {"orderId": "12345", "none": None}, "items": ["a"]}
    assert lookup(data, "entities.orderId") == "12345"
    assert lookup(data, "entities.none") is None  # present but null: not missing
    assert lookup(data, "entities.missing") is MISSING
    assert lookup(data, "items.0") is MISSING  # no indexing into lists
    assert lookup(data, "entities.orderId.upper") is MISSING  # no attributes of values
