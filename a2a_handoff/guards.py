"""What a handler asks a human through (`ctx.escalation`): an action held back until an
operator approved it (`guard`, decided here), and a notice that lets the task go on
(`inform`). A blocking escalation is an outcome the handler returns (`Escalate`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from a2a_handoff.escalation import Action, Decision, Escalate, Escalation, EscalationPolicy, Need
from a2a_handoff.outcomes import Rejected
from a2a_handoff.task_port import EscalationPort


class Guarding(Protocol):
    """What the guard reads of a handler's context (`agent.TaskContext`)."""

    @property
    def policy(self) -> EscalationPolicy: ...

    @property
    def decision(self) -> Decision | None: ...

    @property
    def transfer_context(self) -> dict[str, Any]: ...


class Escalations:
    """What a handler asks of a human (`ctx.escalation`)."""

    __slots__ = ("_ctx", "_port")

    def __init__(self, port: EscalationPort, ctx: Guarding) -> None:
        self._port = port
        self._ctx = ctx

    def guard(
        self,
        action: Action,
        *,
        what_happened: str,
        tried: list[str],
        resume: Mapping[str, Any] | None = None,
    ) -> Escalate | Rejected | None:
        """Hold `action` back until a human approved it, when the policy says so.

        None: run it (no rule holds it, or an operator approved exactly this action: by a
        decision a trusted human agent signed, not expired, and not used before).
        `Escalate`: return it — the task goes to the human agent before anything runs.
        `Rejected`: return it — the operator (or the timeout fallback) said no, or the
        approval was used already.
        """
        return guarded(self._ctx, self._port, action, what_happened, tried, resume)

    async def inform(self, escalation: Escalation) -> str:
        """A non-blocking escalation: the human agent takes it durably, the task goes on.

        Returns the id of the task the human agent holds for it. Raises when the human
        agent cannot be reached (after retries): nothing goes on uninformed.
        """
        return await self._port.inform(escalation)


def guarded(
    ctx: Guarding,
    approvals: EscalationPort,
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
            if not approvals.use_approval(decision.id):
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
