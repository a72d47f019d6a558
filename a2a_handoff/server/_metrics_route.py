"""`GET /metrics`: the agent's Prometheus metrics (`observe._metrics`), in the text format.

Under API-key auth the route needs a key, as /health's details do (the breakers' labels name
peers' URLs), unless the agent was started with `ObservabilityConfig(metrics_public=True)`
(a scraper on a private network without a key). The gauges read from the store (outbox
pending, the oldest pending age, escalations waiting) are refreshed on each read, from the
figures /health uses.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from a2a_handoff.client.client import AgentClient
from a2a_handoff.errors import StoreError
from a2a_handoff.observe import Observer
from a2a_handoff.protocol.models import parse_time
from a2a_handoff.protocol.states import TaskState
from a2a_handoff.server._authentication import Authentication
from a2a_handoff.server._tls_peer import peer_of
from a2a_handoff.stores.base import Store, TaskQuery


class MetricsRoute:
    """The /metrics route of one agent."""

    def __init__(
        self,
        observer: Observer,
        store: Store,
        client: AgentClient,
        streams: Callable[[], int],
        auth: Authentication | None,
        public: bool = False,
    ) -> None:
        self.observer = observer
        self.store = store
        self.client = client
        self.streams = streams
        self.auth = None if public else auth

    async def get(self, request: Request) -> Response:
        peer = peer_of(request.scope)
        if self.auth is not None and await self.auth.authenticate(request.headers, peer) is None:
            return JSONResponse(
                {"error": "/metrics needs an API key (or start the agent with --metrics-public)"},
                status_code=401,
                headers={"WWW-Authenticate": 'Bearer realm="a2a"'},
            )
        pending, oldest, waiting = 0, 0.0, None
        try:
            now = datetime.now(UTC)
            stats = await self.store.handoff_stats(now.strftime("%Y-%m-%dT%H:%M:%S.000Z"))
            pending = stats.pending
            if stats.oldest_pending:
                oldest = max(0.0, (now - parse_time(stats.oldest_pending)).total_seconds())
            query = TaskQuery(owner=None, state=TaskState.INPUT_REQUIRED, page_size=1)
            waiting = (await self.store.list_tasks(query)).total_size
        except StoreError:
            pass  # the store is down: /health says so; the counters are still worth reading
        breakers = {k: str(v["state"]) for k, v in self.client.breakers().items()}
        metrics = self.observer.metrics
        metrics.refresh(
            pending=pending,
            oldest_age=oldest,
            breakers=breakers,
            streams=self.streams(),
            waiting=waiting,
        )
        return Response(metrics.render(), media_type=metrics.content_type)
