"""A new task's stream starts with the events its creation committed, as they were, without
reading back what was just written; the rest follows from the store as before."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from a2a_handoff import SqliteTaskStore, create_app
from a2a_handoff.stores.base import TaskEvent
from servers.echo import EchoAgent, echo_card

pytestmark = pytest.mark.anyio
URL = "http://agent.test/"


class CountingStore(SqliteTaskStore):
    """The SQLite store, counting the reads of a task's events."""

    reads = 0
    afters: list[int] = []  # where each read started

    async def events(self, task_id: str, after: int = 0) -> list[TaskEvent]:
        CountingStore.reads += 1
        CountingStore.afters.append(after)
        return await super().events(task_id, after)


async def stream(tmp_path: Path, text: str) -> list[dict[str, Any]]:
    """SendStreamingMessage `text` to an echo agent; the stream's events with their ids."""
    store = CountingStore(str(tmp_path / "echo.db"))
    app = create_app(EchoAgent(), echo_card(URL), store)
    message = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": text}]}
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendStreamingMessage",
        "params": {"message": message},
    }
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=URL) as http,
    ):
        answer = await http.post(URL, json=body, headers={"A2A-Version": "1.0"})
    events, seq = [], None
    for line in answer.text.splitlines():
        if line.startswith("id: "):
            seq = int(line[4:])
        elif line.startswith("data: "):
            events.append({"seq": seq, **json.loads(line[6:])["result"]})
    return events


async def test_a_task_done_at_once_is_streamed_without_reading_its_creation(
    tmp_path: Path,
) -> None:
    CountingStore.reads, CountingStore.afters = 0, []
    events = await stream(tmp_path, "hello")
    kinds = [next(k for k in e if k != "seq") for e in events]
    assert kinds == ["task", "statusUpdate", "artifactUpdate", "statusUpdate"]
    assert [e["seq"] for e in events] == [1, 2, 3, 4]  # the ids a resuming client sends back
    assert events[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
    # The creation (Task, WORKING) commits before the handler runs and is sent as it was;
    # what the handler did follows from the store (at most one read, after them).
    assert CountingStore.reads <= 1
    assert all(after >= 2 for after in CountingStore.afters)


async def test_later_events_still_follow_from_the_store(tmp_path: Path) -> None:
    CountingStore.reads = 0
    events = await stream(tmp_path, "sleep:0.2")
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert events[0]["task"]["status"]["state"] in ("TASK_STATE_SUBMITTED", "TASK_STATE_WORKING")
    assert events[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert CountingStore.reads >= 1  # what came after the creation was read as before
