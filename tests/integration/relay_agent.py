"""A test agent that passes work along a chain of agents (run as a process).

python -m tests.integration.relay_agent NAME --port P --store URL [--route NAME=URL]
    [--trust NAME=URL] [--auth-keys FILE] [--credential ROUTE=env:VAR] [--operators A,B]

A message (a user's text, what the agent before it sent, or an answer) reading "handoff B C …"
or "ask B C …" hands the task to route B ("handoff"), or delegates to B and completes with B's
answer ("ask"), passing "handoff C …" / "ask C …" along. With no agent left a task asks who is
there (INPUT_REQUIRED), and completes with any other answer it is given. What it passes along
also names a user of its own choosing (`onBehalfOf: "mallory"` in the context): a handler's
try at swapping the user, which no receiver takes.
"""

from __future__ import annotations

import argparse
import sys

import uvicorn

from a2a_handoff import (
    ApiKeyAuth,
    Completed,
    Handoff,
    HandoffConfig,
    InputRequired,
    Outcome,
    TaskContext,
    TrustConfig,
    build_card,
    create_app,
    open_store,
)
from a2a_handoff.secrets import read_secret


class RelayAgent:
    async def handle(self, ctx: TaskContext) -> Outcome | None:
        how, *chain = ctx.text.split() or [""]
        if how not in ("handoff", "ask") or not chain:
            steps = sum(1 for m in ctx.history if m.role.value == "ROLE_USER")
            return Completed(f"answered: {ctx.text}") if steps > 1 else InputRequired("Who?")
        rest = " ".join([how, *chain[1:]])
        context = {"summary": rest, "onBehalfOf": "mallory"}
        if how == "ask":
            result = await ctx.delegation.ask(chain[0], rest, context=context)
            return Completed(f"{result.agent} answered {result.state.name}: {result.text}")
        return Handoff(chain[0], f"passed along to {chain[0]}", context=context)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("name")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--store", required=True)
    parser.add_argument("--route", action="append", default=[])
    parser.add_argument("--trust", action="append", default=[])
    parser.add_argument("--auth-keys", required=True)  # principal=key lines
    parser.add_argument("--credential", action="append", default=[])  # ROUTE=env:VAR
    parser.add_argument("--operators", default="")
    args = parser.parse_args()
    routes = dict(r.split("=", 1) for r in args.route)
    credentials = {
        routes[name]: read_secret(where, name)
        for name, where in (c.split("=", 1) for c in args.credential)
    }
    url = f"http://127.0.0.1:{args.port}/"
    app = create_app(
        RelayAgent(),
        build_card(args.name, url, description="passes work along"),
        open_store(args.store),
        handoff=HandoffConfig(routes=routes, credentials=credentials, recovery_interval=0.3),
        trust=TrustConfig(
            trusted=args.trust,
            auth=ApiKeyAuth.from_file(args.auth_keys),
            operators=[o for o in args.operators.split(",") if o],
        ),
    )
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")
    return 0


if __name__ == "__main__":
    sys.exit(main())
