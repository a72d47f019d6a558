"""Escalation to a human: a durable handoff to a human agent, and the rules that decide it.

An escalation is complete or it is not sent: what happened, what was tried, and what is
needed (a decision, an action, information, or permission) — "I'm stuck" is refused with
`IncompleteEscalationError`. Two tiers:

- blocking: the handler returns `Escalate(...)`; the task is handed off to the human agent
  (it ends TRANSFERRED there, like any handoff) and waits INPUT_REQUIRED for an operator.
  The operator's answer comes back as a *return handoff*: a new task on the agent that
  escalated, whose `ctx.decision` carries the verdict and whose transfer context carries
  back what the escalation asked to resume with.
- non-blocking: `await ctx.inform(...)`; the human agent holds a task the operator can
  answer (an intervention comes back the same way), and the handler goes on only once the
  human agent has durably taken the notice.

The rules (`EscalationPolicy`), each one an agent turns on:
- an action declared irreversible, or over `amount_limit`, escalates *before* it runs
  (`ctx.guard(action)`), and runs only once an operator approved exactly that action — by
  a decision a trusted human agent signed, not expired, used once;
- the same class of failure `repeated_failures` times in one context escalates on its own,
  listing the failures as what was tried;
- an agent's explicit declaration of value uncertainty or of a knowledge gap.
Model confidence is not a trigger, on purpose: confidence is badly calibrated.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from a2a_handoff.canonical import canonical
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


class Verdict(StrEnum):
    """How the operator (or the timeout fallback) answered."""

    APPROVED = "approved"
    DENIED = "denied"
    ANSWERED = "answered"


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
        return cls(what_happened, tuple(tried), question, Need.DECISION,
                   Trigger.VALUE_UNCERTAINTY, **kw)  # fmt: skip

    @classmethod
    def knowledge_gap(
        cls, what_happened: str, tried: Sequence[str], missing: str, **kw: Any
    ) -> Escalation:
        """The decision depends on something the agent cannot see or verify."""
        return cls(what_happened, tuple(tried), missing, Need.INFORMATION,
                   Trigger.KNOWLEDGE_GAP, **kw)  # fmt: skip

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
class Decision:
    """An operator's answer to an escalation, as it came back to the agent that escalated.

    Only a decision signed by a human agent on the trust list is ever made into one (see
    `handoff.verified`): its `fingerprint` (the action it decides on), `expires` (Unix time),
    `id` (used once) and `signer` come from the signed claims, never from the message text.
    """

    verdict: Verdict
    text: str
    by: str  # "operator" or "fallback"
    escalation: Mapping[str, Any]
    at: str = ""
    fingerprint: str | None = None
    expires: float = 0.0
    id: str = ""
    signer: str = ""
    escalation_task: str = ""  # the human agent's task that held the escalation
    escalated_from: str = ""  # the task of the agent that escalated, which this answers

    @property
    def approved(self) -> bool:
        return self.verdict is Verdict.APPROVED

    def expired(self, now: float | None = None) -> bool:
        return (time.time() if now is None else now) >= self.expires

    def approves(self, action: Action, now: float | None = None) -> bool:
        """Whether this decision approves exactly `action` (same name, params and amount),
        and is still valid."""
        return self.approved and self.fingerprint == action.fingerprint() and not self.expired(now)

    def to_json(self) -> dict[str, Any]:
        """What the human agent hands back (the library signs it on the way out)."""
        return {
            "verdict": str(self.verdict),
            "text": self.text,
            "by": self.by,
            "escalation": dict(self.escalation),
            "at": self.at,
        }

    def to_stored(self) -> dict[str, Any]:
        """The verified decision as the receiving task keeps it (in its own metadata)."""
        return {
            **self.to_json(),
            "fingerprint": self.fingerprint,
            "expires": self.expires,
            "id": self.id,
            "signer": self.signer,
            "escalationTask": self.escalation_task,
            "escalatedFrom": self.escalated_from,
        }

    @classmethod
    def from_stored(cls, data: Any) -> Decision | None:
        """A decision `to_stored` wrote (verified when it was received); None otherwise."""
        if not isinstance(data, Mapping):
            return None
        try:
            verdict = Verdict(str(data.get("verdict")))
            expires = float(data.get("expires") or 0)
        except (TypeError, ValueError):
            return None
        escalation = data.get("escalation")
        fingerprint = data.get("fingerprint")
        return cls(
            verdict,
            str(data.get("text") or ""),
            str(data.get("by") or "operator"),
            dict(escalation) if isinstance(escalation, Mapping) else {},
            str(data.get("at") or ""),
            str(fingerprint) if fingerprint else None,
            expires,
            str(data.get("id") or ""),
            str(data.get("signer") or ""),
            str(data.get("escalationTask") or ""),
            str(data.get("escalatedFrom") or ""),
        )


def decision_claims(
    decision: Mapping[str, Any],
    *,
    issuer: str,
    audience: str,
    escalation_task: str,
    decision_id: str,
    ttl: float,
    now: float | None = None,
) -> dict[str, Any]:
    """What a human agent signs about a decision: the verdict, the action's fingerprint,
    the escalation's task, who it is for, and when it stops approving anything."""
    issued = int(time.time() if now is None else now)
    escalation = decision.get("escalation")
    escalation = escalation if isinstance(escalation, Mapping) else {}
    action = escalation.get("action")
    source = escalation.get("source")
    fingerprint = action.get("fingerprint") if isinstance(action, Mapping) else None
    return {
        "jti": decision_id,
        "iss": issuer,
        "aud": audience,
        "sub": escalation_task,
        "src": str(source.get("taskId") or "") if isinstance(source, Mapping) else "",
        "fp": str(fingerprint) if fingerprint else None,
        "verdict": str(decision.get("verdict") or ""),
        "by": str(decision.get("by") or "operator"),
        "text": str(decision.get("text") or ""),
        "iat": issued,
        "exp": issued + int(ttl),
    }


def decision_from_claims(
    claims: Mapping[str, Any], signer: str, escalation: Mapping[str, Any], at: str = ""
) -> Decision:
    """The Decision signed claims describe (ValueError when they are not a decision)."""
    verdict = Verdict(str(claims.get("verdict")))
    expires = claims.get("exp")
    if not isinstance(expires, int | float) or isinstance(expires, bool):
        raise ValueError("a decision must say when it expires")
    fingerprint = claims.get("fp")
    return Decision(
        verdict,
        str(claims.get("text") or ""),
        "fallback" if claims.get("by") == "fallback" else "operator",
        dict(escalation),
        at,
        str(fingerprint) if fingerprint else None,
        float(expires),
        str(claims.get("jti") or ""),
        signer,
        str(claims.get("sub") or ""),
        str(claims.get("src") or ""),
    )


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
