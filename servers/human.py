"""The human agent: escalations wait here, INPUT_REQUIRED, until an operator answers.

An escalation arrives as a handoff (blocking) or a notice (non-blocking), from an agent on this
agent's trust list. The operator's answer — `approve`, `deny` or a free reply, from `python -m
orchestrator` — resumes the task (a free reply to a request for *permission* is a note: the
escalation keeps waiting for approve or deny), and the task goes back to the agent that
escalated, as this agent's trust list knows it (by name), as a *return handoff* carrying the
decision, which the library signs: this task ends TRANSFERRED, pointing at the new task
there, so the user's conversation follows. A blocking escalation left unanswered for
`answer_within` seconds follows the fallback: `deny`, or a hand-over to a named agent (a
supervisor), and says so.
Everything lives in the store: a restart loses nothing.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

from a2a_handoff import (
    HANDOFF_EXTENSION_URI,
    AgentCard,
    Handoff,
    InputRequired,
    LocalTasks,
    Message,
    Outcome,
    Part,
    Rejected,
    Role,
    TaskContext,
    build_card,
    skill,
)
from a2a_handoff.errors import IncompleteEscalationError
from a2a_handoff.escalation import Decision, Escalation, Need, Verdict
from a2a_handoff.protocol import parse_time, utc_now

CAPABILITIES = ("approvals", "escalations")
DENY = "deny"
_WORDS = {
    "approve": Verdict.APPROVED,
    "approved": Verdict.APPROVED,
    "yes": Verdict.APPROVED,
    "deny": Verdict.DENIED,
    "denied": Verdict.DENIED,
    "no": Verdict.DENIED,
}


def escalation_of(metadata: dict[str, Any] | None) -> dict[str, Any] | None:
    """The escalation summary the library put on a task of the human agent."""
    ext = (metadata or {}).get(HANDOFF_EXTENSION_URI)
    escalation = ext.get("escalation") if isinstance(ext, dict) else None
    return escalation if isinstance(escalation, dict) else None


def decision_message(verdict: Verdict, text: str, by: str = "operator", **fields: Any) -> Message:
    """The message an operator (or the fallback) answers an escalation with."""
    return Message(
        message_id=fields.pop("message_id", None) or f"decision-{datetime.now(UTC).timestamp()}",
        role=Role.USER,
        parts=[Part(text=text or str(verdict))],
        metadata={HANDOFF_EXTENSION_URI: {"decision": {"verdict": str(verdict), "by": by}}},
        **fields,
    )


def _decision(message: Message, escalation: dict[str, Any]) -> Decision:
    ext = (message.metadata or {}).get(HANDOFF_EXTENSION_URI)
    raw = ext.get("decision") if isinstance(ext, dict) else None
    text = message.text.strip()
    verdict = Verdict.ANSWERED
    by = "operator"
    if isinstance(raw, dict):
        try:
            verdict = Verdict(str(raw.get("verdict")))
        except ValueError:
            verdict = Verdict.ANSWERED
        by = "fallback" if raw.get("by") == "fallback" else "operator"
    else:
        verdict = _WORDS.get(text.lower().rstrip(".!"), Verdict.ANSWERED)
    return Decision(verdict, text, by, escalation, utc_now())


class HumanAgent:
    """Holds escalations for an operator; hands each decision back to where it came from."""

    resumes = True  # its steps decide from what the task holds: cut by a crash, run again

    def __init__(
        self,
        answer_within: float | None = None,
        fallback: str = DENY,
        check_every: float = 1.0,
    ) -> None:
        self.answer_within = answer_within
        self.fallback = fallback
        self.check_every = check_every

    async def handle(self, ctx: TaskContext) -> Outcome | None:
        carried = ctx.transfer_context
        raw = carried.get("escalation")
        try:
            escalation = Escalation.from_json(raw if isinstance(raw, dict) else {})
        except IncompleteEscalationError as exc:
            return Rejected(f"not a complete escalation: {exc}")
        assert isinstance(raw, dict)
        tier = str(raw.get("tier") or "blocking")
        if ctx.envelope is not None:  # it just arrived: wait for an operator
            return InputRequired(escalation.describe(tier))
        held = escalation_of(ctx.task.metadata) or {}
        # Where the decision goes, as the library recorded it from the verified envelope:
        # the agent that escalated (or the one a forwarding desk named) — never a claim of
        # the transfer context.
        return_to = held.get("returnsTo") or {}
        decision = _decision(ctx.message, {**raw, "source": return_to})
        if decision.verdict is Verdict.ANSWERED and escalation.need == Need.PERMISSION:
            # A reply to a request for permission is information, not a verdict: it is kept
            # (in the task's history) and the escalation still waits for approve or deny.
            return InputRequired(
                f"{escalation.describe(tier)}\nOperator's note: {decision.text}\n"
                "Still waiting for a decision: approve or deny."
            )
        if decision.by == "fallback" and self.fallback != DENY:
            return Handoff(
                target=self.fallback,
                reason=f"no operator answered within {self.answer_within:g} s:"
                f" handed to {self.fallback}",
                context={**carried, "returnTo": return_to},
                kind="escalation",
            )
        resume = carried.get("resume") if isinstance(carried.get("resume"), dict) else {}
        said = f": {decision.text}" if decision.text else ""
        # Back to the escalating agent as this agent knows it — by name, through its trust
        # list: a URL the escalation carried is a claim, never an address to call.
        return Handoff(
            target=str(return_to.get("agent") or ""),
            reason=f"{decision.by} {decision.verdict}{said}",
            context={
                **(resume or {}),
                "summary": f"Escalation answered ({decision.verdict}){said}",
                "decision": decision.to_json(),
            },
            kind="return",
        )

    async def background(self, tasks: LocalTasks) -> None:
        """Apply the fallback to blocking escalations left unanswered too long."""
        if self.answer_within is None:
            return
        while True:
            await asyncio.sleep(self.check_every)
            now = datetime.now(UTC)
            for task in await tasks.waiting():
                escalation = escalation_of(task.metadata)
                if escalation is None or escalation.get("tier") != "blocking":
                    continue
                since = parse_time(task.status.timestamp or utc_now())
                if (now - since).total_seconds() < self.answer_within:
                    continue
                what = "denies it" if self.fallback == DENY else f"hands it to {self.fallback}"
                text = f"no operator answered within {self.answer_within:g} s; the fallback {what}"
                await tasks.answer(
                    task.id,
                    decision_message(
                        Verdict.DENIED, text, "fallback", message_id=f"fallback-{task.id}"
                    ),
                )


def human_card(url: str) -> AgentCard:
    return build_card(
        "human",
        url,
        description="Escalations to a human operator: approvals, decisions, information",
        skills=[skill("review", "A human reviews an escalation and decides", "escalation")],
        capabilities=CAPABILITIES,
    )
