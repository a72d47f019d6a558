"""What a handler asks another agent through (`ctx.delegation`): a sub-result, its task
staying WORKING (docs/delegation.md), and the delegations of its earlier steps.

A delegation is a handoff of kind `delegation`: signed, gated, under the edge's contract and
the delegate's trust list like any, but the delegating task keeps its owner and the handler
waits for the outcome (a `Delegated`, whatever happens).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from a2a_handoff.delegated import Delegated
from a2a_handoff.outcomes import Handoff
from a2a_handoff.protocol.models import Message
from a2a_handoff.task_port import DelegationPort


class Delegation:
    """A step's delegations (`ctx.delegation`): asked now, or made by earlier steps."""

    __slots__ = ("_port", "_step")

    def __init__(self, port: DelegationPort, step: str) -> None:
        self._port = port
        self._step = step  # the id of the message the step runs on

    async def ask(
        self,
        route: str,
        request: str | Message,
        *,
        context: Mapping[str, Any] | None = None,
        required: tuple[str, ...] = (),
        reason: str | None = None,
        within: float = 60.0,
    ) -> Delegated:
        """Ask the agent at `route` for a sub-result and wait for it, this task staying
        WORKING. The delegate reads `request` as `ctx.text` and `context` as
        `ctx.transfer_context`; signed, gated (`required`), under the edge's contract and the
        delegate's trust list, as a handoff. The outcome is a `Delegated` whatever happens
        (FAILED after `within` seconds), recorded before it is returned: a handler run again
        after a restart gets it back for the same request, and the delegate works once."""
        asked = delegation_request(route, request, context, required, reason)
        return await self._port.delegate(self._step, asked, within)

    @property
    def earlier(self) -> list[Delegated]:
        """The delegations of earlier steps, at the outcome each had when this step began
        (the same after a restart): one asking for input is answered here (`answer()`)."""
        return self._port.earlier(self._step)


def delegation_request(
    route: str,
    request: str | Message,
    context: Mapping[str, Any] | None,
    required: tuple[str, ...],
    reason: str | None,
) -> Handoff:
    """What `Delegation.ask` asks, as a handoff of kind `delegation`: the request's text as
    the summary, its data parts and `context` as the transfer context."""
    text = request if isinstance(request, str) else request.text
    data: dict[str, Any] = {}
    if isinstance(request, Message):
        for part in request.parts:
            if isinstance(part.data, dict):
                data.update(part.data)
    return Handoff(
        target=route,
        reason=reason or text[:200],
        context={**data, **(context or {}), "summary": text},
        required=tuple(required),
        kind="delegation",
    )
