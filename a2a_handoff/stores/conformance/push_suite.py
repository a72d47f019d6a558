"""Push configs (`capabilities.push`) and their delivery progress: the push outbox's cursor
kept across a config's replacement, never written for a deleted config."""

from __future__ import annotations

from dataclasses import replace

import pytest

from a2a_handoff.protocol.models import utc_now
from a2a_handoff.stores.base import PushConfigRecord, PushStore, TaskStore
from a2a_handoff.stores.conformance.samples import Suite, create, declared


def config(
    task_id: str = "t1", config_id: str = "c1", url: str = "https://a.example/"
) -> PushConfigRecord:
    now = utc_now()
    body = f'{{"id":"{config_id}","taskId":"{task_id}","url":"{url}"}}'
    return PushConfigRecord(task_id, config_id, body, cursor=3, created_at=now, updated_at=now)


class PushSuite(Suite):
    """`PushStore`, for every store that declares push configs."""

    @pytest.fixture
    def push(self, store: TaskStore) -> PushStore:
        return declared(store.capabilities.push, "push configs")

    async def test_a_config_is_stored_and_read_back_by_task_and_by_id(
        self, push: PushStore
    ) -> None:
        first = await push.put_push_config(config(config_id="c1"))
        await push.put_push_config(config(config_id="c2"))
        await push.put_push_config(config(task_id="t2", config_id="c1"))
        assert (first.cursor, first.done, first.history) == (3, False, "[]")
        assert [r.config_id for r in await push.push_configs("t1")] == ["c1", "c2"]
        (one,) = await push.push_configs("t1", "c2")
        assert (one.task_id, one.config_id, one.cursor) == ("t1", "c2", 3)
        assert await push.push_configs("t1", "nope") == []
        assert await push.push_configs("t3") == []

    async def test_replacing_a_config_keeps_its_progress(self, push: PushStore) -> None:
        kept = await push.put_push_config(config())
        progressed = replace(
            kept,
            cursor=7,
            failing_since="2026-01-01T00:00:00.000Z",
            history='[{"seq":7}]',
            updated_at=utc_now(),
        )
        assert await push.save_push_progress(progressed)
        replaced = await push.put_push_config(config(url="https://b.example/"))
        assert "https://b.example/" in replaced.config
        assert (replaced.cursor, replaced.history) == (7, '[{"seq":7}]')
        assert replaced.failing_since == "2026-01-01T00:00:00.000Z"

    async def test_progress_is_not_saved_for_a_deleted_config(self, push: PushStore) -> None:
        kept = await push.put_push_config(config())
        await push.delete_push_config("t1", "c1")
        await push.delete_push_config("t1", "c1")  # idempotent
        assert await push.push_configs("t1") == []
        assert not await push.save_push_progress(replace(kept, cursor=9))
        assert await push.push_configs("t1") == []
        assert await push.active_push_configs() == []

    async def test_only_configs_with_deliveries_left_are_active(self, push: PushStore) -> None:
        a = await push.put_push_config(config(config_id="a"))
        await push.put_push_config(config(config_id="b"))
        assert sorted(r.config_id for r in await push.active_push_configs()) == ["a", "b"]
        assert await push.save_push_progress(replace(a, cursor=5, done=True))
        assert [r.config_id for r in await push.active_push_configs()] == ["b"]
        (done,) = await push.push_configs("t1", "a")
        assert (done.cursor, done.done) == (5, True)

    async def test_a_callers_active_configs_are_counted_across_its_tasks(
        self, store: TaskStore, push: PushStore
    ) -> None:
        mine = [await create(store, owner="mallory") for _ in range(2)]
        theirs = await create(store, owner="alice")
        for record in mine:
            for n in range(3):
                await push.put_push_config(config(record.id, f"c{n}"))
        await push.put_push_config(config(theirs.id, "c0"))
        await push.put_push_config(config("no-such-task", "c0"))
        assert await push.active_push_count("mallory") == 6
        assert await push.active_push_count("alice") == 1
        assert await push.active_push_count("nobody") == 0
        (done,) = await push.push_configs(mine[0].id, "c0")
        assert await push.save_push_progress(replace(done, done=True))
        await push.delete_push_config(mine[1].id, "c1")
        assert await push.active_push_count("mallory") == 4  # done and deleted ones do not count
