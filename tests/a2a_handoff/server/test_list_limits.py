"""ListTasks: one caller's concurrent list queries are bounded, and never another caller's."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from a2a_handoff import ApiKeyAuth, MemoryTaskStore, TrustConfig, create_app
from a2a_handoff.server._operations import LIST_QUERIES_PER_CALLER
from a2a_handoff.stores.base import TaskPage, TaskQuery
from servers.echo import EchoAgent, echo_card

pytestmark = pytest.mark.anyio
URL = "http://agent.test/"
ALICE = {"X-API-Key": "k-alice", "A2A-Version": "1.0"}
BOB = {"X-API-Key": "k-bob", "A2A-Version": "1.0"}


class SlowListStore(MemoryTaskStore):
    """A store whose list queries wait until the test lets them answer (a slow query)."""

    def __init__(self) -> None:
        super().__init__()
        self.release = asyncio.Event()
        self.waiting = 0
        self.arrived = asyncio.Condition()

    async def held(self, count: int) -> None:
        """Until `count` caller queries are waiting."""
        async with self.arrived:
            await asyncio.wait_for(self.arrived.wait_for(lambda: self.waiting >= count), 5)

    async def list_tasks(self, query: TaskQuery) -> TaskPage:
        if query.owner is not None:  # a caller's, not the library's own sweeps
            async with self.arrived:
                self.waiting += 1
                self.arrived.notify_all()
            await self.release.wait()
        return await super().list_tasks(query)


async def test_a_caller_gets_a_few_list_queries_at_once_and_others_theirs() -> None:
    store = SlowListStore()
    auth = ApiKeyAuth.from_keys({"alice": "k-alice", "bob": "k-bob"})
    app = create_app(EchoAgent(), echo_card(URL), store, trust=TrustConfig(auth=auth))
    body = {"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}}
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=URL) as http,
    ):

        async def listing(headers: dict[str, str]) -> dict[str, Any]:
            answer: dict[str, Any] = (await http.post(URL, json=body, headers=headers)).json()
            return answer

        held = [asyncio.create_task(listing(ALICE)) for _ in range(LIST_QUERIES_PER_CALLER)]
        await store.held(LIST_QUERIES_PER_CALLER)
        refused = await asyncio.wait_for(listing(ALICE), 5)  # one more: answered at once
        assert refused["error"]["code"] == -32603
        assert "too many concurrent list queries" in refused["error"]["message"]
        # Naming another tenant buys alice no more: the slots are the caller's in every one.
        elsewhere = {**body, "params": {"tenant": "acme"}}
        answer = (await asyncio.wait_for(http.post(URL, json=elsewhere, headers=ALICE), 5)).json()
        assert answer["error"]["code"] == -32603
        bobs = asyncio.create_task(listing(BOB))  # bob's own are his: served
        await store.held(LIST_QUERIES_PER_CALLER + 1)
        store.release.set()
        assert "result" in await bobs
        assert all("result" in answer for answer in await asyncio.gather(*held))
        assert "result" in await listing(ALICE)  # the slots came back
