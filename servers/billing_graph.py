"""Billing written with LangGraph (`python -m servers billing --framework langgraph`).

A graph of plain nodes, no model: `order` finds the order id (in the transfer context, else
it asks: `interrupt`), `refund` issues the refund or the invoice — a refund over the limit
goes to the human agent first (`guard`, then `end_step`). Its checkpoints live in the agent's
own SQLite file, so a restarted billing resumes a conversation waiting for an order id.
"""

from __future__ import annotations

import argparse
from typing import Any

from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt
from typing_extensions import TypedDict

from a2a_handoff import Agent
from a2a_handoff.adapters import end_step, from_langgraph, task_context
from a2a_handoff.escalation import Action
from servers._text import find_amount, find_order_id
from servers.billing import DEFAULT_AMOUNT

ASK = "Which order is this about? Please give the order id."


class Refund(TypedDict, total=False):
    text: str  # the user's message
    intent: str  # from the transfer context
    entities: dict[str, Any]
    summary: str
    order_id: str
    answer: str


async def order(state: Refund) -> Command[Any]:
    found = (state.get("entities") or {}).get("orderId") or find_order_id(state.get("text", ""))
    if found:
        return Command(goto="refund", update={"order_id": str(found)})
    said = interrupt(ASK)  # the task waits INPUT_REQUIRED; the answer resumes here
    return Command(goto="order", update={"text": str(said)})


async def refund(state: Refund) -> dict[str, Any]:
    ctx = task_context()
    order_id = state["order_id"]
    entities = state.get("entities") or {}
    if state.get("intent") == "invoice":
        await ctx.artifact(
            data={"orderId": order_id, "invoice": f"INV-{order_id}", "status": "sent"},
            name="invoice",
        )
        return {"answer": f"Invoice INV-{order_id} sent for order {order_id}."}
    amount = float(entities.get("amount") or find_amount(state.get("text", "")) or DEFAULT_AMOUNT)
    action = Action(
        "refund",
        params={"orderId": order_id},
        amount=amount,
        description=f"refund ${amount:.2f} on order {order_id}",
    )
    held = ctx.escalation.guard(
        action,
        what_happened=f"The customer asks for a refund of ${amount:.2f} on order {order_id},"
        f" over the ${ctx.policy.amount_limit or 0:.0f} limit for refunds without review.",
        tried=[f"Found order {order_id}.", "Held the refund back: nothing was paid out yet."],
        resume={
            "intent": "refund",
            "entities": {"orderId": order_id, "amount": amount},
            "summary": state.get("summary") or f"Refund on order {order_id}",
        },
    )
    if held is not None:
        end_step(held)  # to the human agent, before anything is paid
    await ctx.artifact(
        data={"orderId": order_id, "amount": amount, "status": "refunded"}, name="refund"
    )
    return {"answer": f"Refund of ${amount:.2f} issued for order {order_id}."}


def graph() -> StateGraph[Refund]:
    builder = StateGraph(Refund)
    builder.add_node("order", order)
    builder.add_node("refund", refund)
    builder.add_edge(START, "order")
    builder.add_edge("refund", END)
    return builder


def make_billing_graph(args: argparse.Namespace) -> Agent:
    store = args.store or "sqlite:///data/billing.db"
    if not store.startswith("sqlite:///"):
        raise ValueError("--framework langgraph keeps its checkpoints in a sqlite:/// store")
    # The graph's checkpoints in a file of their own beside the store's: two writers on one
    # SQLite file wait on each other's locks.
    base = store.split("?", 1)[0]
    return from_langgraph(graph(), checkpoints=base.removesuffix(".db") + "-graph.db")
