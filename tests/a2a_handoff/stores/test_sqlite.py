"""What only the SQLite store does: its file layout, its migration, where its reads run."""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from a2a_handoff import TrustConfig, create_app
from a2a_handoff.errors import StoreError, StoreVersionError
from a2a_handoff.protocol.models import StreamResponse, Task
from a2a_handoff.protocol.states import TaskState
from a2a_handoff.server._streams import task_stream
from a2a_handoff.stores import SqliteTaskStore
from a2a_handoff.stores.base import TaskEvent, TaskQuery, TaskRecord
from a2a_handoff.stores.conformance.samples import advance, create
from a2a_handoff.trust.keys import KeyFile
from servers.echo import EchoAgent, echo_card

pytestmark = pytest.mark.anyio

# The layout before indexes ascended and events left WITHOUT ROWID.
EARLIER_LAYOUT = """
DROP INDEX tasks_by_owner;
DROP INDEX tasks_by_context;
DROP INDEX tasks_by_delegate;
CREATE INDEX tasks_by_owner ON tasks (owner, updated_at DESC, id DESC);
CREATE INDEX tasks_by_context ON tasks (owner, context_id, updated_at DESC, id DESC);
CREATE INDEX tasks_by_delegate ON tasks (delegate, updated_at DESC, id DESC)
    WHERE delegate != '';
ALTER TABLE task_events RENAME TO task_events_new;
CREATE TABLE task_events (
    task_id TEXT NOT NULL, seq INTEGER NOT NULL, body TEXT NOT NULL, PRIMARY KEY (task_id, seq)
) WITHOUT ROWID;
INSERT INTO task_events SELECT task_id, seq, body FROM task_events_new;
DROP TABLE task_events_new;
DROP TABLE schema_version;
"""


def layout(path: Path) -> dict[str, str]:
    with sqlite3.connect(path) as conn:
        return dict(conn.execute("SELECT name, sql FROM sqlite_schema WHERE sql IS NOT NULL"))


