"""Several replicas of one agent on one shared store (Redis, PostgreSQL): any replica answers
for any task."""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from a2a_handoff.failpoints import ENV_VAR, EXIT_CODE
from tests.integration.handoff_support import REFUND, ext, message, result, tasks_in, wait_for
from tests.integration.test_streams import sse, start, state_of
from tests.postgres_support import PostgresDatabase
from tests.redis_support import RedisServer
from tests.support import AgentProcess, Cli, wire_trust

pytestmark = pytest.mark.anyio
FAST = ("--recovery-interval", "0.3")


def replicas(name: str, store: str, tmp: Path, count: int = 2, *extra: str) -> list[AgentProcess]:
    agents = []
    for i in range(count):
        agent = AgentProcess(name, store, extra=(*FAST, *extra))
        agent.log_path = tmp / f"{name}-{i}.log"
        agents.append(agent)
    return agents


@contextlib.contextmanager
def running(*agents: AgentProcess) -> Iterator[None]:
    wire_trust(agents)
    try:
        for agent in agents:
            agent.start()
        yield
    finally:
        for agent in agents:
            agent.stop()


def address(agents: list[AgentProcess]) -> str:
    """One agent, several replicas: the comma-separated address clients accept."""
    return ",".join(agent.url for agent in agents)


@pytest.fixture(scope="module", params=["redis", "postgres"])
def shared(request: pytest.FixtureRequest) -> RedisServer | PostgresDatabase:
    """The shared store the module's tests run on: a Redis, then a PostgreSQL database
    (`store_url()`: a fresh key prefix or schema, an empty store, each time)."""
    server: RedisServer | PostgresDatabase = request.getfixturevalue(
        "redis_server" if request.param == "redis" else "postgres_database"
    )
    return server


@pytest.fixture(scope="module")
def echo_pair(
    shared: RedisServer | PostgresDatabase, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[AgentProcess, AgentProcess]]:
    """Two echo replicas on one shared store, shared by the tests of this module that leave
    them as they found them."""
    a, b = replicas("echo", shared.store_url(), tmp_path_factory.mktemp("echo"))
    with running(a, b):
        yield a, b


async def test_a_task_is_read_followed_cancelled_and_continued_on_another_replica(
    echo_pair: tuple[AgentProcess, AgentProcess],
) -> None:
    a, b = echo_pair
    # Created on A, read on B.
    asked = result(a.rpc("SendMessage", message("ask: your name?")))["task"]
    seen = result(b.rpc("GetTask", {"id": asked["id"]}))
    assert seen["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    # Continued on B: the follow-up resumes the task A created.
    follow_up = message("Ada")
    follow_up["message"]["taskId"] = asked["id"]
    done = result(b.rpc("SendMessage", follow_up))["task"]
    assert done["id"] == asked["id"]
    assert done["status"]["state"] == "TASK_STATE_COMPLETED"
    assert result(a.rpc("GetTask", {"id": asked["id"]}))["artifacts"][0]["parts"] == [
        {"text": "Ada"}
    ]
    # Running on A, cancelled on B: it ends CANCELED, for both.
    slow = await start(a, "sleep:30")
    canceled = result(b.rpc("CancelTask", {"id": slow}))
    assert canceled["status"]["state"] == "TASK_STATE_CANCELED"
    wait_for(
        lambda: result(a.rpc("GetTask", {"id": slow}))["status"]["state"] == "TASK_STATE_CANCELED"
    )
    # One message id, sent to both replicas: one task.
    again = message("hello")
    first = result(a.rpc("SendMessage", again))["task"]
    second = result(b.rpc("SendMessage", again))["task"]
    assert first["id"] == second["id"]


async def test_a_stream_on_one_replica_gets_the_other_replicas_events_in_order(
    echo_pair: tuple[AgentProcess, AgentProcess],
) -> None:
    a, b = echo_pair
    task_id = await start(a, "sleep:2")
    async with httpx.AsyncClient(timeout=20) as http:
        # Two events from B, then the rest from A after B's last Last-Event-ID.
        head = await sse(http, b.url, "SubscribeToTask", {"id": task_id}, limit=2)
        last = head[-1][0]
        assert last is not None
        rest = await sse(
            http,
            a.url,
            "SubscribeToTask",
            {"id": task_id},
            headers={"Last-Event-ID": str(last)},
        )
    frames = head + rest
    seqs = [seq for seq, _ in frames]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))  # no gap, no repeat
    assert state_of(frames[-1][1]) == "TASK_STATE_COMPLETED"
    updates = [f["result"]["statusUpdate"] for _, f in frames if "statusUpdate" in f["result"]]
    texts = [
        u["status"]["message"]["parts"][0]["text"] for u in updates if "message" in u["status"]
    ]
    assert texts[-2:] == ["slept 1 of 2 s", "slept 2 of 2 s"]


