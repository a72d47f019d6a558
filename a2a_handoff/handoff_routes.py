"""What a handler hands its task off through (`ctx.handoffs`): its routes, the gate asked
before a handoff, and a handoff made now and waited for.

Returning `Handoff(...)` from the handler hands the task off as well, ending the step; these
are for a handler that wants to know first, or to go on when the handoff is refused.
"""

from __future__ import annotations

from a2a_handoff.escalation import Escalate
from a2a_handoff.outcomes import Handoff, Route
from a2a_handoff.task_port import HandoffPort


class HandoffRoutes:
    """The routes a handler may hand its task off on (`ctx.handoffs`)."""

    __slots__ = ("_port",)

    def __init__(self, port: HandoffPort) -> None:
        self._port = port

    @property
    def routes(self) -> list[str]:
        """The names of the routes this agent may hand off to."""
        return self._port.route_names()

    async def route(self, name: str, kind: str = "handoff") -> Route:
        """The route `name`: its target's card and the edge's contract (when contracts are
        on). Raises GateRefused for a name that is not a route."""
        return await self._port.route(name, kind)

    async def check(self, decision: Handoff | Escalate) -> str | None:
        """Why returning `decision` now would fail the task — the capability gate, the
        edge's contract, the target's loop guard — or None when it would go. Nothing is
        sent or written: a handler may choose again. (A target may still refuse what it
        alone can judge, such as its own acceptance criteria: the contract's `on_reject`
        path then applies, as to any handoff.)"""
        if isinstance(decision, Escalate):
            decision = Handoff.to_human(decision.escalation)
        return await self._port.refusal(decision)

    async def hand_off(self, decision: Handoff) -> str | None:
        """Hand the task off now and wait for the answer, instead of returning the handoff.

        None: the target took it — the task is TRANSFERRED and the step is over (what the
        handler returns after it is ignored). A reason: refused by the gate, the edge's
        contract, the target's loop guard, or the target itself where the contract sends
        a refusal back to the source (`on_reject: source`, or no contract) — the task is
        WORKING again, the refusal in its history, and the handler may choose again.

        From its checkpoint on, the handoff is as durable as a returned one: if the process
        dies while it waits, the outbox replays it after the restart with today's rules (a
        refusal then fails the task or follows the contract: no handler waits any more).
        """
        return await self._port.hand_off(decision)