async def test_a_file_of_the_earlier_layout_is_migrated_with_its_data(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    async with SqliteTaskStore(path) as store:
        records = [await create(store, key=f"k{i}") for i in range(5)]
        moved = await advance(store, records[1], TaskState.WORKING, TaskState.COMPLETED)
    with sqlite3.connect(path) as conn:
        conn.executescript(EARLIER_LAYOUT)
    assert "WITHOUT ROWID" in layout(path)["task_events"]
    with pytest.raises(StoreVersionError, match="db upgrade"):  # refused until upgraded
        await SqliteTaskStore(path).open()
    await SqliteTaskStore(path).upgrade()

    async with SqliteTaskStore(path) as store:
        shown = layout(path)
        assert "WITHOUT ROWID" not in shown["task_events"]
        assert not [name for name, sql in shown.items() if "DESC" in sql]
        assert {"tasks_by_owner", "tasks_by_context", "tasks_by_delegate"} <= set(shown)
        assert [e.seq for e in await store.events(moved.id)] == [1, 2, 3]
        assert await store.find("k3") == records[3].id
        latest = [moved, *records[:1], *records[2:]]
        newest_first = [r.id for r in sorted(latest, key=lambda r: (r.updated_at, r.id))][::-1]
        page = await store.list_tasks(TaskQuery(owner="alice", page_size=2))
        rest = await store.list_tasks(
            TaskQuery(owner="alice", page_size=10, page_token=page.next_page_token)
        )
        assert [r.id for r in [*page.records, *rest.records]] == newest_first
        await advance(store, records[0], TaskState.WORKING)  # and it takes new writes
    async with SqliteTaskStore(path) as store:  # a second open finds nothing to migrate
        assert (await store.get(records[0].id)).version == 2  # type: ignore[union-attr]


async def test_a_file_without_the_status_time_gets_it_from_its_tasks(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    async with SqliteTaskStore(path) as store:
        done = await advance(store, await create(store), TaskState.WORKING, TaskState.COMPLETED)
        other = await create(store)
    with sqlite3.connect(path) as conn:  # as a file of an earlier version: no such column
        conn.execute("ALTER TABLE tasks DROP COLUMN status_at")
        conn.execute("DROP TABLE schema_version")
    await SqliteTaskStore(path).upgrade()
    stamp = done.task.status.timestamp
    assert stamp is not None
    async with SqliteTaskStore(path) as store:
        since = "2000-01-01T00:00:00.000Z"
        page = await store.list_tasks(TaskQuery(owner="alice", status_after=since))
        assert {r.id for r in page.records} == {done.id, other.id}
        after_done = await store.list_tasks(TaskQuery(owner="alice", status_after=stamp))
        later = {other.id} if (other.task.status.timestamp or "") > stamp else set()
        assert {r.id for r in after_done.records} == later
    with sqlite3.connect(path) as conn:
        filled = dict(conn.execute("SELECT id, status_at FROM tasks"))
    assert filled[done.id] == stamp


class HeldCommits(ThreadPoolExecutor):
    """The fsync thread, holding each job until `release` is set."""

    def __init__(self) -> None:
        super().__init__(1)
        self.started = threading.Event()
        self.release = threading.Event()

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        def held() -> Any:
            self.started.set()
            self.release.wait(10)
            return fn(*args, **kwargs)

        return super().submit(held)


async def test_reads_see_only_what_is_committed_while_a_batch_commits(tmp_path: Path) -> None:
    async with SqliteTaskStore(tmp_path / "reads.db") as store:
        record = await create(store)
        held = HeldCommits()
        writer = store._writer
        assert writer is not None
        assert writer._fsync is not None
        writer._fsync.shutdown()
        writer._fsync = held
        # Two writes make a batch whose COMMIT runs in the (held) fsync thread.
        writes = asyncio.gather(
            advance(store, record, TaskState.WORKING), create(store, key="late")
        )
        await asyncio.get_running_loop().run_in_executor(None, held.started.wait, 10)
        during = await store.get(record.id)
        assert during is not None
        assert during.version == 1
        assert await store.find("late") is None
        held.release.set()
        await writes
        after = await store.get(record.id)
        assert after is not None
        assert after.version == 2
        assert await store.find("late") is not None


async def test_a_second_opener_of_a_served_file_is_refused_naming_the_owner(
    tmp_path: Path,
) -> None:
    path = tmp_path / "owned.db"
    async with SqliteTaskStore(path) as first:
        record = await create(first)
        second = SqliteTaskStore(path)
        with pytest.raises(
            StoreError, match=rf"already served by another process \(pid {os.getpid()}"
        ):
            await second.open()
        with pytest.raises(StoreError, match="shared=1"):
            second.check_free()
        assert await first.get(record.id) is not None  # the owner goes on undisturbed
    async with SqliteTaskStore(path) as again:  # the owner closed: free again
        assert await again.get(record.id) is not None


async def test_a_file_opened_shared_takes_several_processes_and_holds_their_leases(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'shared.db'}?shared=1"
    one, two = SqliteTaskStore.from_url(url), SqliteTaskStore.from_url(url)
    async with one, two:
        assert one.shared
        assert two.shared
        assert await one.acquire("task:t1", "a", 30)
        assert not await two.acquire("task:t1", "b", 30)  # held, in the file
        assert await two.holder("task:t1") == "a"
        record = await create(one)
        assert (await two.get(record.id)) is not None
        seen = asyncio.create_task(anext(two.follow(record.id, after=1)))
        await advance(one, record, TaskState.WORKING)  # written by the other "process"
        assert (await asyncio.wait_for(seen, 5)).seq == 2  # found by polling the file


async def test_a_damaged_file_fails_writes_with_a_clear_error_and_health_says_so(
    tmp_path: Path,
) -> None:
    path = tmp_path / "damaged.db"
    async with SqliteTaskStore(path) as store:
        for i in range(200):
            await create(store, key=f"k{i}")
    size = path.stat().st_size
    with path.open("r+b") as file:  # the last page overwritten with garbage
        file.seek(size - 4096)
        file.write(bytes(range(256)) * 16)
    keys = KeyFile(tmp_path / "echo.keys.json", create=True)  # the file was used keyless
    app = create_app(
        EchoAgent(),
        echo_card("http://echo.test/"),
        SqliteTaskStore(path),
        trust=TrustConfig(identity=keys),
    )
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendMessage",
        "params": {"message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "hi"}]}},
    }
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://echo.test/"
        ) as http,
    ):
        for _ in range(3):
            reply = await http.post("/", json=body, headers={"A2A-Version": "1.0"})
            assert reply.status_code == 503
            assert reply.json()["error"]["code"] == -32105
            assert "malformed" in reply.json()["error"]["message"]
        health = await http.get("/health")
        assert health.status_code == 503
        assert health.json()["status"] == "degraded"
        assert health.json()["store"].startswith("failing writes: ")


