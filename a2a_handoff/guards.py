"""Holding an action back until a human approved it: what `TaskContext.guard` decides."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from a2a_handoff.escalation import Action, Decision, Escalate, Escalation, EscalationPolicy, Need
from a2a_handoff.outcomes import Rejected


def guarded(
    action: Action,
    policy: EscalationPolicy,
    decision: Decision | None,
    use_approval: Callable[[str], bool],
    what_happened: str,
    tried: list[str],
    resume: Mapping[str, Any],
) -> Escalate | Rejected | None:
    """None: run `action` (no rule of `policy` holds it, or `decision` approves exactly it
    and `use_approval` took the approval: not used before). `Escalate`: ask a human first.
    `Rejected`: the operator (or the timeout fallback) said no, or the approval was used."""
    trigger = policy.held_back(action)
    if trigger is None:
        return None
    if decision is not None and decision.fingerprint == action.fingerprint():
        if decision.approves(action):
            if not use_approval(decision.id):
                return Rejected(
                    f"{action.name} not done: the approval {decision.id} was used already"
                )
            return None
        if not decision.approved:
            said = f": {decision.text}" if decision.text else ""
            return Rejected(f"{action.name} not done: {decision.verdict} by {decision.by}{said}")
        what_happened = f"{what_happened} (The earlier approval expired before it was used.)"
    return Escalate(
        Escalation(
            what_happened,
            tuple(tried),
            f"permission to {action.description or action.name}",
            Need.PERMISSION,
            trigger,
            action=action,
            resume=dict(resume),
            target=policy.target,
        )
    )
