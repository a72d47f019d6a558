"""Holding an action back until a human approved it: what `TaskContext.guard` decides."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from a2a_handoff.escalation import Action, Decision, Escalate, Escalation, EscalationPolicy, Need
from a2a_handoff.outcomes import Rejected


class Approvals(Protocol):
    def use_approval(self, decision_id: str) -> bool: ...


class Guarding(Protocol):
    """What the guard reads of a handler's context (`agent.TaskContext`)."""

    @property
    def policy(self) -> EscalationPolicy: ...

    @property
    def decision(self) -> Decision | None: ...

    @property
    def transfer_context(self) -> dict[str, Any]: ...

    @property
    def port(self) -> Approvals: ...


def guarded(
    ctx: Guarding,
    action: Action,
    what_happened: str,
    tried: list[str],
    resume: Mapping[str, Any] | None,
) -> Escalate | Rejected | None:
    """None: run `action` (no rule of the policy holds it, or the context's decision
    approves exactly it and the approval was taken: not used before). `Escalate`: ask a
    human first (`resume`: what comes back with the answer, by default the transfer
    context). `Rejected`: the operator (or the timeout fallback) said no, or the approval
    was used."""
    policy, decision = ctx.policy, ctx.decision
    trigger = policy.held_back(action)
    if trigger is None:
        return None
    if decision is not None and decision.fingerprint == action.fingerprint():
        if decision.approves(action):
            if not ctx.port.use_approval(decision.id):
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
            resume=dict(ctx.transfer_context if resume is None else resume),
            target=policy.target,
        )
    )
