"""The logistics agent: shipping and tracking; needs an order id, asks for it when missing."""

from __future__ import annotations

from a2a_handoff import AgentCard, Completed, InputRequired, Outcome, TaskContext, build_card, skill
from servers.billing import _order_in_history

CAPABILITIES = ("shipping",)


class LogisticsAgent:
    """Tracks an order's package."""

    resumes = True  # a lookup, no side effect: a task cut by a crash looks again

    async def handle(self, ctx: TaskContext) -> Outcome | None:
        entities = ctx.transfer_context.get("entities") or {}
        order_id = entities.get("orderId") or _order_in_history(ctx)
        if not order_id:
            return InputRequired("Which order should I track? Please give the order id.")
        tracking = f"1Z{int(order_id):010d}"
        await ctx.artifact(
            data={
                "orderId": str(order_id),
                "carrier": "UPS",
                "trackingNumber": tracking,
                "status": "in transit",
            },
            name="tracking",
        )
        return Completed(f"Order {order_id} is in transit with UPS, tracking {tracking}.")


def logistics_card(url: str) -> AgentCard:
    return build_card(
        "logistics",
        url,
        description="Shipping, delivery and package tracking",
        skills=[skill("tracking", "Track the package of an order", "shipping", "tracking")],
        capabilities=CAPABILITIES,
    )
