"""An example agent with timers on the handoff path (nothing in the package is edited).

    trace_handoff.py NAME --port P --store URL [--route …]   (the `python -m servers` options)

Wraps, at run time: the JSON-RPC entry point, the store's writes (`commit`, timed apart by
the shape of the step: create, update, checkpoint, terminate) and the SQLite COMMIT, the
client's calls to other agents, and the handoff delivery. `kill -USR2 PID` prints the count,
mean and p50 of each (ms) to stderr and resets them. Start triage and billing with it instead
of `python -m servers`, load them with wrk (bench/sendmessage.lua), then signal both.
"""

from __future__ import annotations

import functools
import signal
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable
from typing import Any

from a2a_handoff.client.client import AgentClient
from a2a_handoff.handoff.delivery import Delivery
from a2a_handoff.server._jsonrpc import JsonRpcEndpoint
from a2a_handoff.stores._sqlite_writer import GroupCommit
from a2a_handoff.stores.base import Commit, TaskRecord
from a2a_handoff.stores.sqlite import SqliteTaskStore

TIMES: dict[str, list[float]] = defaultdict(list)


def timed(name: str, fn: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    @functools.wraps(fn)
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return await fn(*args, **kwargs)
        finally:
            TIMES[name].append((time.perf_counter() - start) * 1000)

    return wrapper


def shape(unit: Commit) -> str:
    """What a step's commit does, by the parts it carries."""
    if unit.creates:
        return "create"
    if unit.outbox is not None:
        return "checkpoint"
    return "terminate" if unit.close is not None else "update"


def timed_commit(
    fn: Callable[[SqliteTaskStore, Commit], Awaitable[TaskRecord]],
) -> Callable[[SqliteTaskStore, Commit], Awaitable[TaskRecord]]:
    @functools.wraps(fn)
    async def wrapper(store: SqliteTaskStore, unit: Commit) -> TaskRecord:
        start = time.perf_counter()
        try:
            return await fn(store, unit)
        finally:
            TIMES[f"store.{shape(unit)}"].append((time.perf_counter() - start) * 1000)

    return wrapper


def report(*_: Any) -> None:
    for name, values in sorted(TIMES.items()):
        print(
            f"{name:24} n={len(values):6}  mean={statistics.fmean(values):7.3f}"
            f"  p50={statistics.median(values):7.3f}",
            file=sys.stderr,
            flush=True,
        )
    TIMES.clear()


def main() -> int:
    JsonRpcEndpoint.rpc = timed("rpc", JsonRpcEndpoint.rpc)  # type: ignore[method-assign]
    SqliteTaskStore.commit = timed_commit(SqliteTaskStore.commit)  # type: ignore[method-assign]
    GroupCommit._commit = timed("sqlite.batch", GroupCommit._commit)  # type: ignore[method-assign]
    AgentClient.call_json = timed("client.call", AgentClient.call_json)  # type: ignore[method-assign]
    Delivery.deliver = timed("handoff.deliver", Delivery.deliver)  # type: ignore[method-assign]
    signal.signal(signal.SIGUSR2, report)
    from servers.__main__ import main as serve

    return serve(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
