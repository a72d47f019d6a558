"""Escalation to a human: a durable handoff to a human agent, and the rules that decide it.

An escalation is complete or it is not sent: what happened, what was tried, and what is
needed (a decision, an action, information, or permission) — "I'm stuck" is refused with
`IncompleteEscalationError`. Two tiers:

- blocking: the handler returns `Escalate(...)`; the task is handed off to the human agent
  (it ends TRANSFERRED there, like any handoff) and waits INPUT_REQUIRED for an operator.
  The operator's answer comes back as a *return handoff*: a new task on the agent that
  escalated, whose `ctx.decision` carries the verdict and whose transfer context carries
  back what the escalation asked to resume with.
- non-blocking: `await ctx.escalation.inform(...)`; the human agent holds a task the operator can
  answer (an intervention comes back the same way), and the handler goes on only once the
  human agent has durably taken the notice.

The rules (`EscalationPolicy`), each one an agent turns on:
- an action declared irreversible, or over `amount_limit`, escalates *before* it runs
  (`ctx.escalation.guard(action)`), and runs only once an operator approved exactly that action — by
  a decision a trusted human agent signed, not expired, used once;
- the same class of failure `repeated_failures` times in one context escalates on its own,
  listing the failures as what was tried;
- an agent's explicit declaration of value uncertainty or of a knowledge gap.
Model confidence is not a trigger, on purpose: confidence is badly calibrated.

The operator's answer, `Decision`, and the claims a human agent signs about it are
`a2a_handoff.decisions` (exported here too).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from a2a_handoff.canonical import canonical
from a2a_handoff.decisions import Decision, Verdict, decision_claims, decision_from_claims
from a2a_handoff.errors import IncompleteEscalationError, SignatureError

__all__ = [
    "Action",
    "Decision",
    "Escalate",
    "Escalation",
    "EscalationPolicy",
    "IncompleteEscalationError",
    "Need",
    "Trigger",
    "Verdict",
    "decision_claims",
    "decision_from_claims",
]

MIN_WORDS = 3  # "I am stuck" is not a description of what happened


class Need(StrEnum):
    """What the agent needs from the human."""

    DECISION = "decision"
    ACTION = "action"
    INFORMATION = "information"
    PERMISSION = "permission"


class Trigger(StrEnum):
    """Why the agent escalates. There is deliberately no 'low confidence'."""

    IRREVERSIBLE_ACTION = "irreversible_action"
    HIGH_IMPACT = "high_impact"
    REPEATED_FAILURE = "repeated_failure"
    VALUE_UNCERTAINTY = "value_uncertainty"
    KNOWLEDGE_GAP = "knowledge_gap"


@dataclass(frozen=True, slots=True)
class Action:
    """An action an agent is about to take, declared so the policy can hold it back."""

    name: str
    params: Mapping[str, Any] = field(default_factory=dict)
    irreversible: bool = False
    amount: float | None = None
    description: str = ""

    def fingerprint(self) -> str:
        """Identifies exactly this action: an approval is for it and nothing else.

        The SHA-256 of its canonical JSON (RFC 8785), so that the same action read back
        from the wire — where `750.0` may travel as `750` — has the same fingerprint."""
        value = {"name": self.name, "params": dict(self.params), "amount": self.amount}
        try:
            data = canonical(json.loads(json.dumps(value, default=str)))
        except (SignatureError, ValueError):  # no canonical form (NaN): still one identity
            data = json.dumps(value, sort_keys=True, default=str).encode()
        return hashlib.sha256(data).hexdigest()[:32]

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "params": dict(self.params),
            "irreversible": self.irreversible,
            "amount": self.amount,
            "description": self.description,
            "fingerprint": self.fingerprint(),
        }


def _text(value: Any, what: str) -> str:
    if not isinstance(value, str) or len(value.split()) < MIN_WORDS:
        raise IncompleteEscalationError(
            f"an escalation must say {what} (a sentence, not {value!r})"
        )
    return value.strip()


@dataclass(frozen=True, slots=True)
class Escalation:
    """What happened, what was tried, what is needed — all three, or it is refused."""

    what_happened: str
    what_was_tried: Sequence[str]
    what_is_needed: str
    need: Need
    trigger: Trigger
    action: Action | None = None
    resume: Mapping[str, Any] = field(default_factory=dict)  # handed back with the decision
    target: str = "human"  # the route name (or URL) of the human agent

    def __post_init__(self) -> None:
        _text(self.what_happened, "what happened")
        _text(self.what_is_needed, "what is needed")
        if isinstance(self.what_was_tried, str) or not self.what_was_tried:
            raise IncompleteEscalationError(
                "an escalation must list what was tried (at least one entry)"
            )
        for entry in self.what_was_tried:
            _text(entry, "what was tried")
        try:
            Need(self.need)
        except ValueError:
            raise IncompleteEscalationError(
                f"need must be one of {', '.join(Need)}, not {self.need!r}"
            ) from None
        try:
            Trigger(self.trigger)
        except ValueError:
            raise IncompleteEscalationError(
                f"trigger must be one of {', '.join(Trigger)}, not {self.trigger!r}"
            ) from None

    @classmethod
    def value_uncertainty(
        cls, what_happened: str, tried: Sequence[str], question: str, **kw: Any
    ) -> Escalation:
        """The agent can act, but is not sure it *should*: a decision is needed."""
        return cls(
            what_happened, tuple(tried), question, Need.DECISION, Trigger.VALUE_UNCERTAINTY, **kw
        )

    @classmethod
    def knowledge_gap(
        cls, what_happened: str, tried: Sequence[str], missing: str, **kw: Any
    ) -> Escalation:
        """The decision depends on something the agent cannot see or verify."""
        return cls(
            what_happened, tuple(tried), missing, Need.INFORMATION, Trigger.KNOWLEDGE_GAP, **kw
        )

    def to_json(self, tier: str = "blocking") -> dict[str, Any]:
        return {
            "whatHappened": self.what_happened,
            "whatWasTried": list(self.what_was_tried),
            "whatIsNeeded": self.what_is_needed,
            "need": str(self.need),
            "trigger": str(self.trigger),
            "tier": tier,
            "action": self.action.to_json() if self.action else None,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Escalation:
        """Parse (and re-validate) an escalation as it travels; raises when incomplete."""
        if not isinstance(data, Mapping):
            raise IncompleteEscalationError("an escalation must be an object")
        raw_action = data.get("action")
        action = None
        if isinstance(raw_action, Mapping):
            action = Action(
                str(raw_action.get("name", "")),
                dict(raw_action.get("params") or {}),
                bool(raw_action.get("irreversible")),
                raw_action.get("amount"),
                str(raw_action.get("description") or ""),
            )
            claimed = raw_action.get("fingerprint")
            if claimed is not None and claimed != action.fingerprint():
                # What an operator is shown (name, params, amount) must be what an approval
                # is signed over (the fingerprint): a mismatch is refused, not displayed.
                raise IncompleteEscalationError(
                    "the action's fingerprint does not match its name, params and amount"
                )
        tried = data.get("whatWasTried")
        return cls(
            data.get("whatHappened"),  # type: ignore[arg-type]  # validated in __post_init__
            tuple(tried) if isinstance(tried, list) else tried,  # type: ignore[arg-type]
            data.get("whatIsNeeded"),  # type: ignore[arg-type]
            data.get("need"),  # type: ignore[arg-type]
            data.get("trigger"),  # type: ignore[arg-type]
            action,
        )

    def describe(self, tier: str = "blocking") -> str:
        """The escalation as a person reads it."""
        tried = "\n".join(f"  - {t}" for t in self.what_was_tried)
        return (
            f"Escalation ({tier}, {self.trigger}): {self.need} needed.\n"
            f"What happened: {self.what_happened}\n"
            f"What was tried:\n{tried}\n"
            f"What is needed: {self.what_is_needed}"
        )


@dataclass(frozen=True, slots=True)
class Escalate:
    """A handler outcome: hand the task to the human agent and wait for a decision."""

    escalation: Escalation


@dataclass(frozen=True, slots=True)
class EscalationPolicy:
    """Which rules escalate, and to whom.

    `irreversible`: an action declared irreversible escalates before it runs.
    `amount_limit`: an action whose amount is over it escalates before it runs.
    `repeated_failures`: that many failures of one class in one context escalate (None: off).
    `declarations`: whether explicit value-uncertainty / knowledge-gap escalations are allowed.
    """

    irreversible: bool = True
    amount_limit: float | None = None
    repeated_failures: int | None = None
    declarations: bool = True
    target: str = "human"

    def held_back(self, action: Action) -> Trigger | None:
        """Why `action` must wait for a human, or None when it may run."""
        if self.irreversible and action.irreversible:
            return Trigger.IRREVERSIBLE_ACTION
        if (
            self.amount_limit is not None
            and action.amount is not None
            and action.amount > self.amount_limit
        ):
            return Trigger.HIGH_IMPACT
        return None
