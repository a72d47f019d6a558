"""`GET /health`: is this agent able to do its work? 200 healthy, 503 degraded.

Degraded when the store cannot be reached or fails writes, or a handoff has been pending for
longer than `stale_after` seconds (a target down, or a delivery stuck). Whether the store
answers is its own cheap probe's to say (on PostgreSQL, on a connection of its own: slow
queries filling the pool are no outage), and a query the store cancelled for its time is that
call's failure, never the store's. The report also gives
the number of pending handoffs, the oldest one, the last completed one, the returns this
process gave up (an operator's decision that could not reach the agent that escalated: the
task failed, its reason here), the circuit breakers of the agents this one calls, and for a
store with a connection pool (PostgreSQL) the pool's use (`storePool`: open, in use, max).

Cheap whatever the ledger's size: the figures come from the store's indexes and kept values
(`handoff_stats`), never from reading the ledger — a report costs about what a GetTask does,
so pollers load the agent no more than any other caller. With API keys on, a caller without
a valid key gets the status only: the details (peers' URLs among them) need a key; a caller
with one is told who it is here and whether it is an operator (`caller`: an operator reads
every task, anyone else its own only — what a console watching the agent needs to know).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from a2a_handoff.client.client import AgentClient
from a2a_handoff.errors import StoreError, StoreTimeoutError
from a2a_handoff.server._authentication import Authentication
from a2a_handoff.server._tls_peer import peer_of
from a2a_handoff.stores.base import Store

STALE_AFTER_SECONDS = 60


class Health:
    """The health route of one agent."""

    def __init__(
        self,
        store: Store,
        client: AgentClient,
        stale_after: float,
        auth: Authentication | None = None,
        returns: Callable[[], dict[str, Any]] | None = None,
        sees_all: Callable[[str], bool] | None = None,
    ) -> None:
        self.store = store
        self.client = client
        self.returns = returns  # the returns this process gave up (`Delivery.given_up_report`)
        self.stale_after = stale_after
        self.auth = auth
        self.sees_all = sees_all  # whether a principal is an operator here (reads every task)

    async def get(self, request: Request) -> Response:
        healthy, report = await self.measure()
        status = 200 if healthy else 503
        if self.auth is None:
            return JSONResponse(report, status_code=status)
        principal = await self.auth.authenticate(request.headers, peer_of(request.scope))
        if principal is None:
            return JSONResponse({"status": report["status"]}, status_code=status)
        operator = self.sees_all is not None and self.sees_all(principal)
        report["caller"] = {"principal": principal, "operator": operator}
        return JSONResponse(report, status_code=status)

    async def measure(self) -> tuple[bool, dict[str, Any]]:
        """(healthy, the report): what `GET /health` answers a caller with a key."""
        problem = await self.store.problem()
        report: dict[str, Any] = {"store": problem or "ok"}
        pool = self.store.capabilities.pool  # a store on a pool of connections
        if pool is not None:
            report["storePool"] = pool.pool_use()
        stale = 0
        if problem is None or problem.startswith("failing writes"):
            cutoff = datetime.now(UTC) - timedelta(seconds=self.stale_after)
            try:
                stats = await self.store.handoff_stats(cutoff.strftime("%Y-%m-%dT%H:%M:%S.000Z"))
            except StoreTimeoutError as exc:  # slow, not down: the store answered the probe
                report["pendingHandoffs"] = f"unknown: {exc}"
            except StoreError as exc:
                problem = report["store"] = f"unreachable: {exc}"
            else:
                stale = stats.stale
                report |= {
                    "pendingHandoffs": stats.pending,
                    "stalePendingHandoffs": stats.stale,
                    "oldestPendingHandoff": stats.oldest_pending,
                    "lastCompletedHandoff": stats.last_done,
                }
        healthy = problem is None and not stale
        report = {"status": "healthy" if healthy else "degraded", **report}
        if self.returns is not None:
            report |= self.returns()
        report["breakers"] = self.client.breakers()
        return healthy, report
