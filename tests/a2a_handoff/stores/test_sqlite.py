"""What only the SQLite store does: its file layout, its migration, where its reads run."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from a2a_handoff.protocol.states import TaskState
from a2a_handoff.stores import SqliteTaskStore
from a2a_handoff.stores.base import TaskQuery
from tests.a2a_handoff.stores.test_behaviour import advance, create

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
