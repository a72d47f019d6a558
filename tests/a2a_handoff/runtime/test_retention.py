"""The retention sweep (`runtime.retention`): durations parsed, the cutoff taken from its
clock (deterministic: no sleeps), finished tasks older than it deleted in batches with the
event loop served between them, and the settings that turn it on refused when they cannot."""

from __future__ import annotations

import asyncio
import calendar
import time

import pytest

from a2a_handoff.errors import ConfigError
from a2a_handoff.exits import Parser
from a2a_handoff.protocol.models import StreamResponse
from a2a_handoff.protocol.states import TaskState
from a2a_handoff.runtime.retention import RetentionSweep, sweep_interval
from a2a_handoff.server import RetentionConfig, create_app, parse_duration
from a2a_handoff.stores import Capabilities, Commit, MemoryTaskStore, TaskRecord
from a2a_handoff.stores.conformance.samples import moved, new_task, status
from servers._flags import agent_options
from servers.echo import EchoAgent, echo_card

pytestmark = pytest.mark.anyio

NOW = calendar.timegm(time.strptime("2021-01-10T00:00:00", "%Y-%m-%dT%H:%M:%S"))


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def test_durations_read_as_a_number_and_a_unit() -> None:
    assert [parse_duration(d) for d in ("30d", "12h", "15m", "90s", "1.5h")] == [
        30 * 86400,
        12 * 3600,
        900,
        90,
        5400,
    ]
    for bad in ("30", "d", "0s", "-1h", "2w", "1 d d", ""):
        with pytest.raises(ConfigError, match="duration"):
            parse_duration(bad)


def test_retain_on_the_command_line_is_a_duration_or_a_usage_error() -> None:
    parser = Parser(prog="agent")
    agent_options(parser, examples=False)
    assert parser.parse_args(["--port", "1", "--retain", "12h"]).retain == 12 * 3600
    assert parser.parse_args(["--port", "1"]).retain is None  # kept forever
    with pytest.raises(SystemExit) as refused:
        parser.parse_args(["--port", "1", "--retain", "30"])
    assert refused.value.code == 64


def test_retention_settings_are_checked_when_made() -> None:
    with pytest.raises(ConfigError, match="retain"):
        RetentionConfig(retain=0)
    with pytest.raises(ConfigError, match="batch"):
        RetentionConfig(retain=60, batch=0)
    assert sweep_interval(3600) == 60  # a tenth, 60 s at most
    assert sweep_interval(2) == 1  # 1 s at least


def test_an_app_whose_store_cannot_delete_refuses_retention() -> None:
    store = MemoryTaskStore()
    store.capabilities = Capabilities(ledger=store, push=store, leases=store)
    with pytest.raises(ConfigError, match="declares no retention"):
        create_app(
            EchoAgent(), echo_card("http://127.0.0.1:1/"), store, retention=RetentionConfig(60)
        )


async def finished_at(store: MemoryTaskStore, stamp: str, state: TaskState) -> str:
    task = new_task()
    await store.commit(Commit(TaskRecord(task, "", 1, stamp, stamp), [StreamResponse(task=task)]))
    later = moved(task, state)
    await store.commit(
        Commit(TaskRecord(later, "", 2, stamp, stamp), [status(later)], expected_version=1)
    )
    return task.id


class Watched(MemoryTaskStore):
    """The memory store, noting how far the loop's other work got at each purge."""

    def __init__(self) -> None:
        super().__init__()
        self.ticks = 0
        self.seen: list[int] = []

    async def purge_finished(self, before: str, limit: int) -> int:
        self.seen.append(self.ticks)
        return await super().purge_finished(before, limit)


async def test_a_sweep_deletes_what_ended_before_its_cutoff_in_batches_serving_between() -> None:
    store = Watched()
    # retain one day, now 2021-01-10: the cutoff is 2021-01-09T00:00:00.
    old = [
        await finished_at(store, "2021-01-08T12:00:00.000Z", TaskState.COMPLETED)
        for _ in range(250)
    ]
    recent = await finished_at(store, "2021-01-09T12:00:00.000Z", TaskState.FAILED)
    running = await finished_at(store, "2020-01-01T00:00:00.000Z", TaskState.WORKING)
    sweep = RetentionSweep(store, 86400, batch=100, clock=lambda: NOW)

    async def requests() -> None:
        while True:
            store.ticks += 1
            await asyncio.sleep(0)

    other = asyncio.create_task(requests())
    await asyncio.sleep(0)
    try:
        assert await sweep.sweep() == 250
    finally:
        other.cancel()
    assert len(store.seen) == 3  # 100, 100, 50
    assert store.seen[0] < store.seen[1] < store.seen[2]  # requests ran between batches
    assert [await store.get(task_id) for task_id in old] == [None] * 250
    assert await store.get(recent) is not None
    assert await store.get(running) is not None
    assert (sweep.purged, await sweep.sweep()) == (250, 0)


async def test_the_running_sweep_deletes_at_once_and_stops_when_closed() -> None:
    store = MemoryTaskStore()
    gone = await finished_at(store, "2020-01-01T00:00:00.000Z", TaskState.TRANSFERRED)
    sweep = RetentionSweep(store, 60, interval=3600)
    sweep.start()
    for _ in range(100):
        if await store.get(gone) is None:
            break
        await asyncio.sleep(0)
    await sweep.aclose()
    assert await store.get(gone) is None
    assert sweep._task is None
