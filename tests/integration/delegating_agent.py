"""A test agent that delegates, and answers delegations (run as a process).

python -m tests.integration.delegating_agent NAME --port P --store URL
    [--route NAME=URL] [--trust NAME=URL] [--contracts DIR] [--work-log PATH]
    [--key-file PATH (on a shared store)] [--auth-keys FILE] [--credential NAME=env:VAR]

Asked by a user, it delegates the message to its route `billing` (`stranger` when the text
says "untrusted", the one a text "route=NAME …" names): "gate" requires a capability no one
offers, "offtopic" breaks the edge's contract, "briefly" waits half a second only. It
publishes the outcome as an artifact `delegated` and completes — unless the delegate asks
something: then it asks its own user, and answers the delegate with the user's reply in the
next step (the reply "never mind" completes, "give up" fails, without answering).

Asked by another agent (a delegation), it works on every step, as a journaled step whose
key the work honours: a line in the work log once per key (the tests count the work), and
every call in `WORK_LOG.calls` (a resumed task's step is answered from its journal), then:
"stall" waits until canceled before any work, "hang" after it, "slowly" two seconds after
it; "question" asks which order first; otherwise it refunds the order the text names
(artifact `refund`; "bulky" adds an artifact `scan` of 100 000 bytes before it).

`--hold-file PATH`: while PATH exists, a task this agent creates is answered only once PATH
is gone (a request taken and not yet answered, for the tests). `--grpc-port G`: it is
reachable over gRPC alone, on G (its card offers gRPC alone, messages over HTTP refused:
`tests.integration.grpc_only_agent`).
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
from pathlib import Path
from typing import Any

import uvicorn

from a2a_handoff import (
    ApiKeyAuth,
    Completed,
    Delegated,
    Failed,
    GrpcConfig,
    HandoffConfig,
    InputRequired,
    Outcome,
    TaskContext,
    TrustConfig,
    build_card,
    create_app,
    open_store,
)
from a2a_handoff.contracts import Catalog
from a2a_handoff.secrets import read_secret
from a2a_handoff.stores.base import Commit, Store, TaskRecord
from a2a_handoff.trust.keys import KeyFile
from tests.integration.grpc_only_agent import GrpcAlone


class DelegatingAgent:
    resumes = True  # its work is a journaled step: a task cut by a crash goes on

    def __init__(self, work_log: Path | None) -> None:
        self.work_log = work_log

    async def log(self, line: str, key: str) -> None:
        """Do the work: as a service that honours idempotency keys, once per `key` in the
        work log; every call, done or not, in the calls log beside it."""
        assert self.work_log is not None
        calls = self.work_log.with_name(self.work_log.name + ".calls")
        with calls.open("a") as log:
            log.write(f"{key}\n")
        done = self.work_log.read_text() if self.work_log.exists() else ""
        if f" key={key}\n" not in done:
            with self.work_log.open("a") as log:
                log.write(f"{line} key={key}\n")

    async def handle(self, ctx: TaskContext) -> Outcome | None:
        if ctx.delegated:
            return await self.work(ctx)
        asking = [d for d in ctx.delegation.earlier if d.needs_input]
        if asking and ctx.text in ("never mind", "give up"):  # leaves the delegate asking
            return Completed("dropped") if ctx.text == "never mind" else Failed("gave up")
        if asking:  # the delegate asked; our user answered it
            return await self.report(ctx, await asking[-1].answer(ctx.text))
        text = ctx.text
        order = re.search(r"\d{3,}", text)
        chosen = re.match(r"route=(\S+) ", text)  # a route the user names (an attack)
        result = await ctx.delegation.ask(
            chosen.group(1) if chosen else "stranger" if "untrusted" in text else "billing",
            text,
            context={
                "intent": "chitchat" if "offtopic" in text else "refund",
                **({"entities": {"orderId": order.group()}} if order else {}),
            },
            required=("wire-transfers",) if "gate" in text else (),
            within=0.5 if "briefly" in text else 60.0,
        )
        if result.needs_input:
            return InputRequired(f"{result.agent} asks: {result.question}")
        return await self.report(ctx, result)

    @staticmethod
    async def report(ctx: TaskContext, result: Delegated) -> Outcome:
        await ctx.artifact(
            data={
                "state": result.state.name,
                "text": result.text,
                "data": result.data(),
                "taskId": result.task_id,
                "sent": result.sent,
            },
            name="delegated",
        )
        return Completed(f"{result.agent} answered {result.state.name}: {result.text}")

    async def work(self, ctx: TaskContext) -> Outcome | None:
        steps = sum(1 for m in ctx.history if m.role.value == "ROLE_USER")
        if "stall" in ctx.text:
            await asyncio.Event().wait()
        if self.work_log is not None:  # a journaled step: done once, whatever crashes
            line = f"{ctx.context_id} {ctx.task_id} {ctx.text}"
            await ctx.step(f"work-{steps}", lambda key: self.log(line, key))
        if "hang" in ctx.text:
            await asyncio.Event().wait()
        if "slowly" in ctx.text:
            await asyncio.sleep(2)
        if "question" in ctx.text and steps == 1:
            return InputRequired("Which order is this about?")
        order = (ctx.transfer_context.get("entities") or {}).get("orderId")
        if steps > 1:
            order = ctx.text
        if "bulky" in ctx.text:
            await ctx.artifact(data={"scan": "x" * 100_000}, name="scan")
        await ctx.artifact(data={"orderId": order, "status": "refunded"}, name="refund")
        return Completed(f"refunded order {order}")


def hold(store: Store, path: Path) -> None:
    """A task created while `path` exists is answered once it is gone (test-only)."""
    commit = store.commit

    async def held(unit: Commit) -> TaskRecord:
        stored = await commit(unit)
        while unit.creates and path.exists():  # noqa: ASYNC110, ASYNC240 (a test's gate: polled)
            await asyncio.sleep(0.02)
        return stored

    setattr(store, "commit", held)  # noqa: B010


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("name")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--store", required=True)
    parser.add_argument("--route", action="append", default=[])
    parser.add_argument("--trust", action="append", default=[])
    parser.add_argument("--contracts", type=Path, default=None)
    parser.add_argument("--work-log", type=Path, default=None)
    parser.add_argument("--recovery-interval", type=float, default=0.3)
    parser.add_argument("--hold-file", type=Path, default=None)
    parser.add_argument("--key-file", type=Path, default=None)  # on a shared store
    parser.add_argument("--auth-keys", type=Path, default=None)  # principal=key lines
    parser.add_argument("--credential", action="append", default=[])  # ROUTE=env:VAR
    parser.add_argument("--grpc-port", type=int, default=None)  # reachable over gRPC alone
    parser.add_argument("--tenant", default=None)  # the tenant its card's interfaces name
    args = parser.parse_args()
    routes = dict(r.split("=", 1) for r in args.route)
    credentials = {
        routes[name]: read_secret(where, name)
        for name, where in (c.split("=", 1) for c in args.credential)
    }
    url = f"http://127.0.0.1:{args.port}/"
    store = open_store(args.store)
    if args.hold_file is not None:
        hold(store, args.hold_file)
    app = create_app(
        DelegatingAgent(args.work_log),
        build_card(
            args.name, url, description="delegates, and is delegated to", tenant=args.tenant
        ),
        store,
        handoff=HandoffConfig(
            routes=routes,
            credentials=credentials,
            contracts=Catalog.load(args.contracts) if args.contracts else None,
            recovery_interval=args.recovery_interval,
        ),
        trust=TrustConfig(
            trusted=args.trust,
            identity=KeyFile(args.key_file) if args.key_file else None,
            auth=ApiKeyAuth.from_file(args.auth_keys) if args.auth_keys else None,
        ),
        grpc=GrpcConfig(port=args.grpc_port) if args.grpc_port is not None else None,
    )
    served: Any = app if args.grpc_port is None else GrpcAlone(app)
    uvicorn.run(served, host="127.0.0.1", port=args.port, log_level="warning")
    return 0


if __name__ == "__main__":
    sys.exit(main())
