"""The triage agent: hands a request to billing or logistics by intent, or answers itself.

refund, charge, invoice, payment → billing; shipping, delivery, package, tracking → logistics.
The transfer context carries the intent, the entities found (an order id) and a short
summary — never the raw transcript.
"""

from __future__ import annotations

import argparse
from typing import Any

from a2a_handoff import (
    Agent,
    AgentCard,
    Completed,
    Handoff,
    Outcome,
    TaskContext,
    build_card,
    skill,
)
from a2a_handoff.llm import LLMAgent, Transfer
from servers import _llm
from servers._text import find_amount, find_order_id, words

# keyword → (route, intent, required capability)
RULES: dict[str, tuple[str, str, str]] = {
    "refund": ("billing", "refund", "refunds"),
    "refunds": ("billing", "refund", "refunds"),
    "charge": ("billing", "refund", "refunds"),
    "charged": ("billing", "refund", "refunds"),
    "invoice": ("billing", "invoice", "invoices"),
    "payment": ("billing", "invoice", "invoices"),
    "shipping": ("logistics", "shipping", "shipping"),
    "delivery": ("logistics", "shipping", "shipping"),
    "package": ("logistics", "shipping", "shipping"),
    "tracking": ("logistics", "shipping", "shipping"),
}
SCOPE = ("invoices", "refunds", "shipping")


def classify(text: str) -> tuple[str, str, str] | None:
    found = words(text)
    for keyword, rule in RULES.items():  # refunds first: "charged twice … refund" is billing
        if keyword in found:
            return rule
    return None


class TriageAgent:
    """Routes by keyword; answers what it cannot route."""

    resumes = True  # no side effect of its own: a task cut by a crash routes again

    async def handle(self, ctx: TaskContext) -> Outcome | None:
        decision = ctx.decision
        if decision is not None:  # an operator decided after a handoff of ours failed
            said = f": {decision.text}" if decision.text else ""
            return Completed(f"An operator looked into it ({decision.verdict}){said}")
        rule = classify(ctx.text)
        if rule is None:
            await ctx.artifact(
                text="I route billing (refunds, invoices) and logistics (shipping, tracking)"
                " questions. Tell me what happened with your order.",
                name="answer",
            )
            return Completed("Answered by triage")
        route, intent, capability = rule
        entities: dict[str, Any] = {}
        order_id = find_order_id(ctx.text)
        if order_id:
            entities["orderId"] = order_id
        amount = find_amount(ctx.text)
        if amount is not None:
            entities["amount"] = amount
        summary = f"Customer asks for help with a {intent}" + (
            f" on order {order_id}" if order_id else " (no order id given yet)"
        )
        await ctx.status(f"Routing to {route}: {intent} request")
        return Handoff(
            target=route,
            reason=f"{intent} request: routed to {route}",
            context={"intent": intent, "entities": entities, "summary": summary},
            required=(capability,),
            next_skill=intent,
        )


INSTRUCTIONS = (
    "You are triage, the front door of a shop's support. Hand refunds, charges and invoices"
    " to billing and shipping, delivery and tracking to logistics with the transfer tools;"
    " answer anything else briefly yourself, or ask the customer what happened."
)


def make_triage(args: argparse.Namespace) -> Agent:
    """Triage by a model (`--llm` with an endpoint), else by keywords; or written with the
    OpenAI Agents SDK (`--framework agents-sdk`)."""
    if getattr(args, "framework", None) == "agents-sdk":
        from servers.triage_sdk import make_triage_sdk  # the `agents` extra: only when asked

        return make_triage_sdk(args)
    model = _llm.model(args)
    if model is None:
        return TriageAgent()
    return LLMAgent(
        "triage",
        model,
        INSTRUCTIONS,
        handoffs=[Transfer("billing", ("refunds",)), Transfer("logistics", ("shipping",))],
    )


def triage_card(url: str) -> AgentCard:
    return build_card(
        "triage",
        url,
        description="Front door: routes billing and logistics requests to the right agent",
        skills=[skill("triage", "Route a customer request to the right specialist", "routing")],
    )
