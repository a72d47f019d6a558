"""/health: store reachability, stale pending handoffs, breakers."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import pytest

from a2a_handoff import MemoryTaskStore, create_app
from servers.triage import TriageAgent, triage_card
from tests.support import free_port

pytestmark = pytest.mark.anyio
URL = "http://triage.test/"


@pytest.fixture
async def triage_to_nowhere() -> AsyncIterator[httpx.AsyncClient]:
    """Triage whose billing route points at a closed port on 127.0.0.1."""
    dead = f"http://127.0.0.1:{free_port()}/"
    app = create_app(
        TriageAgent(),
        triage_card(URL),
        MemoryTaskStore(),
        routes={"billing": dead},
        stale_after=0.5,
        recovery_interval=0.2,
    )
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=URL) as http,
    ):
        yield http


async def test_a_handoff_pending_too_long_makes_health_degraded(
    triage_to_nowhere: httpx.AsyncClient,
) -> None:
    http = triage_to_nowhere
    assert (await http.get("/health")).status_code == 200
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendMessage",
        "params": {
            "message": {
                "messageId": "m-1",
                "role": "ROLE_USER",
                "parts": [{"text": "refund for order 12345"}],
            },
            "configuration": {"returnImmediately": True},
        },
    }
    await http.post("/", json=body, headers={"A2A-Version": "1.0"})
    for _ in range(100):  # the pending entry ages, the retries open the breaker
        await asyncio.sleep(0.1)
        response = await http.get("/health")
        report = response.json()
        states = [b["state"] for b in report["breakers"].values()]
        if report["stalePendingHandoffs"] and states and states[0] != "closed":
            break
    assert response.status_code == 503
    assert report["status"] == "degraded"
    assert report["store"] == "ok"
    assert report["stalePendingHandoffs"] == 1
    assert report["lastCompletedHandoff"] is None
    (breaker,) = report["breakers"].values()
    assert breaker["state"] in ("open", "half_open"), report
    assert breaker["consecutiveFailures"] >= 5
