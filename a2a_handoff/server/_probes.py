"""`GET /livez` and `GET /readyz`: the probes of an orchestrator or a load balancer.

- `/livez`: 200 while the process serves at all — nothing else is looked at, so a store
  outage never gets a replica restarted (restarting it would not bring the store back);
- `/readyz`: 200 when the agent can take work; 503 once it is draining (told to stop,
  `AgentService.drain`) or while its store does not answer or fails writes.

Cheap and public: one round trip to the store (its own probe: on PostgreSQL a connection
of its own, so a busy pool is no outage; a store known down is answered without waiting for
it), no API key asked, and nothing said but the status word — `/health` has the details, for
a caller with a key.
"""

from __future__ import annotations

from collections.abc import Callable

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from a2a_handoff.stores.base import Store

_HEADERS = {"Cache-Control": "no-store"}


class Probes:
    """The liveness and readiness routes of one agent."""

    def __init__(self, store: Store, draining: Callable[[], bool]) -> None:
        self.store = store
        self.draining = draining

    async def livez(self, request: Request) -> Response:
        return JSONResponse({"status": "alive"}, headers=_HEADERS)

    async def readyz(self, request: Request) -> Response:
        if self.draining():
            return JSONResponse({"status": "draining"}, status_code=503, headers=_HEADERS)
        if await self.store.problem() is not None:
            return JSONResponse({"status": "unavailable"}, status_code=503, headers=_HEADERS)
        return JSONResponse({"status": "ready"}, headers=_HEADERS)
