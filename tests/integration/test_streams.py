"""Streams and durability against a real echo agent process (uvicorn on 127.0.0.1)."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import anyio
import httpx
import pytest

from tests.support import A2A_HEADERS, AgentProcess

pytestmark = pytest.mark.anyio


def send_params(text: str, **config: Any) -> dict[str, Any]:
    params: dict[str, Any] = {
        "message": {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": text}]}
    }
    if config:
        params["configuration"] = config
    return params


async def sse(
    http: httpx.AsyncClient,
    url: str,
    method: str,
    params: dict[str, Any],
    *,
    headers: dict[str, str] | None = None,
    limit: int | None = None,
) -> list[tuple[int | None, dict[str, Any]]]:
    """(id, JSON-RPC frame) pairs of one SSE response; stops early after `limit` frames."""
    body = {"jsonrpc": "2.0", "id": 7, "method": method, "params": params}
    frames: list[tuple[int | None, dict[str, Any]]] = []
    event_id: int | None = None
    async with http.stream(
        "POST", url, json=body, headers={**A2A_HEADERS, **(headers or {})}
    ) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        async for line in response.aiter_lines():
            if line.startswith("id:"):
                event_id = int(line[3:].strip())
            elif line.startswith("data:"):
                frames.append((event_id, json.loads(line[5:].strip())))
                event_id = None
                if limit is not None and len(frames) >= limit:
                    break
    return frames


def state_of(frame: dict[str, Any]) -> str | None:
    result = frame["result"]
    if "task" in result:
        return str(result["task"]["status"]["state"])
    if "statusUpdate" in result:
        return str(result["statusUpdate"]["status"]["state"])
    return None


async def start(agent: AgentProcess, text: str) -> str:
    async with httpx.AsyncClient(timeout=10) as http:
        reply = await http.post(
            agent.url,
            json={
                "jsonrpc": "2.0",
                "id": 1,
                "method": "SendMessage",
                "params": send_params(text, returnImmediately=True),
            },
            headers=A2A_HEADERS,
        )
    task_id: str = reply.json()["result"]["task"]["id"]
    return task_id


async def drop_and_resume(
    http: httpx.AsyncClient, url: str, task_id: str, *, first: int, away: float
) -> tuple[list[tuple[int | None, dict[str, Any]]], list[tuple[int | None, dict[str, Any]]], int]:
    """Subscribe, read `first` frames and drop the stream; `away` seconds later resume with
    Last-Event-ID. (head, rest, the last id seen before the drop)."""
    head = await sse(http, url, "SubscribeToTask", {"id": task_id}, limit=first)
    last_id = head[-1][0]
    assert last_id is not None
    await anyio.sleep(away)  # events happen while we are away
    headers = {"Last-Event-ID": str(last_id)}
    rest = await sse(http, url, "SubscribeToTask", {"id": task_id}, headers=headers)
    return head, rest, last_id


async def get_task(http: httpx.AsyncClient, url: str, task_id: str) -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": task_id}}
    task: dict[str, Any] = (await http.post(url, json=body, headers=A2A_HEADERS)).json()["result"]
    return task


async def test_streaming_send_replays_the_task_from_submission(echo_agent: AgentProcess) -> None:
    async with httpx.AsyncClient(timeout=30) as http:
        frames = await sse(http, echo_agent.url, "SendStreamingMessage", send_params("sleep:1"))
    ids = [i for i, _ in frames]
    assert ids == list(range(1, len(frames) + 1))
    assert "task" in frames[0][1]["result"]
    states = [state_of(f) for _, f in frames]
    assert states[0] == "TASK_STATE_SUBMITTED"
    assert "TASK_STATE_WORKING" in states
    assert states[-1] == "TASK_STATE_COMPLETED"
    assert any("artifactUpdate" in f["result"] for _, f in frames)
    assert all(f["id"] == 7 for _, f in frames)


async def test_stream_ends_when_the_task_asks_for_input(echo_agent: AgentProcess) -> None:
    async with httpx.AsyncClient(timeout=30) as http:
        frames = await sse(http, echo_agent.url, "SendStreamingMessage", send_params("ask: who?"))
    assert state_of(frames[-1][1]) == "TASK_STATE_INPUT_REQUIRED"


async def test_subscribers_see_every_event_in_the_same_order(echo_agent: AgentProcess) -> None:
    task_id = await start(echo_agent, "sleep:2")
    async with httpx.AsyncClient(timeout=30) as http:
        results: list[list[tuple[int | None, dict[str, Any]]]] = []

        async def subscribe() -> None:
            results.append(await sse(http, echo_agent.url, "SubscribeToTask", {"id": task_id}))

        async with anyio.create_task_group() as group:
            for _ in range(3):
                group.start_soon(subscribe)
    for frames in results:
        assert "task" in frames[0][1]["result"]  # the current Task comes first
        assert state_of(frames[-1][1]) == "TASK_STATE_COMPLETED"
    tails = [[(i, f["result"]) for i, f in r[1:]] for r in results]
    # Each subscriber started at its own snapshot; from the later start on they agree.
    start_seq = max(r[0][0] or 0 for r in results)
    common = [[e for e in tail if (e[0] or 0) > start_seq] for tail in tails]
    assert common[0] == common[1] == common[2]
    assert len(common[0]) >= 2


async def test_last_event_id_resumes_without_loss_or_repeat(echo_agent: AgentProcess) -> None:
    task_id = await start(echo_agent, "sleep:3")
    async with httpx.AsyncClient(timeout=30) as http:
        _, rest, last_id = await drop_and_resume(http, echo_agent.url, task_id, first=2, away=1.2)
        full = await get_task(http, echo_agent.url, task_id)
    resumed_ids = [i for i, _ in rest]
    assert resumed_ids == list(range(last_id + 1, last_id + 1 + len(rest)))
    assert "task" not in rest[0][1]["result"]  # a resume carries events only
    assert state_of(rest[-1][1]) == "TASK_STATE_COMPLETED"
    assert full["status"]["state"] == "TASK_STATE_COMPLETED"


async def test_subscribe_to_a_terminal_task_is_refused(echo_agent: AgentProcess) -> None:
    async with httpx.AsyncClient(timeout=30) as http:
        reply = await http.post(
            echo_agent.url,
            json={"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": send_params("x")},
            headers=A2A_HEADERS,
        )
        task_id = reply.json()["result"]["task"]["id"]
        refused = await http.post(
            echo_agent.url,
            json={
                "jsonrpc": "2.0",
                "id": 2,
                "method": "SubscribeToTask",
                "params": {"id": task_id},
            },
            headers=A2A_HEADERS,
        )
    assert refused.status_code == 200
    assert refused.json()["error"]["code"] == -32004


async def test_cancel_ends_an_open_stream(echo_agent: AgentProcess) -> None:
    task_id = await start(echo_agent, "sleep:30")
    async with httpx.AsyncClient(timeout=30) as http:
        frames: list[tuple[int | None, dict[str, Any]]] = []

        async def subscribe() -> None:
            frames.extend(await sse(http, echo_agent.url, "SubscribeToTask", {"id": task_id}))

        async with anyio.create_task_group() as group:
            group.start_soon(subscribe)
            await anyio.sleep(0.5)
            await http.post(
                echo_agent.url,
                json={"jsonrpc": "2.0", "id": 3, "method": "CancelTask", "params": {"id": task_id}},
                headers=A2A_HEADERS,
            )
    assert state_of(frames[-1][1]) == "TASK_STATE_CANCELED"


def test_kill_9_loses_nothing_committed(echo_agent: AgentProcess) -> None:
    done = echo_agent.rpc("SendMessage", send_params("remember me"))
    done_task = done["result"]["task"]  # type: ignore[index]
    running = echo_agent.rpc("SendMessage", send_params("sleep:30", returnImmediately=True))
    running_id = running["result"]["task"]["id"]  # type: ignore[index]
    time.sleep(0.3)
    echo_agent.kill()
    echo_agent.start()
    after = echo_agent.rpc("GetTask", {"id": done_task["id"]})
    assert after["result"] == done_task
    # The task cut mid-step resumes (echo says it may): WORKING again, not lost.
    orphan = echo_agent.rpc("GetTask", {"id": running_id})["result"]
    assert orphan["status"]["state"] == "TASK_STATE_WORKING"  # type: ignore[index]
    canceled = echo_agent.rpc("CancelTask", {"id": running_id})["result"]
    assert canceled["status"]["state"] == "TASK_STATE_CANCELED"  # type: ignore[index]


async def test_subscribe_stays_open_while_the_task_waits_for_input(
    echo_agent: AgentProcess,
) -> None:
    task_id = await start(echo_agent, "ask: who?")
    async with httpx.AsyncClient(timeout=30) as http:
        frames: list[tuple[int | None, dict[str, Any]]] = []
        closed = anyio.Event()

        async def subscribe() -> None:
            frames.extend(await sse(http, echo_agent.url, "SubscribeToTask", {"id": task_id}))
            closed.set()

        async with anyio.create_task_group() as group:
            group.start_soon(subscribe)
            await anyio.sleep(0.5)
            assert not closed.is_set()  # still open: the task waits for input, it has not ended
            answer = send_params("Ada")
            answer["message"]["taskId"] = task_id
            body = {"jsonrpc": "2.0", "id": 3, "method": "SendMessage", "params": answer}
            await http.post(echo_agent.url, json=body, headers=A2A_HEADERS)
    states = [state_of(f) for _, f in frames]
    assert states[0] == "TASK_STATE_INPUT_REQUIRED"
    assert states[-1] == "TASK_STATE_COMPLETED"
    assert "TASK_STATE_WORKING" in states


async def test_last_event_id_resume_gets_the_artifact_chunks_missed(
    echo_agent: AgentProcess,
) -> None:
    words = [f"w{i}" for i in range(8)]
    task_id = await start(echo_agent, "tokens: " + " ".join(words))
    async with httpx.AsyncClient(timeout=30) as http:
        head, rest, last_id = await drop_and_resume(
            http, echo_agent.url, task_id, first=3, away=0.3
        )
        stored = await get_task(http, echo_agent.url, task_id)
    frames = [f["result"] for _, f in head[1:] + rest]  # the head's Task snapshot aside
    snapshot = head[0][1]["result"]["task"]
    before = [p["text"] for a in snapshot.get("artifacts", []) for p in a["parts"]]
    chunks = [f["artifactUpdate"] for f in frames if "artifactUpdate" in f]
    assert [i for i, _ in rest] == list(range(last_id + 1, last_id + 1 + len(rest)))
    assert chunks[-1]["lastChunk"] is True
    assert len({c["artifact"]["artifactId"] for c in chunks}) == 1
    assert "".join(before) + "".join(c["artifact"]["parts"][0]["text"] for c in chunks) == (
        " ".join(words)
    )
    [artifact] = stored["artifacts"]
    assert [p["text"] for p in artifact["parts"]] == [" ".join(words)]


async def test_a_stream_resumed_after_its_task_ended_gets_what_it_missed(
    echo_agent: AgentProcess,
) -> None:
    words = [f"v{i}" for i in range(6)]
    task_id = await start(echo_agent, "tokens: " + " ".join(words))
    async with httpx.AsyncClient(timeout=30) as http:
        head = await sse(http, echo_agent.url, "SubscribeToTask", {"id": task_id}, limit=2)
        last_id = head[-1][0]
        assert last_id is not None
        with anyio.fail_after(30):  # away until the task has ended: no race with its pace
            for _ in range(600):
                task = await get_task(http, echo_agent.url, task_id)
                if task["status"]["state"] == "TASK_STATE_COMPLETED":
                    break
                await anyio.sleep(0.05)
        rest = await sse(
            http,
            echo_agent.url,
            "SubscribeToTask",
            {"id": task_id},
            headers={"Last-Event-ID": str(last_id)},
        )
        # Resumed at the end: nothing missed, nothing to wait for — the spec's error.
        body = {"jsonrpc": "2.0", "id": 1, "method": "SubscribeToTask", "params": {"id": task_id}}
        end = str(rest[-1][0])
        again = await http.post(
            echo_agent.url, json=body, headers={**A2A_HEADERS, "Last-Event-ID": end}
        )
        fresh = await http.post(echo_agent.url, json=body, headers=A2A_HEADERS)
    assert [i for i, _ in rest] == list(range(last_id + 1, last_id + 1 + len(rest)))
    assert state_of(rest[-1][1]) == "TASK_STATE_COMPLETED"
    snapshot = head[0][1]["result"]["task"]
    before = [p["text"] for a in snapshot.get("artifacts", []) for p in a["parts"]]
    chunks = [
        f["result"]["artifactUpdate"] for _, f in head[1:] + rest if "artifactUpdate" in f["result"]
    ]
    assert "".join(before) + "".join(c["artifact"]["parts"][0]["text"] for c in chunks) == (
        " ".join(words)
    )
    for answer in (again, fresh):
        assert answer.json()["error"]["code"] == -32004  # UnsupportedOperationError
