"""`GET /health`: is this agent able to do its work? 200 healthy, 503 degraded.

It reports the store (does it answer), pending handoffs older than `stale_after` seconds (a
target down, or a delivery stuck), the last completed handoff, the returns given up (an
operator's decision that could not reach the agent that escalated: the task failed, its
reason here), and the circuit breakers of the agents this one calls.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from a2a_handoff.client.client import AgentClient
from a2a_handoff.protocol.models import parse_time
from a2a_handoff.stores.base import OutboxEntry, Store

STALE_AFTER_SECONDS = 60


class Health:
    """The health route of one agent."""

    def __init__(self, store: Store, client: AgentClient, stale_after: float) -> None:
        self.store = store
        self.client = client
        self.stale_after = stale_after

    async def get(self, request: Request) -> Response:
        """Store reachable, stale pending handoffs, last completed handoff: 200 or 503."""
        store_ok = await self.store.ping()
        stale: list[str] = []
        last_done: str | None = None
        returns: list[OutboxEntry] = []
        if store_ok:
            cutoff = (datetime.now(UTC) - timedelta(seconds=self.stale_after)).isoformat()
            pending = await self.store.outbox(status="pending")
            stale = [e.handoff_id for e in pending if parse_time(e.created_at).isoformat() < cutoff]
            done = await self.store.outbox(status="done")
            last_done = max((e.updated_at for e in done), default=None)
            returns = [e for e in await self.store.outbox(status="failed") if _is_return(e)]
        healthy = store_ok and not stale
        body = {
            "status": "healthy" if healthy else "degraded",
            "store": "ok" if store_ok else "unreachable",
            "stalePendingHandoffs": len(stale),
            "lastCompletedHandoff": last_done,
            "failedReturns": len(returns),
            "lastFailedReturn": _describe(max(returns, key=lambda e: e.updated_at))
            if returns
            else None,
            "breakers": self.client.breakers(),
        }
        return JSONResponse(body, status_code=200 if healthy else 503)


def _is_return(entry: OutboxEntry) -> bool:
    try:
        return bool(json.loads(entry.envelope).get("kind") == "return")
    except (ValueError, AttributeError):
        return False


def _describe(entry: OutboxEntry) -> dict[str, Any]:
    return {
        "handoffId": entry.handoff_id,
        "taskId": entry.task_id,
        "target": entry.target_name,
        "reason": entry.detail,
        "at": entry.updated_at,
    }
