"""Handoff contracts: one YAML (or JSON) document per edge between two agents.

The fields are those of the handoff-contract spec (seed 002, sections 3 to 5): `id`, `version`,
`source`, `target`, `trigger`, `payload`, `acceptance_criteria`, `recovery`, and the
recommended `observability`, `idempotency`, `human_in_the_loop`, `reviewed_by`. Parsing is
lenient where the linter has something to say (a missing recovery path is a lint error with
a name, not a parse failure) and strict where nothing could be said (unknown fields, wrong
types, a predicate that does not parse — reported with its position).

Two edge forms beyond the spec's one-named-edge rule, for escalation: `source: any` (every
agent may escalate to the human agent) and `target: source` (the decision goes back to the
agent that escalated).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from a2a_handoff.contracts.predicate import Predicate, PredicateError, parse
from a2a_handoff.errors import ContractError

ANY = "any"
SOURCE = "source"  # as a target: the agent that escalated


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _predicate(value: str | None, where: str) -> str | None:
    if value is None:
        return None
    try:
        parse(value)
    except PredicateError as exc:
        raise ValueError(f"{where}: {exc}") from None
    return value


class Trigger(_Model):
    intent: str | None = None
    predicate: str | None = None
    tool_call: str | None = None

    @field_validator("predicate")
    @classmethod
    def _parses(cls, value: str | None) -> str | None:
        return _predicate(value, "trigger.predicate")

    def compiled(self) -> Predicate | None:
        return parse(self.predicate) if self.predicate else None


class Payload(_Model):
    schema_: str | None = Field(default=None, alias="schema")
    schema_sha256: str | None = None  # recorded at review: schema drift is a change of it
    required: list[str] = Field(default_factory=list)
    history_strategy: Literal["full", "summary", "last_k", "pointer"] | None = None
    history_justification: str | None = None
    carries_history: bool = False  # the payload holds the conversation's messages


class AcceptanceCriteria(_Model):
    required_fields: list[str] = Field(default_factory=list)
    domain_match: str | None = None
    permission_check: str | None = None

    @field_validator("domain_match")
    @classmethod
    def _parses(cls, value: str | None) -> str | None:
        return _predicate(value, "acceptance_criteria.domain_match")


class Recovery(_Model):
    on_reject: str | None = None
    on_timeout: str | None = None
    on_error: str | None = None
    timeout_ms: int | None = Field(default=None, ge=1)
    max_retries: int = Field(default=0, ge=0)
    loop_guard: str | None = None


class Observability(_Model):
    trace_id_field: str | None = None
    audit_event: str | None = None
    metrics: list[str] = Field(default_factory=list)


class Idempotency(_Model):
    idempotent: bool = False
    dedupe_key: str | None = None
    replay_window_ms: int | None = Field(default=None, ge=0)


class HumanInTheLoop(_Model):
    human_target: bool = False
    channel: str | None = None
    timeout_ms: int | None = None
    resume_identity: str | None = None


class Contract(_Model):
    """One handoff edge, as written; `path` is where it was read from."""

    id: str = Field(pattern=r"^[a-z0-9]+(-[a-z0-9]+)*$")
    version: str | None = Field(default=None, pattern=r"^\d+\.\d+\.\d+$")
    source: str
    target: str
    trigger: Trigger
    payload: Payload
    acceptance_criteria: AcceptanceCriteria
    recovery: Recovery = Field(default_factory=Recovery)
    observability: Observability | None = None
    idempotency: Idempotency | None = None
    human_in_the_loop: bool | HumanInTheLoop = False
    reviewed_by: str | None = None
    path: str = Field(default="", exclude=True)

    @field_validator("trigger")
    @classmethod
    def _one_trigger(cls, value: Trigger) -> Trigger:
        if not (value.intent or value.predicate or value.tool_call):
            raise ValueError("trigger needs at least one of intent, predicate, tool_call")
        return value

    @property
    def human_target(self) -> bool:
        hitl = self.human_in_the_loop
        return hitl.human_target if isinstance(hitl, HumanInTheLoop) else bool(hitl)

    @property
    def idempotent(self) -> bool:
        return self.idempotency is not None and self.idempotency.idempotent

    def schema_path(self) -> Path | None:
        if not self.payload.schema_:
            return None
        return Path(self.path).parent / self.payload.schema_

    def schema_digest(self) -> str | None:
        """SHA-256 of the referenced schema file as it is now (None: missing)."""
        path = self.schema_path()
        if path is None or not path.is_file():
            return None
        return hashlib.sha256(path.read_bytes()).hexdigest()

    def covers(self, source: str, target: str) -> bool:
        """Whether this contract is the one for the edge source → target."""
        return self.source in (source, ANY) and self.target == target


def load_contract(path: Path) -> Contract:
    """Read one contract file (YAML or JSON); ContractError says what is wrong and where."""
    try:
        text = path.read_text()
        data = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (OSError, ValueError, yaml.YAMLError) as exc:
        raise ContractError(f"{path}: cannot read: {exc}") from None
    if not isinstance(data, dict):
        raise ContractError(f"{path}: a contract is a mapping of fields")
    try:
        return Contract.model_validate({**data, "path": str(path)})
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'contract'}: {e['msg']}"
            for e in exc.errors(include_url=False)
        )
        raise ContractError(f"{path}: {problems}") from None


def contract_files(directory: Path) -> list[Path]:
    """The contract files of a directory (registries and schemas excluded)."""
    skip = {"agents", "permissions"}
    return sorted(
        p
        for p in directory.iterdir()
        if p.is_file() and p.suffix in (".yaml", ".yml", ".json") and p.stem not in skip
    )


MISSING = object()


def lookup(data: Mapping[str, Any], dotted: str) -> Any:
    """The value at a dotted path through mappings, or MISSING."""
    value: Any = data
    for name in dotted.split("."):
        if not isinstance(value, Mapping) or name not in value:
            return MISSING
        value = value[name]
    return value


def load_data(path: Path) -> Any:
    """A registry file's data; ContractError when it cannot be read or parsed."""
    try:
        text = path.read_text()
        return json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (OSError, ValueError, yaml.YAMLError) as exc:
        raise ContractError(f"{path}: cannot read: {exc}") from None
