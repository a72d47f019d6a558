"""Handoff contracts: the model, the predicate language, the linter, and the catalog an
agent enforces at run time.

`python -m a2a_handoff lint DIR` lints a directory of contracts (see `lint.py`);
`create_app(..., handoff=HandoffConfig(contracts=Catalog.load(DIR)))` enforces them (see
`catalog.py`).
"""

from a2a_handoff.contracts.catalog import Catalog
from a2a_handoff.contracts.contract import Contract, load_contract
from a2a_handoff.contracts.lint import ContractReport, Finding, lint, render
from a2a_handoff.contracts.predicate import Predicate, PredicateError, parse
from a2a_handoff.contracts.registry import Registry
from a2a_handoff.errors import ContractError

__all__ = [
    "Catalog",
    "Contract",
    "ContractError",
    "ContractReport",
    "Finding",
    "Predicate",
    "PredicateError",
    "Registry",
    "lint",
    "load_contract",
    "parse",
    "render",
]
