"""Tasks nobody runs any more: failed with the reason, so no caller waits forever.

- Orphans: with a store of its own, every task left SUBMITTED/WORKING at start-up (the
  process that ran it died). With replicas sharing the store, a task whose runner lease
  lapsed (see `runtime.leases`); any replica fails it, check-and-set, so exactly one does.
- Stranded: a task this process stopped running because the store failed its writes (after
  retrying them for a while, see `runtime.journal`). It is failed as soon as the store takes
  writes again, by this process, which knows it.
A task being handed off is neither: its outbox entry finishes it. A task that delegated
is resumed rather than failed (`runtime.delegating`): its handler runs again, the outcomes
recorded replayed.
"""

from __future__ import annotations

import contextlib
from collections.abc import Container

from a2a_handoff.errors import ConflictError, StoreError
from a2a_handoff.protocol.extension import HANDING_OFF, ext_metadata
from a2a_handoff.protocol.states import TaskState
from a2a_handoff.protocol.steps import agent_message
from a2a_handoff.runtime.journal import write_state
from a2a_handoff.runtime.leases import Leases
from a2a_handoff.stores.base import Store, TaskQuery, TaskRecord

RESTART_REASON = "interrupted: the agent restarted while this task was running"
STORE_REASON = "interrupted: the agent's store failed while this task was running"


def _settled(record: TaskRecord) -> bool:
    """Nothing to do for it: it ended, waits for its caller, or its handoff finishes it."""
    state = record.state
    return (
        state.terminal
        or state.interrupted
        or ext_metadata(record.task).get("state") == (HANDING_OFF)
    )


async def find_orphans(store: Store, running: Container[str], leases: Leases) -> list[TaskRecord]:
    """The orphans: tasks left SUBMITTED/WORKING by a process that is gone (none of
    `running`, this process's own runs)."""
    shared = store.shared
    orphans: list[TaskRecord] = []
    for state in (TaskState.SUBMITTED, TaskState.WORKING):
        token: str | None = None
        while token != "":
            page = await store.list_tasks(
                TaskQuery(owner=None, state=state, page_size=100, page_token=token)
            )
            orphans += [
                r
                for r in page.records
                if r.id not in running
                and not _settled(r)
                and (not shared or not await leases.runner_alive(r))
            ]
            token = page.next_page_token
    return orphans


async def fail_orphan(store: Store, record: TaskRecord) -> bool:
    """Fail an orphan with the reason; False when it moved meanwhile."""
    with contextlib.suppress(ConflictError):
        reason = agent_message(RESTART_REASON, record.task)
        await write_state(store, record, TaskState.FAILED, reason)
        return True
    return False


async def fail_stranded(store: Store, stranded: set[str], running: Container[str]) -> int:
    """Fail the stranded tasks the store will now take; the others stay for the next call."""
    failed = 0
    for task_id in list(stranded):
        if task_id in running:  # running again here: its run owns it
            stranded.discard(task_id)
            continue
        try:
            record = await store.get(task_id)
            if record is None or _settled(record):
                stranded.discard(task_id)
                continue
            reason = agent_message(STORE_REASON, record.task)
            await write_state(store, record, TaskState.FAILED, reason)
        except ConflictError:
            continue  # moved meanwhile: looked at again next time
        except StoreError:
            return failed  # still failing: next time
        stranded.discard(task_id)
        failed += 1
    return failed
