"""The probes and the drain, on real agent processes: `/livez` and `/readyz` (503 while the
store is down, or once draining); SIGTERM turns `/readyz` 503 at once, the requests in flight
are answered, new work is refused with the retryable -32108 (HTTP 503, `Retry-After`), the
running tasks finish — or, past `--drain-seconds`, are handed over to another replica, which
resumes them at once rather than after a lease's lapse — and the process exits 0."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import subprocess
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import anyio
import httpx
import pytest

from a2a_handoff.protocol.extension import HANDOFF_EXTENSION_URI as URI
from tests.integration.test_resume import frames_until
from tests.integration.test_streams import send_params
from tests.postgres_support import PostgresDatabase
from tests.redis_support import RedisServer
from tests.support import A2A_HEADERS, AgentProcess, wire_trust

pytestmark = pytest.mark.anyio
T = TypeVar("T")


async def rpc(
    http: httpx.AsyncClient, agent: AgentProcess, method: str, params: dict[str, Any]
) -> httpx.Response:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    return await http.post(agent.url, json=body, headers=A2A_HEADERS)


async def until(check: Callable[[], Awaitable[T | None]], within: float = 15.0) -> T:
    """Poll `check()` until it gives something truthy (a refused connection counts as not)."""
    deadline = time.monotonic() + within
    last: object = None
    while time.monotonic() < deadline:
        try:
            last = await check()
        except httpx.TransportError as exc:
            last = exc
        else:
            if last:
                return last  # type: ignore[return-value]
        await anyio.sleep(0.05)
    raise AssertionError(f"condition not met in {within} s; last value: {last!r}")


async def readyz(http: httpx.AsyncClient, agent: AgentProcess) -> int:
    return (await http.get(agent.url + "readyz")).status_code


async def exit_code(agent: AgentProcess, within: float = 20.0) -> int:
    """The agent's exit code; with its log when it has not exited `within` seconds."""
    assert agent.proc is not None
    proc = agent.proc
    try:
        return await anyio.to_thread.run_sync(lambda: proc.wait(within))
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGABRT)  # its threads' stacks to its log (PYTHONFAULTHANDLER)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(5)
        log = agent.log_path.read_text() if agent.log_path and agent.log_path.exists() else ""
        raise AssertionError(f"{agent.url} still runs {within} s after SIGTERM:\n{log}") from None


async def state_of(http: httpx.AsyncClient, agent: AgentProcess, task_id: str) -> str:
    task = (await rpc(http, agent, "GetTask", {"id": task_id})).json()["result"]
    return str(task["status"]["state"])


def slept(frame: dict[str, Any]) -> bool:
    """A status update saying the echo agent slept a second of its task."""
    update = frame["result"].get("statusUpdate") or {}
    parts = (update.get("status", {}).get("message") or {}).get("parts") or [{}]
    return str(parts[0].get("text", "")).startswith("slept 1 of")


def completed(frame: dict[str, Any]) -> bool:
    update = frame["result"].get("statusUpdate") or {}
    return bool(update.get("status", {}).get("state") == "TASK_STATE_COMPLETED")


def resumed(frame: dict[str, Any]) -> bool:
    update = frame["result"].get("statusUpdate") or {}
    return bool((update.get("metadata") or {}).get(URI, {}).get("resumed"))


async def test_the_probes_answer_without_keys_and_follow_the_store(tmp_path: Path) -> None:
    redis = RedisServer(tmp_path / "redis").start()
    keys = tmp_path / "keys"
    keys.write_text("alice=k-alice\n")
    agent = AgentProcess("echo", redis.store_url(), extra=("--auth-keys", str(keys)))
    agent.log_path = tmp_path / "echo.log"
    try:
        agent.start()
        async with httpx.AsyncClient(timeout=10) as http:
            live = await http.get(agent.url + "livez")
            ready = await http.get(agent.url + "readyz")
            assert (live.status_code, live.json()) == (200, {"status": "alive"})
            assert (ready.status_code, ready.json()) == (200, {"status": "ready"})
            redis.stop()  # the store goes away: not ready, but alive (no restart would help)

            async def unready() -> httpx.Response | None:
                answer = await http.get(agent.url + "readyz")
                return answer if answer.status_code == 503 else None

            down = await until(unready)
            assert down.json() == {"status": "unavailable"}  # nothing more: no details
            assert (await http.get(agent.url + "livez")).status_code == 200
            redis.start()  # back: ready again

            async def ready_again() -> bool:
                return await readyz(http, agent) == 200

            await until(ready_again)
    finally:
        agent.stop()
        redis.stop()