async def test_concurrent_follow_ups_on_two_replicas_get_one_in_and_the_others_busy(
    echo_pair: tuple[AgentProcess, AgentProcess],
) -> None:
    a, b = echo_pair
    busy = 0
    async with httpx.AsyncClient(timeout=20) as http:

        async def send(agent: AgentProcess, params: dict[str, Any]) -> dict[str, Any]:
            body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": params}
            reply = await http.post(agent.url, json=body, headers={"A2A-Version": "1.0"})
            answer: dict[str, Any] = reply.json()
            return answer

        for _ in range(12):
            asked = result(await send(a, message("ask: your name?")))["task"]
            follow_ups = [message(f"name {i}") for i in range(4)]
            for params in follow_ups:
                params["message"]["taskId"] = asked["id"]
            replies = await asyncio.gather(
                *(send((a, b)[i % 2], params) for i, params in enumerate(follow_ups))
            )
            task = result(a.rpc("GetTask", {"id": asked["id"]}))
            users = [m["parts"][0]["text"] for m in task["history"] if m["role"] == "ROLE_USER"]
            accepted = [
                params["message"]["parts"][0]["text"]
                for params, reply in zip(follow_ups, replies, strict=True)
                if "result" in reply
            ]
            # Exactly one got in; it is the one in the history (and the one echoed back).
            assert len(accepted) == 1, replies
            assert users == ["ask: your name?", *accepted]
            assert task["artifacts"][0]["parts"] == [{"text": accepted[0]}]
            for reply in replies:
                if "error" in reply:  # busy while it was taken, or already completed by it
                    assert reply["error"]["code"] in (-32104, -32004), reply
                    busy += reply["error"]["code"] == -32104
    assert busy > 0  # the follow-ups did race


def test_a_replica_killed_mid_handoff_leaves_it_to_the_other(
    shared: RedisServer | PostgresDatabase, tmp_path: Path
) -> None:
    (billing,) = replicas("billing", shared.store_url(), tmp_path, 1)
    store = shared.store_url()
    first, second = replicas("triage", store, tmp_path, 2, f"--route=billing={billing.url}")
    first.env = {ENV_VAR: "handoff.after_checkpoint"}
    with running(billing, first, second):
        ctx = f"ctx-{uuid.uuid4()}"
        with contextlib.suppress(httpx.TransportError):  # it dies mid-request: the point
            first.rpc("SendMessage", message(REFUND, ctx))
        assert first.proc is not None
        assert first.proc.wait(20) == EXIT_CODE

        # The survivor takes the pending handoff over once the dead one's lease runs out.
        def transferred() -> dict[str, object] | None:
            tasks = tasks_in(second, ctx)
            return tasks[0] if tasks and ext(tasks[0]).get("state") == "TRANSFERRED" else None

        source = wait_for(transferred, timeout=20)
        successors = tasks_in(billing, ctx)
        assert [t["id"] for t in successors] == [ext(source)["transfer"]["taskId"]]
        handoffs = result(second.rpc("ListHandoffs", {"contextId": ctx}))["sent"]
        assert [h["status"] for h in handoffs] == ["done"]


def test_the_orchestrator_fails_over_between_replicas_mid_conversation(
    shared: RedisServer | PostgresDatabase, tmp_path: Path
) -> None:
    billing = replicas("billing", shared.store_url(), tmp_path)
    triage = replicas(
        "triage", shared.store_url(), tmp_path, 2, f"--route=billing={address(billing)}"
    )
    cli = Cli(tmp_path / "session.json")
    with running(*billing, *triage):
        code, events = cli.events("send", "--entry", address(triage), "I want a refund")
        assert code == 2, events
        assert events[-1]["event"] == "input_required"
        # The replica that answered dies; the next message goes to the other.
        billing[0].kill()
        code, events = cli.events("send", "order 12345")
        assert code == 0, events
        assert events[-1]["event"] == "completed"
        refund = next(e for e in events if e["event"] == "artifact")["parts"][0]["data"]
        assert refund["orderId"] == "12345"
        # Exactly one billing task took the whole conversation: nothing was done twice.
        session_chain = [h for h in cli_chain(cli) if h["agent_name"] == "billing"]
        assert len({h["task_id"] for h in session_chain}) == 1


def cli_chain(cli: Cli) -> list[dict[str, str]]:
    chain: list[dict[str, str]] = json.loads(cli.session.read_text())["chain"]
    return chain
