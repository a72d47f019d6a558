"""Recovery: the start-up sweep and the heartbeat's sweeps over tasks nobody runs any more.

Invariant: every acknowledged task is run to its end or failed with the reason: an orphan (its
runner died) is failed — or resumed, for an agent that says its handler may run twice
(`agent.resumes`) and for a task that delegated (its outcomes are replayed); a run the store
failed is stranded, and its task failed once the store takes writes again (`runtime.orphans`).
"""

from __future__ import annotations

import logging

from a2a_handoff.observe import events
from a2a_handoff.protocol.models import Role
from a2a_handoff.protocol.states import TaskState
from a2a_handoff.protocol.steps import status_event, with_status
from a2a_handoff.runtime.delegation_record import delegating
from a2a_handoff.runtime.leases import Leases
from a2a_handoff.runtime.orphans import fail_orphan, fail_stranded, find_orphans
from a2a_handoff.runtime.replay import RESUMED, step_replay, stored_handoff
from a2a_handoff.runtime.run import RunHost, TaskRun
from a2a_handoff.runtime.running import Runs
from a2a_handoff.stores.base import TaskRecord

log = logging.getLogger("a2a_handoff.runtime")


class Sweeps:
    """Fails (or resumes) the tasks whose runner was lost."""

    def __init__(self, host: RunHost, runs: Runs, leases: Leases) -> None:
        self.host = host
        self.runs = runs
        self.leases = leases
        self.recovered = False  # the start-up sweep is done (a failing store delays it)

    async def recover(self) -> int:
        """Fail tasks a previous process (or a dead replica) left running — or, for an agent
        that resumes them (`agent.resumes = True`), run their handler again on their last
        message; how many."""
        resumes = getattr(self.host.agent, "resumes", False)
        orphans = await find_orphans(self.host.store, self.runs.by_task, self.leases)
        failed = 0
        for record in orphans:
            if resumes or delegating(record.task):  # a delegation's outcomes are replayed
                await self._resume(record)
            elif await fail_orphan(self.host.store, record):
                failed += 1
        self.recovered = True
        return failed if not resumes else len(orphans)

    async def _resume(self, record: TaskRecord) -> None:
        """Run an orphan's handler again on the last message its caller sent, replaying
        what the cut run committed (`runtime.replay`): the agent said its handler may run
        again (its side effects journaled), or the task delegated."""
        task = record.task
        last = next((m for m in reversed(task.history or []) if m.role is Role.USER), None)
        if last is None or task.id in self.runs.by_task:
            return
        replay = step_replay(await self.host.store.events(task.id))
        if task.id in self.runs.by_task:  # resumed meanwhile, by the heartbeat's sweep
            return
        resumed = with_status(task, TaskState.WORKING)
        run = TaskRun(
            self.host,
            resumed,
            record.owner,
            committed=record,
            dedupe_key=None,
            first=status_event(resumed, RESUMED),
        )
        run.replay = replay
        run.stored_handoff = stored_handoff(task, last)
        self.runs.add(run)
        events.recovery(
            "resumed",
            "task %s resumed: its handler runs again, %d event(s) to replay",
            task.id,
            len(replay.emitted),
            task_id=task.id,
            context_id=task.context_id,
        )
        run.run(last)

    async def sweep(self, others: bool) -> int:
        """The heartbeat's sweep: fail the tasks this process stranded, and with `others` the
        orphans of dead replicas; how many."""
        failed = 0
        if self.runs.stranded:
            failed += await fail_stranded(self.host.store, self.runs.stranded, self.runs.by_task)
        if others or not self.recovered:
            failed += await self.recover()
        if failed:
            log.warning("failed %d task(s) whose runner was lost", failed)
        return failed