async def test_a_request_is_stored_in_at_most_twice_its_size(tmp_path: Path) -> None:
    """1 MiB to the echo agent, whose artifact copies the text: the task holds it twice (the
    message and the artifact); the event log holds references, not third and fourth copies."""
    path = tmp_path / "size.db"
    app = create_app(EchoAgent(), echo_card("http://echo.test/"), SqliteTaskStore(path))
    message = {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "é" * 500_000}]}
    call = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}
    body = json.dumps(call, ensure_ascii=False)  # 1 MB: raw UTF-8, as most clients send it
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://echo.test/"
        ) as http,
    ):
        headers = {"A2A-Version": "1.0", "Content-Type": "application/json"}
        reply = await http.post("/", content=body, headers=headers)
        task = reply.json()["result"]["task"]
        assert task["artifacts"][0]["parts"] == [{"text": "é" * 500_000}]
        with sqlite3.connect(path) as conn:
            stored = sum(
                conn.execute(
                    f"SELECT COALESCE(SUM(LENGTH(CAST(body AS BLOB))), 0) FROM {t}"
                ).fetchone()[0]
                for t in ("tasks", "task_events")
            )
        # Two copies of the text (its message and the echo's artifact), plus ~1 KiB of ids,
        # timestamps and event references (four copies before).
        assert stored <= 2 * len(body.encode()) + 4096
        events = [e.item for e in await app.state.a2a.store.events(task["id"])]
        assert events[0].task is not None
        assert events[0].task.history[0].text == "é" * 500_000  # rebuilt from the snapshot


def _held(generator: Any) -> list[str]:
    """Locals of a suspended async generator that hold a task or one of its events."""
    kinds = (TaskRecord, Task, TaskEvent, StreamResponse)
    return [k for k, v in generator.ag_frame.f_locals.items() if isinstance(v, kinds)]


async def _until_waiting(store: SqliteTaskStore, task_id: str) -> None:
    """Until the task's follower waits for a live event (bounded)."""
    for _ in range(2000):
        if any(s._waiter for s in store._hub._subscribers.get(task_id, ())):
            return
        await asyncio.sleep(0.001)
    raise AssertionError("the follower never waited")


async def test_an_open_stream_waiting_for_events_keeps_no_copy_of_the_task(
    tmp_path: Path,
) -> None:
    # Every open stream is one of these generators: a task (or event) held in their frames
    # while they wait is a copy per subscriber, for as long as the task runs.
    async with SqliteTaskStore(tmp_path / "s.db") as store:
        record = await advance(store, await create(store), TaskState.WORKING)
        stream: Any = task_stream(
            store, record.id, record.task, record.version, until_terminal=True
        )
        assert (await anext(stream))[1].task == record.task  # the head snapshot
        waiting = asyncio.create_task(anext(stream))
        await _until_waiting(store, record.id)  # having read the record: it was not ended
        follower = stream.ag_frame.f_locals["events"]  # the store's follow()
        assert _held(stream) == []
        assert _held(follower) == []
        record = await advance(store, record, TaskState.WORKING)
        assert (await asyncio.wait_for(waiting, 5))[0] == record.version
        waiting = asyncio.create_task(anext(stream))
        await _until_waiting(store, record.id)  # after a live event too
        assert _held(stream) == []
        assert _held(follower) == []
        await advance(store, record, TaskState.COMPLETED)
        assert (await asyncio.wait_for(waiting, 5))[0] == record.version + 1
        await stream.aclose()
