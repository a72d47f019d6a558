"""`/livez` and `/readyz`, and the service's drain behind them, over ASGI: the probes need no
key and say a status word only; a drain turns `/readyz` 503 at once, takes work for its grace,
then refuses what would start a run (-32108, HTTP 503, `Retry-After`) while it serves reads and
the requests in flight, and ends the runs left at its bound (their callers answered)."""

from __future__ import annotations

import argparse
import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette

from a2a_handoff import (
    ApiKeyAuth,
    Completed,
    InputRequired,
    MemoryTaskStore,
    TaskContext,
    TrustConfig,
)
from a2a_handoff.errors import ConfigError
from a2a_handoff.server import AgentService, DrainConfig, create_app
from servers._flags import drain_config, drain_options
from servers.echo import echo_card

pytestmark = pytest.mark.anyio

BASE = "http://127.0.0.1:8000"
HEADERS = {"A2A-Version": "1.0"}


class Gated:
    """Asks when told to ask; otherwise works until told to finish."""

    resumes = True

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.finish = asyncio.Event()

    async def handle(self, ctx: TaskContext) -> Completed | InputRequired:
        if ctx.text == "ask":
            return InputRequired("what now?")
        self.started.set()
        await self.finish.wait()
        return Completed("done")


@asynccontextmanager
async def serving(app: Starlette) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=app)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=transport, base_url=BASE, timeout=10.0) as http,
    ):
        yield http


def send(text: str, configuration: dict[str, Any] | None = None, **fields: Any) -> dict[str, Any]:
    message = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": text}]}
    params: dict[str, Any] = {"message": {**message, **fields}}
    if configuration is not None:
        params["configuration"] = configuration
    return {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": params}


def gated_app(agent: Gated, drain: DrainConfig) -> tuple[Starlette, AgentService]:
    app = create_app(agent, echo_card(BASE + "/"), MemoryTaskStore(), drain=drain)
    service: AgentService = app.state.a2a
    return app, service


async def test_the_probes_need_no_key_and_tell_nothing_but_the_status() -> None:
    auth = ApiKeyAuth.from_keys({"alice": "k-alice"})
    app = create_app(
        Gated(), echo_card(BASE + "/"), MemoryTaskStore(), trust=TrustConfig(auth=auth)
    )
    async with serving(app) as http:
        live, ready = await http.get("/livez"), await http.get("/readyz")
        assert (live.status_code, live.json()) == (200, {"status": "alive"})
        assert (ready.status_code, ready.json()) == (200, {"status": "ready"})
        assert ready.headers["cache-control"] == "no-store"
        assert (await http.get("/health")).json() == {"status": "healthy"}  # details need a key


async def test_a_drain_refuses_new_work_after_its_grace_and_finishes_what_runs() -> None:
    agent = Gated()
    app, service = gated_app(agent, DrainConfig(seconds=30, grace=0.2))
    async with serving(app) as http:
        in_flight = asyncio.create_task(http.post("/", json=send("work"), headers=HEADERS))
        await agent.started.wait()
        asked = (await http.post("/", json=send("ask"), headers=HEADERS)).json()
        draining = asyncio.create_task(service.drain())
        await asyncio.sleep(0)  # the drain has begun
        ready = await http.get("/readyz")
        assert (ready.status_code, ready.json()) == (503, {"status": "draining"})
        assert (await http.get("/livez")).status_code == 200
        # Within the grace, work is still taken; after it, refused with nothing done.
        during = send("late", configuration={"returnImmediately": True})
        assert "error" not in (await http.post("/", json=during, headers=HEADERS)).json()
        await asyncio.sleep(0.25)
        for body in (send("new"), send("follow-up", taskId=asked["result"]["task"]["id"])):
            refused = await http.post("/", json=body, headers=HEADERS)
            assert refused.status_code == 503
            assert refused.headers["retry-after"] == "1"
            assert refused.json()["error"]["code"] == -32108
        rest = await http.post("/message:send", json=send("rest")["params"], headers=HEADERS)
        assert rest.status_code == 503
        assert rest.json()["error"]["details"][0]["reason"] == "DRAINING"
        # Reads are served; the running tasks finish, and the drain ends with them.
        task_id = asked["result"]["task"]["id"]
        get = {"jsonrpc": "2.0", "id": 2, "method": "GetTask", "params": {"id": task_id}}
        read = await http.post("/", json=get, headers=HEADERS)
        assert read.json()["result"]["id"] == task_id
        agent.finish.set()  # the work in flight, and the late one taken in the grace, end
        answer = (await in_flight).json()
        assert answer["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
        await asyncio.wait_for(draining, 5)  # not its 30 s bound: nothing left to wait for
        assert not service.manager.runs.by_task


async def test_a_run_past_the_bound_is_let_go_and_its_caller_answered() -> None:
    agent = Gated()
    app, service = gated_app(agent, DrainConfig(seconds=0.3, grace=0))
    async with serving(app) as http:
        in_flight = asyncio.create_task(http.post("/", json=send("work"), headers=HEADERS))
        await agent.started.wait()
        await service.drain()
        answer = (await in_flight).json()["result"]["task"]
        assert answer["status"]["state"] == "TASK_STATE_WORKING"  # it goes on elsewhere
        record = await service.store.get(answer["id"])
        assert record is not None
        assert record.task.status.state.name == "WORKING"  # left for a resume
        assert not service.manager.runs.by_task


def test_a_drain_config_is_checked_and_its_grace_bounded() -> None:
    assert DrainConfig().grace_seconds == 2.0
    assert DrainConfig(seconds=5).grace_seconds == 1.0
    assert DrainConfig(seconds=1, grace=3).grace_seconds == 1.0
    with pytest.raises(ConfigError, match="seconds"):
        DrainConfig(seconds=-1)
    with pytest.raises(ConfigError, match="grace"):
        DrainConfig(grace=float("nan"))
    assert DrainConfig().close == 10.0
    with pytest.raises(ConfigError, match="close"):
        DrainConfig(close=-1)


def test_the_stop_flags_default_to_the_drain_configs_own() -> None:
    parser = argparse.ArgumentParser()
    drain_options(parser)
    assert drain_config(parser.parse_args([])) == DrainConfig()
    given = drain_config(parser.parse_args(["--drain-seconds", "3", "--close-seconds", "2"]))
    assert (given.seconds, given.close) == (3.0, 2.0)
