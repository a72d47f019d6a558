"""`DrainingServer`: told to stop, it drains first and serves meanwhile; the drain over, it
stops; a second signal cuts the drain short. (Real processes: tests/integration/test_drain.py.)"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Awaitable, Callable

import httpx
import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from a2a_handoff.server import DrainingServer
from tests.support import free_port

pytestmark = pytest.mark.anyio


async def hello(request: object) -> PlainTextResponse:
    return PlainTextResponse("hello")


async def started(
    drain: Callable[[], Awaitable[None]],
) -> tuple[DrainingServer, asyncio.Task[None]]:
    app = Starlette(routes=[Route("/", hello)])
    config = uvicorn.Config(app, host="127.0.0.1", port=free_port(), log_level="warning")
    server = DrainingServer(config, drain)
    serving = asyncio.create_task(server.serve())
    while not server.started:
        assert not serving.done(), serving
        await asyncio.sleep(0.01)
    return server, serving


async def test_it_serves_while_it_drains_and_stops_once_drained() -> None:
    began, finish = asyncio.Event(), asyncio.Event()

    async def drain() -> None:
        began.set()
        await finish.wait()

    server, serving = await started(drain)
    server.handle_exit(signal.SIGTERM, None)
    await began.wait()
    url = f"http://127.0.0.1:{server.config.port}/"
    async with httpx.AsyncClient() as http:
        assert (await http.get(url)).text == "hello"  # still serving, still listening
    assert not server.should_exit
    finish.set()
    await asyncio.wait_for(serving, 10)
    assert server.should_exit


async def test_a_second_signal_cuts_the_drain_short() -> None:
    began, cut = asyncio.Event(), asyncio.Event()

    async def drain() -> None:
        began.set()
        try:
            await asyncio.Event().wait()  # never over by itself
        except asyncio.CancelledError:
            cut.set()
            raise

    server, serving = await started(drain)
    server.handle_exit(signal.SIGTERM, None)
    await began.wait()
    server.handle_exit(signal.SIGINT, None)
    await asyncio.wait_for(serving, 10)
    assert cut.is_set()
