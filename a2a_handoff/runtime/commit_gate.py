"""The gate before a handler: it runs only once the writes that make its step exist are
committed — the task, its dedupe key and the ledger row of the handoff that created it, or a
follow-up's acceptance (its message in the history), or a resumed run's claim.

Invariant: no handler runs ahead of that commit, on any store. A crash before it commits
leaves nothing done — a caller's retry (the same message id, the same idempotency key) then
creates the task and runs its handler once; a crash after it leaves a task that its agent
resumes or fails. With replicas sharing the store, a follow-up's run first takes the task's
runner lease (only one replica's message gets in); a duplicate created on another replica,
or a message refused, never runs a handler.
"""

from __future__ import annotations

import asyncio
from typing import Protocol

from a2a_handoff.errors import RpcError, StoreError, StoreUnavailableError, TaskBusyError
from a2a_handoff.protocol.models import Task
from a2a_handoff.runtime.journal import Journal
from a2a_handoff.runtime.phases import Phase
from a2a_handoff.stores.base import Store, TaskRecord


class Claimer(Protocol):
    async def claim_task(self, task_id: str) -> bool:
        """Take the task's runner lease (replicas); False while another replica's run has it."""
        ...


class Gated(Protocol):
    """What the gate needs from the run (`runtime.run.TaskRun`)."""

    journal: Journal

    @property
    def phase(self) -> Phase: ...

    @property
    def store(self) -> Store: ...

    @property
    def task(self) -> Task: ...

    @property
    def host(self) -> Claimer: ...

    def abort(self, error: RpcError | None, answer: TaskRecord | None = None) -> None: ...


async def stored(run: Gated) -> bool:
    """Wait until the run's step is committed; False: the run is over (aborted with the
    reason, or answered with a task another process created for the same key)."""
    if run.store.shared and not await _claimed(run):
        return False
    await run.journal.write_now()  # in the driver's own task: the first write
    created = run.journal.created
    try:
        await asyncio.shield(created)  # done already, but for a write another task made
    except Exception:
        return False  # not stored: the run was aborted with the reason
    return run.phase is not Phase.ABORTED


async def _claimed(run: Gated) -> bool:
    """Take the task's runner lease before a follow-up writes anything; False when another
    replica's run holds it, or the store cannot be reached (the run aborted with why)."""
    task_id = run.task.id
    try:
        claimed = await run.host.claim_task(task_id)
    except StoreError as exc:
        run.abort(StoreUnavailableError(f"the task could not be claimed: {exc}"))
        return False
    if not claimed:
        run.abort(
            TaskBusyError(
                f"task {task_id} is busy: another replica is processing a message to it;"
                " send this one again when the task asks for input"
            )
        )
        return False
    return True  # a follow-up writes its acceptance once the task is claimed
