"""A rolling restart under load: three replicas of an agent on one shared store (PostgreSQL,
Redis) behind a load balancer that follows `/readyz` (`tests.integration.balancer`), each
stopped with SIGTERM, waited for and started again in turn while clients keep sending: no
client request fails, every replica exits 0, and every task acknowledged ends COMPLETED."""

from __future__ import annotations

import asyncio
import functools
import signal
import subprocess
import uuid
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from tests.integration.balancer import Balancer
from tests.postgres_support import PostgresDatabase
from tests.redis_support import RedisServer
from tests.support import A2A_HEADERS, AgentProcess, wire_trust

pytestmark = pytest.mark.anyio
CLIENTS = 4
AT_LEAST = 5  # messages each client sends, however quick the roll
STARTS_WITHIN = 60.0  # a few seconds on a quiet machine; a loaded one may take many more


@pytest.fixture(params=["postgres", "redis"])
def shared_store(request: pytest.FixtureRequest) -> str:
    server: RedisServer | PostgresDatabase = request.getfixturevalue(
        "redis_server" if request.param == "redis" else "postgres_database"
    )
    return server.store_url()


async def client(http: httpx.AsyncClient, url: str, rolled: anyio.Event) -> list[Any]:
    """Blocking SendMessages until the roll is over (and at least AT_LEAST): each answer."""
    answers: list[Any] = []
    while not rolled.is_set() or len(answers) < AT_LEAST:
        params = {
            "message": {
                "messageId": str(uuid.uuid4()),
                "role": "ROLE_USER",
                "parts": [{"text": "sleep:0.3"}],
            }
        }
        body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": params}
        try:
            reply = await http.post(url, json=body, headers=A2A_HEADERS)
            answers.append((reply.status_code, reply.json()))
        except (httpx.HTTPError, ValueError) as exc:
            answers.append(exc)
    return answers


async def restart(agent: AgentProcess) -> int:
    """SIGTERM, its exit waited for, started again on its port: its exit code."""
    assert agent.proc is not None
    proc = agent.proc
    proc.send_signal(signal.SIGTERM)
    try:
        code = await anyio.to_thread.run_sync(lambda: proc.wait(30))
    except subprocess.TimeoutExpired:
        raise AssertionError(f"{agent.url} did not exit{agent._log_tail(60)}") from None
    await anyio.to_thread.run_sync(functools.partial(agent.start, STARTS_WITHIN))
    return code


@pytest.mark.timeout(240)  # about 25 s on a quiet machine
async def test_a_rolling_restart_under_load_fails_nothing(
    shared_store: str, tmp_path: Path
) -> None:
    replicas = [
        AgentProcess("echo", shared_store, extra=("--drain-seconds", "5")) for _ in range(3)
    ]
    for i, agent in enumerate(replicas):
        agent.log_path = tmp_path / f"echo-{i}.log"
    wire_trust(replicas)
    try:
        for agent in replicas:
            await anyio.to_thread.run_sync(functools.partial(agent.start, STARTS_WITHIN))
        balancer = Balancer([agent.url for agent in replicas])
        async with balancer.running(), httpx.AsyncClient(timeout=60) as http:
            await balancer.until_ready(*balancer.replicas)
            rolled = anyio.Event()
            load = [asyncio.create_task(client(http, balancer.url, rolled)) for _ in range(CLIENTS)]
            codes = []
            for agent in replicas:
                codes.append(await restart(agent))
                await balancer.until_ready(agent.url)  # back in the pool before the next
            rolled.set()
            answers = [answer for done in await asyncio.gather(*load) for answer in done]
            assert codes == [0, 0, 0]
            failed = [a for a in answers if not isinstance(a, tuple) or "result" not in a[1]]
            assert not failed, failed
            ids = [reply["result"]["task"]["id"] for _, reply in answers]
            assert len(set(ids)) == len(answers) >= CLIENTS * AT_LEAST
            # Every task acknowledged ended COMPLETED (its blocking answer said so; the
            # store, read through any replica, says so too).
            states = [a[1]["result"]["task"]["status"]["state"] for a in answers]
            assert set(states) == {"TASK_STATE_COMPLETED"}
            for task_id in ids:
                body = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": task_id}}
                reply = (await http.post(balancer.url, json=body, headers=A2A_HEADERS)).json()
                assert reply["result"]["status"]["state"] == "TASK_STATE_COMPLETED", reply
    finally:
        for agent in replicas:
            agent.stop()
