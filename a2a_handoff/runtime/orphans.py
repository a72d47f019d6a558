"""Tasks left running by a process that is gone: failed, so no caller waits forever.

With a store of its own, every task left SUBMITTED/WORKING at start-up is an orphan (the
process that ran it died). With replicas sharing the store, only a task whose runner
replica's lease ran out is; any replica fails it, check-and-set, so exactly one does. A task
being handed off is never an orphan: its outbox entry finishes it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Container

from a2a_handoff.errors import ConflictError
from a2a_handoff.protocol.events import agent_message
from a2a_handoff.protocol.extension import HANDING_OFF, ext_metadata
from a2a_handoff.protocol.states import TaskState
from a2a_handoff.runtime.journal import write_state
from a2a_handoff.runtime.leases import Leases
from a2a_handoff.stores.base import Store, TaskQuery, TaskRecord

RESTART_REASON = "interrupted: the agent restarted while this task was running"


async def fail_orphans(store: Store, running: Container[str], leases: Leases) -> int:
    """Fail the orphans (none of `running`, this process's own runs); returns how many."""
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
                and ext_metadata(r.task).get("state") != HANDING_OFF
                and (not shared or not await leases.runner_alive(r))
            ]
            token = page.next_page_token
    failed = 0
    for record in orphans:
        with contextlib.suppress(ConflictError):
            reason = agent_message(RESTART_REASON, record.task)
            await write_state(store, record, TaskState.FAILED, reason)
            failed += 1
    return failed
