"""A drain: the runs of this process finished, or handed over, before it stops.

The task manager first stops taking messages that would start a run (`DrainingError`: sent
again, another replica takes it; nothing was done with it). Then, in this order:

1. the runs under way are waited for, until the deadline;
2. those still running are stopped: their handler cancelled, what it emitted before written
   (the store's record is what another replica resumes from, so no write of this process may
   land after that replica began);
3. they are let go: their waiting callers answered with the task as last committed (still
   WORKING: it goes on elsewhere), and their runner lease released, marked handed over
   (`Leases.hand_over`), so that another replica's next sweep resumes them at once instead
   of after a lease's lapse. With a store of its own (SQLite), the next start resumes them.

A handler that does not resume (`agent.resumes` false) has its task failed by whoever sweeps
it, with the reason, as after a crash: a drain never runs a step twice that could not be.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from a2a_handoff.runtime.leases import Leases
from a2a_handoff.runtime.running import Runs

log = logging.getLogger("a2a_handoff.runtime")

WRITE_SECONDS = 2.0  # how long a stopped run's last write may take before it is let go


async def settle(runs: Runs, deadline: float) -> None:
    """Wait until no run is left, or until `deadline` (the loop's clock)."""
    loop = asyncio.get_running_loop()
    while runs.by_task and (left := deadline - loop.time()) > 0:
        waiting = [run.settled for run in runs.by_task.values() if not run.settled.done()]
        if not waiting:
            return
        await asyncio.wait(waiting, timeout=left, return_when=asyncio.FIRST_COMPLETED)


async def hand_over(runs: Runs, leases: Leases) -> int:
    """Stop the runs left and hand their tasks over (see the module docstring); how many."""
    left = list(runs.by_task.values())
    for run in left:
        if run.driver is not None and not run.driver.done():
            run.driver.cancel()
    for run in left:
        with contextlib.suppress(asyncio.CancelledError, Exception):
            if run.driver is not None:
                await run.driver
        with contextlib.suppress(Exception):
            await asyncio.wait_for(run.journal.drain(), WRITE_SECONDS)
        flusher = run.journal.flusher  # a write still retried: it may not land after this
        if flusher is not None and not flusher.done():
            flusher.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await flusher
    for run in left:
        run.journal.let_go()
        await leases.hand_over(run.task.id)
    if left:
        log.warning(
            "drain: %d task(s) still running handed over: %s",
            len(left),
            ", ".join(run.task.id for run in left),
        )
    return len(left)
