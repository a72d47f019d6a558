"""Push configs and their delivery progress, on every backend (the push outbox's cursor)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from a2a_handoff.protocol.models import utc_now
from a2a_handoff.stores import Store
from a2a_handoff.stores.base import PushConfigRecord
from tests.a2a_handoff.stores.test_behaviour import create

pytestmark = pytest.mark.anyio


def config(
    task_id: str = "t1", config_id: str = "c1", url: str = "https://a.example/"
) -> PushConfigRecord:
    now = utc_now()
    body = f'{{"id":"{config_id}","taskId":"{task_id}","url":"{url}"}}'
    return PushConfigRecord(task_id, config_id, body, cursor=3, created_at=now, updated_at=now)


async def test_a_config_is_stored_and_read_back_by_task_and_by_id(store: Store) -> None:
    first = await store.put_push_config(config(config_id="c1"))
    await store.put_push_config(config(config_id="c2"))
    await store.put_push_config(config(task_id="t2", config_id="c1"))
    assert (first.cursor, first.done, first.history) == (3, False, "[]")
    assert [r.config_id for r in await store.push_configs("t1")] == ["c1", "c2"]
    (one,) = await store.push_configs("t1", "c2")
    assert (one.task_id, one.config_id, one.cursor) == ("t1", "c2", 3)
    assert await store.push_configs("t1", "nope") == []
    assert await store.push_configs("t3") == []


async def test_replacing_a_config_keeps_its_progress(store: Store) -> None:
    stored = await store.put_push_config(config())
    progressed = replace(stored, cursor=7, failing_since="2026-01-01T00:00:00.000Z",
                         history='[{"seq":7}]', updated_at=utc_now())  # fmt: skip
    assert await store.save_push_progress(progressed)
    replaced = await store.put_push_config(config(url="https://b.example/"))
    assert "https://b.example/" in replaced.config
    assert (replaced.cursor, replaced.history) == (7, '[{"seq":7}]')
    assert replaced.failing_since == "2026-01-01T00:00:00.000Z"


async def test_progress_is_not_saved_for_a_deleted_config(store: Store) -> None:
    stored = await store.put_push_config(config())
    await store.delete_push_config("t1", "c1")
    await store.delete_push_config("t1", "c1")  # idempotent
    assert await store.push_configs("t1") == []
    assert not await store.save_push_progress(replace(stored, cursor=9))
    assert await store.push_configs("t1") == []
    assert await store.active_push_configs() == []


async def test_only_configs_with_deliveries_left_are_active(store: Store) -> None:
    a = await store.put_push_config(config(config_id="a"))
    await store.put_push_config(config(config_id="b"))
    assert sorted(r.config_id for r in await store.active_push_configs()) == ["a", "b"]
    assert await store.save_push_progress(replace(a, cursor=5, done=True))
    assert [r.config_id for r in await store.active_push_configs()] == ["b"]
    (done,) = await store.push_configs("t1", "a")
    assert (done.cursor, done.done) == (5, True)


async def test_a_callers_active_configs_are_counted_across_its_tasks(store: Store) -> None:
    mine = [await create(store, owner="mallory") for _ in range(2)]
    theirs = await create(store, owner="alice")
    for record in mine:
        for n in range(3):
            await store.put_push_config(config(record.id, f"c{n}"))
    await store.put_push_config(config(theirs.id, "c0"))
    await store.put_push_config(config("no-such-task", "c0"))
    assert await store.active_push_count("mallory") == 6
    assert await store.active_push_count("alice") == 1
    assert await store.active_push_count("nobody") == 0
    (done,) = await store.push_configs(mine[0].id, "c0")
    assert await store.save_push_progress(replace(done, done=True))
    await store.delete_push_config(mine[1].id, "c1")
    assert await store.active_push_count("mallory") == 4  # done and deleted ones do not count
