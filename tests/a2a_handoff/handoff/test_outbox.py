"""The outbox delivers the job a recovery path queues after a failed one, in the same task:
never a second delivery of it, and whoever waited on the first handoff hears how it ended."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest

from a2a_handoff.handoff.job import DeliveryJob
from a2a_handoff.handoff.recovery import Outbox
from a2a_handoff.handoff.settings import HandoffSettings
from a2a_handoff.protocol.models import Task, TaskStatus, utc_now
from a2a_handoff.protocol.states import TaskState
from a2a_handoff.stores.base import OutboxEntry, TaskRecord
from a2a_handoff.stores.memory import MemoryTaskStore

pytestmark = pytest.mark.anyio


def entry(handoff_id: str) -> OutboxEntry:
    now = utc_now()
    return OutboxEntry(
        handoff_id,
        "t0",
        "c1",
        "alice",
        "billing",
        "http://127.0.0.1:2/",
        "{}",
        "pending",
        "",
        now,
        now,
    )


FINAL = TaskRecord(
    Task(id="t0", context_id="c1", status=TaskStatus(state=TaskState.TRANSFERRED)),
    "alice",
    3,
    utc_now(),
    utc_now(),
)


class Rerouting:
    """A delivery whose first handoff fails onto a recovery path: `h1` → job `h2` → done."""

    def __init__(self) -> None:
        self.outbox: Outbox | None = None
        self.delivered: list[str] = []
        self.owner_of_h2: asyncio.Task[TaskRecord | None] | None = None

    async def deliver(self, job: DeliveryJob) -> TaskRecord | DeliveryJob | None:
        self.delivered.append(job.handoff_id)
        if job.handoff_id == "h1":
            return DeliveryJob(entry("h2"), True)
        assert self.outbox is not None
        self.owner_of_h2 = self.outbox.in_flight.get("h2")
        # The recovery loop sees h2 pending meanwhile: it must not deliver it again.
        again = self.outbox.spawn(DeliveryJob(entry("h2")))
        assert again is self.owner_of_h2
        return FINAL


@contextlib.asynccontextmanager
async def unshared(name: str) -> AsyncIterator[bool]:
    yield True


async def test_a_recovery_path_job_is_delivered_next_by_the_same_task() -> None:
    delivery = Rerouting()
    settings = HandoffSettings(agent_name="triage", agent_url="http://127.0.0.1:1/")
    outbox = Outbox(settings, MemoryTaskStore(), delivery, unshared)  # type: ignore[arg-type]
    delivery.outbox = outbox
    heard: list[TaskRecord] = []
    job = outbox.spawn(DeliveryJob(entry("h1"), True, reopen=True), heard.append)
    assert await job is FINAL
    assert delivery.delivered == ["h1", "h2"]  # h2 once: queued, not recursed or respawned
    assert delivery.owner_of_h2 is job
    assert heard == [FINAL]  # the waiter on h1 followed the chain to its end
    assert outbox.in_flight == {}
