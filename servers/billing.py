"""The billing agent: refunds and invoices; needs an order id, asks for it when missing.

A refund over the escalation limit ($500 in the examples) goes to the human agent *before*
it is issued, and is issued only once an operator approved exactly that refund.
"""

from __future__ import annotations

import argparse

from a2a_handoff import (
    Agent,
    AgentCard,
    Completed,
    InputRequired,
    Outcome,
    TaskContext,
    build_card,
    skill,
)
from a2a_handoff.escalation import Action, EscalationPolicy
from a2a_handoff.llm import LLMAgent, tool
from servers import _llm
from servers._text import find_amount, find_order_id
from servers.payments import Payments

CAPABILITIES = ("invoices", "refunds")
DEFAULT_AMOUNT = 49.99
REFUND_LIMIT = 500.0
POLICY = EscalationPolicy(amount_limit=REFUND_LIMIT)


class BillingAgent:
    """Issues a refund for an order once it knows which order.

    A task cut by a crash resumes (`resumes`): the handler runs again, and the refund — a
    journaled step paid through the provider with the step's key — is not paid again."""

    resumes = True

    def __init__(self, payments: Payments | None = None) -> None:
        self.payments = payments or Payments()

    async def handle(self, ctx: TaskContext) -> Outcome | None:
        transfer = ctx.transfer_context
        entities = transfer.get("entities") or {}
        order_id = entities.get("orderId") or _order_in_history(ctx)
        if not order_id:
            return InputRequired("Which order is this about? Please give the order id.")
        amount = entities.get("amount") or find_amount(ctx.text) or DEFAULT_AMOUNT
        intent = transfer.get("intent", "refund")
        if intent == "invoice":
            await ctx.artifact(
                data={"orderId": str(order_id), "invoice": f"INV-{order_id}", "status": "sent"},
                name="invoice",
            )
            return Completed(f"Invoice INV-{order_id} sent for order {order_id}.")
        amount = float(amount)
        refund = Action(
            "refund",
            params={"orderId": str(order_id)},
            amount=amount,
            description=f"refund ${amount:.2f} on order {order_id}",
        )
        held = ctx.escalation.guard(
            refund,
            what_happened=f"The customer asks for a refund of ${amount:.2f} on order {order_id},"
            f" over the ${ctx.policy.amount_limit or 0:.0f} limit for refunds without review.",
            tried=[
                f"Found order {order_id} and computed the refund: ${amount:.2f}.",
                "Held the refund back: nothing has been paid out yet.",
            ],
            resume={
                "intent": "refund",
                "entities": {"orderId": str(order_id), "amount": amount},
                "summary": transfer.get("summary") or f"Refund on order {order_id}",
            },
        )
        if held is not None:
            return held
        order = str(order_id)
        await ctx.step("refund", lambda key: self.payments.refund(order, amount, key))
        await ctx.artifact(
            data={"orderId": order, "amount": amount, "status": "refunded"}, name="refund"
        )
        return Completed(f"Refund of ${float(amount):.2f} issued for order {order_id}.")


INSTRUCTIONS = (
    "You are billing: you issue refunds and send invoices for orders. Look the order up"
    " first; ask the customer for the order id when you do not have it. Refunds over $500"
    " wait for an operator's approval: the refund tool takes care of that."
)


async def lookup_order(order_id: str) -> dict[str, object]:
    """Look an order up by its id: what was charged, and its status."""
    if not order_id.isdigit():
        raise ValueError(f"no order {order_id!r}: order ids are digits")
    return {"orderId": order_id, "charged": DEFAULT_AMOUNT, "status": "delivered"}


@tool(amount="amount")
async def issue_refund(ctx: TaskContext, order_id: str, amount: float) -> str:
    """Refund `amount` dollars on an order (over the limit: after an operator's approval)."""
    await ctx.artifact(
        data={"orderId": order_id, "amount": amount, "status": "refunded"}, name="refund"
    )
    return f"Refund of ${amount:.2f} issued for order {order_id}."


def make_billing(args: argparse.Namespace) -> Agent:
    """Billing by a model (`--llm` with an endpoint), else by rules; or written with
    LangGraph (`--framework langgraph`)."""
    if getattr(args, "framework", None) == "langgraph":
        from servers.billing_graph import make_billing_graph  # the `langgraph` extra

        return make_billing_graph(args)
    model = _llm.model(args)
    if model is None:
        return BillingAgent(Payments(getattr(args, "payments", None)))
    return LLMAgent("billing", model, INSTRUCTIONS, tools=[lookup_order, issue_refund])


def _order_in_history(ctx: TaskContext) -> str | None:
    for message in reversed(ctx.history):
        if message.role.value == "ROLE_USER":
            found = find_order_id(message.text)
            if found:
                return found
    return None


def billing_card(url: str) -> AgentCard:
    return build_card(
        "billing",
        url,
        description="Refunds and invoices for orders",
        skills=[
            skill("refund", "Refund a charge on an order", "billing", "refund"),
            skill("invoice", "Send an invoice for an order", "billing", "invoice"),
        ],
        capabilities=CAPABILITIES,
    )
