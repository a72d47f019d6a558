"""An operator's decision on an escalation, and the claims a human agent signs about it.

A decision approves exactly one action (by its fingerprint), until it expires, once; only one
a trusted human agent signed is ever made into a `Decision` (see `handoff.verified`), from
its claims (`decision_from_claims`), never from the message text. A human agent signs
`decision_claims` on the way out. (Escalations themselves are `a2a_handoff.escalation`.)
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol

__all__ = ["Decision", "Fingerprinted", "Verdict", "decision_claims", "decision_from_claims"]


class Verdict(StrEnum):
    """How the operator (or the timeout fallback) answered."""

    APPROVED = "approved"
    DENIED = "denied"
    ANSWERED = "answered"


class Fingerprinted(Protocol):
    """What a decision is about: an action that names itself (`escalation.Action`)."""

    def fingerprint(self) -> str: ...


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

    def approves(self, action: Fingerprinted, now: float | None = None) -> bool:
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
