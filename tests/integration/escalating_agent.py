"""A test agent that escalates in every way the library offers (run as a process).

python -m tests.integration.escalating_agent clerk --port P --store URL --route human=URL

By the message text: "fail" raises the same error every time (the repeated-failure rule is
on: 3); "notify" informs the human without blocking and completes; "unsure" declares value
uncertainty; "incomplete" returns an escalation without what was tried (refused). A task
handed back with a decision completes saying what the decision was.
"""

from __future__ import annotations

import argparse
import sys

import uvicorn

from a2a_handoff import (
    Completed,
    Escalate,
    Escalation,
    EscalationPolicy,
    HandoffConfig,
    Outcome,
    TaskContext,
    build_card,
    create_app,
    open_store,
)
from a2a_handoff.escalation import Need, Trigger


class GatewayTimeout(Exception):
    """The (imaginary) payment gateway did not answer."""


class ClerkAgent:
    async def handle(self, ctx: TaskContext) -> Outcome | None:
        decision = ctx.decision
        if decision is not None:
            return Completed(
                f"decision received: {decision.verdict} by {decision.by}: {decision.text}"
            )
        text = ctx.text.lower()
        if "fail" in text:
            raise GatewayTimeout("the payment gateway timed out after 30 s")
        if "notify" in text:
            task_id = await ctx.escalation.inform(
                Escalation(
                    "A customer changed the delivery address twice within one hour.",
                    ["Checked the order history: both addresses are valid."],
                    "a look at whether this is fraud; the order goes on meanwhile",
                    Need.DECISION,
                    Trigger.VALUE_UNCERTAINTY,
                    resume={"note": "address change"},
                )
            )
            return Completed(f"done; the human was informed (task {task_id})")
        if "unsure" in text:
            return Escalate(
                Escalation.value_uncertainty(
                    "The customer asks to close the account that holds open orders.",
                    ["Listed the open orders: two are unpaid."],
                    "should the account be closed before the unpaid orders are settled?",
                )
            )
        if "incomplete" in text:
            return Escalate(
                Escalation("I'm stuck", [], "help", Need.DECISION, Trigger.KNOWLEDGE_GAP)
            )
        return Completed("nothing to escalate")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("name")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--store", required=True)
    parser.add_argument("--route", action="append", default=[])
    parser.add_argument("--recovery-interval", type=float, default=0.3)
    args = parser.parse_args()
    url = f"http://127.0.0.1:{args.port}/"
    routes = dict(r.split("=", 1) for r in args.route)
    app = create_app(
        ClerkAgent(),
        build_card(args.name, url, description="escalates on purpose"),
        open_store(args.store),
        handoff=HandoffConfig(routes=routes, recovery_interval=args.recovery_interval),
        escalation=EscalationPolicy(repeated_failures=3),
    )
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")
    return 0


if __name__ == "__main__":
    sys.exit(main())