async def test_the_gateway_serves_the_probes(tmp_path: Path) -> None:
    echo = AgentProcess("echo", f"sqlite:///{tmp_path / 'echo.db'}")
    gateway = AgentProcess(
        "serve",
        f"sqlite:///{tmp_path / 'gateway.db'}",
        extra=("--entry", echo.url, "--drain-seconds", "1"),
        module="orchestrator",
    )
    try:
        echo.start()
        gateway.start()
        async with httpx.AsyncClient(timeout=10) as http:
            assert (await http.get(gateway.url + "livez")).json() == {"status": "alive"}
            assert (await http.get(gateway.url + "readyz")).json() == {"status": "ready"}
            assert gateway.proc is not None
            gateway.proc.send_signal(signal.SIGTERM)

            async def draining() -> bool:
                return await readyz(http, gateway) == 503

            await until(draining, within=2)
        assert await exit_code(gateway) == 0
    finally:
        gateway.stop()
        echo.stop()


@pytest.mark.timeout(60)
async def test_a_drained_agent_answers_what_is_in_flight_refuses_new_work_and_exits_0(
    tmp_path: Path,
) -> None:
    agent = AgentProcess(
        "echo", f"sqlite:///{tmp_path / 'echo.db'}", extra=("--drain-seconds", "8")
    )
    agent.log_path = tmp_path / "echo.log"
    agent.start()
    try:
        async with httpx.AsyncClient(timeout=30) as http:
            running = await rpc(
                http, agent, "SendMessage", send_params("sleep:3", returnImmediately=True)
            )
            running_id = running.json()["result"]["task"]["id"]
            in_flight = asyncio.create_task(rpc(http, agent, "SendMessage", send_params("sleep:2")))

            async def working() -> bool:
                return await state_of(http, agent, running_id) == "TASK_STATE_WORKING"

            await until(working)
            ended = asyncio.create_task(frames_until(http, agent.url, running_id, completed))
            assert agent.proc is not None
            agent.proc.send_signal(signal.SIGTERM)

            async def draining() -> bool:
                return await readyz(http, agent) == 503

            await until(draining, within=1)  # at once, well before the grace ends

            async def refused() -> httpx.Response | None:
                answer = await rpc(http, agent, "SendMessage", send_params("hello"))
                return answer if "error" in answer.json() else None

            refusal = await until(refused, within=5)
            assert refusal.status_code == 503
            assert refusal.headers["retry-after"] == "1"
            error = refusal.json()["error"]
            assert error["code"] == -32108
            assert error["data"][0]["reason"] == "DRAINING"
            # The requests in flight are answered: the blocking one with its completed task,
            # the stream of the running task up to its end.
            answer = (await in_flight).json()
            assert answer["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
            await ended
        assert await exit_code(agent) == 0
    finally:
        agent.stop()


@pytest.fixture(params=["redis", "postgres"])
def shared_store(request: pytest.FixtureRequest) -> str:
    server: RedisServer | PostgresDatabase = request.getfixturevalue(
        "redis_server" if request.param == "redis" else "postgres_database"
    )
    return server.store_url()


@pytest.mark.timeout(90)
async def test_a_task_past_the_drain_is_handed_over_and_resumed_at_once(
    shared_store: str, tmp_path: Path
) -> None:
    # The survivor's heartbeat is slow: it sweeps every 5 s, a runner lease lapses 15 s
    # after its replica stopped renewing it, and a task changed within 30 s is taken for one
    # whose runner may be starting. So a resume within 12 s of the hand-over can only be the
    # hand-over's (at the survivor's next sweep), never a lapse's, however loaded the machine.
    # The draining replica sweeps often and lingers (a stream open to it): it must leave the
    # task it handed over to the others, not take it back.
    draining = AgentProcess(
        "echo", shared_store, extra=("--drain-seconds", "1.5", "--recovery-interval", "0.3")
    )
    survivor = AgentProcess("echo", shared_store, extra=("--recovery-interval", "10"))
    for i, agent in enumerate((draining, survivor)):
        agent.log_path = tmp_path / f"echo-{i}.log"
    wire_trust([draining, survivor])
    draining.start()
    survivor.start()
    try:
        async with httpx.AsyncClient(timeout=30) as http:
            sleep = send_params("sleep:4")
            started = await rpc(
                http,
                draining,
                "SendMessage",
                {**sleep, "configuration": {"returnImmediately": True}},
            )
            task_id = started.json()["result"]["task"]["id"]
            # The same message again, blocking: a request waiting for that task's outcome.
            in_flight = asyncio.create_task(rpc(http, draining, "SendMessage", sleep))
            await frames_until(http, survivor.url, task_id, slept)  # it runs, on `draining`
            follow = asyncio.create_task(frames_until(http, survivor.url, task_id, resumed))
            lingering = asyncio.create_task(frames_until(http, draining.url, task_id, completed))
            when: dict[str, float] = {}
            in_flight.add_done_callback(lambda _: when.setdefault("handed over", time.monotonic()))
            follow.add_done_callback(lambda _: when.setdefault("resumed", time.monotonic()))
            assert draining.proc is not None
            draining.proc.send_signal(signal.SIGTERM)
            assert await exit_code(draining) == 0
            await follow
            # The request in flight was answered at the hand-over: the task, still running.
            answer = (await in_flight).json()
            assert answer["result"]["task"]["id"] == task_id
            assert answer["result"]["task"]["status"]["state"] == "TASK_STATE_WORKING"
            # Resumed at the survivor's next sweep: not the 30 s or more of a lapse.
            assert when["resumed"] - when["handed over"] < 12, when
            with contextlib.suppress(httpx.HTTPError, AssertionError):
                await lingering  # cut when the draining replica stopped, or ended with it

            async def done() -> bool:
                return await state_of(http, survivor, task_id) == "TASK_STATE_COMPLETED"

            await until(done)
            task = (await rpc(http, survivor, "GetTask", {"id": task_id})).json()["result"]
            assert [p["text"] for a in task["artifacts"] for p in a["parts"]] == ["slept 4 s"]
        # The survivor resumed it; the draining replica never took it back.
        resumed_here = f"task {task_id} resumed"
        assert resumed_here in (tmp_path / "echo-1.log").read_text()
        assert resumed_here not in (tmp_path / "echo-0.log").read_text()
    finally:
        draining.stop()
        survivor.stop()


@pytest.mark.timeout(40)
async def test_a_close_that_hangs_ends_in_an_error_line_and_exit_0_within_its_bound(
    tmp_path: Path,
) -> None:
    # The service's close waits forever (a store that stopped answering): the process still
    # exits, 0, once the connections' grace (5 s) and --close-seconds have passed.
    paused = tmp_path / "paused"
    agent = AgentProcess(
        "echo",
        f"sqlite:///{tmp_path / 'echo.db'}",
        extra=("--drain-seconds", "0.2", "--close-seconds", "1"),
        env={"A2A_HANDOFF_PAUSE": "service.before_close", "A2A_HANDOFF_PAUSE_FILE": str(paused)},
    )
    agent.log_path = tmp_path / "echo.log"
    agent.start()
    try:
        assert agent.proc is not None
        signalled = time.monotonic()
        agent.proc.send_signal(signal.SIGTERM)
        assert await exit_code(agent, within=20) == 0
        took = time.monotonic() - signalled
        assert paused.read_text() == "service.before_close\n"  # the close did hang
        # Not before the bound (5 + 1 s once the drain is over), nor long after it.
        assert 6 <= took < 15, took
        log = agent.log_path.read_text()
        said = [line for line in log.splitlines() if "closing did not end" in line]
        assert len(said) == 1, log
        assert " ERROR " in said[0], said
        assert said[0].endswith("closing did not end within 6s: stopping now"), said
    finally:
        agent.stop()
