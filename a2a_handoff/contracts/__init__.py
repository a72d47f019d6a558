"""Handoff contracts: the model, the predicate language, and the linter.

`python -m a2a_handoff lint DIR` lints a directory of contracts (see `lint.py`).
"""

from a2a_handoff.contracts.lint import ContractReport, Finding, Registry, lint, render
from a2a_handoff.contracts.model import Contract, ContractError, load_contract
from a2a_handoff.contracts.predicate import Predicate, PredicateError, parse

__all__ = [
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
