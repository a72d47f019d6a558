"""The SQLite store's one writer: group commit on a queue of writes.

Every write is a function of the writer connection, queued; the writer applies a whole batch
in one transaction (`BEGIN IMMEDIATE`), each write in a savepoint so one failing write fails
alone, commits once, and only then resumes the callers — so nothing is answered before it is
durable — and publishes what each write asked to publish, in commit order.

Where the work runs, measured (bench/): a batch's statements run on the event loop's own
thread (microseconds each: handing them to a writer thread, as aiosqlite does, cost more in
hand-offs and GIL contention than the statements themselves on a server given one core);
only the COMMIT of a batch of several writes — the fsync, which holds no GIL — is handed to a
dedicated thread, so the loop serves the next requests while the disk works, and they form
the next batch; a batch of one (no concurrency to overlap with) commits inline, which is
~0.3 ms faster per request at one connection. `committing` is true while a batch's
transaction is open across that await: point readers then use a WAL reader instead of the
writer connection, whose uncommitted pages they must not see.

A failed commit is remembered (`failure`) until a later one succeeds: the store is failing
writes, and /health says so.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from a2a_handoff.errors import StoreError
from a2a_handoff.observe import events

Apply = Callable[[sqlite3.Connection], Any]
"""One write: statements on the writer connection, inside the batch's transaction."""
Publish = Callable[[], None]
"""Run once the write is committed (hand its events to followers)."""


@dataclass(slots=True)
class _Write:
    apply: Apply
    publish: Publish | None
    future: asyncio.Future[Any]


def run_batch(conn: sqlite3.Connection, batch: list[_Write]) -> list[tuple[bool, Any]]:
    """Apply a batch in one open transaction, each write in its own savepoint.

    A batch of one needs no savepoint: its failure rolls the whole transaction back. The
    caller commits (see `GroupCommit._commit`).
    """
    outcomes: list[tuple[bool, Any]] = []
    conn.execute("BEGIN IMMEDIATE")
    try:
        if len(batch) == 1:
            try:
                outcomes.append((True, batch[0].apply(conn)))
            except Exception as exc:
                conn.execute("ROLLBACK")
                return [(False, exc)]
        else:
            for write in batch:
                conn.execute("SAVEPOINT w")
                try:
                    outcomes.append((True, write.apply(conn)))
                except Exception as exc:
                    conn.execute("ROLLBACK TO w")
                    outcomes.append((False, exc))
                conn.execute("RELEASE w")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return outcomes


class GroupCommit:
    """The writer: a queue of writes, applied and committed in batches (see above)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        # Used by the loop's thread and, for COMMIT only, by the fsync thread — never both
        # at once: the write loop awaits each commit before the next batch.
        self.conn = conn
        self.committing = False  # a batch's transaction is open while its COMMIT runs
        self.batches = 0
        self.failure: str | None = None  # the last commit's error, until one succeeds
        self._fsync: ThreadPoolExecutor | None = ThreadPoolExecutor(
            1, thread_name_prefix="sqlite-commit"
        )
        self._queue: list[_Write] = []
        # What the idle write loop waits on (a bare future, not an `asyncio.Event`: one wait
        # per batch, whose coroutine, waiter deque and clearing cost more than the future).
        self._wakeup: asyncio.Future[None] | None = None
        self._closing = False
        self._loop_task = asyncio.create_task(self._write_loop(), name="sqlite-group-commit")

    async def submit(self, apply: Apply, publish: Publish | None = None) -> Any:
        """Queue a write; its result once its batch committed (its exception otherwise)."""
        if self._closing:
            raise StoreError("the store is not open")
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._queue.append(_Write(apply, publish, future))
        self._wake()
        return await future

    def _wake(self) -> None:
        wakeup, self._wakeup = self._wakeup, None
        if wakeup is not None and not wakeup.done():
            wakeup.set_result(None)

    async def aclose(self) -> None:
        """Commit what is queued, then stop."""
        self._closing = True
        self._wake()
        await self._loop_task
        if self._fsync is not None:
            self._fsync.shutdown(wait=True)
            self._fsync = None

    async def _write_loop(self) -> None:
        while True:
            if not self._queue and not self._closing:
                self._wakeup = asyncio.get_running_loop().create_future()
                await self._wakeup
            self.batches += 1
            batch, self._queue = self._queue, []
            if batch:
                await self._commit(batch)
            if self._closing and not self._queue:
                return

    async def _commit(self, batch: list[_Write]) -> None:
        writer = self.conn
        started = time.perf_counter()
        try:
            outcomes = run_batch(writer, batch)
            if writer.in_transaction:
                try:
                    if len(batch) == 1:  # nothing else is waiting: skip the hand-off
                        writer.execute("COMMIT")
                    else:
                        loop = asyncio.get_running_loop()
                        self.committing = True
                        try:
                            await loop.run_in_executor(self._fsync, writer.execute, "COMMIT")
                        finally:
                            self.committing = False
                except BaseException:
                    if writer.in_transaction:
                        writer.execute("ROLLBACK")
                    raise
        except Exception as exc:
            self.failure = f"{type(exc).__name__}: {exc}"
            error = StoreError(f"the SQLite store could not commit: {exc}")
            for write in batch:
                if not write.future.done():
                    write.future.set_exception(error)
            return
        events.commit(started, len(batch))
        if any(ok for ok, _ in outcomes):
            self.failure = None
        for write, (ok, value) in zip(batch, outcomes, strict=True):
            if not ok and _is_io_failure(value):
                self.failure = f"{type(value).__name__}: {value}"
            if ok and write.publish is not None:
                write.publish()
            if write.future.done():  # the caller was cancelled; the write stands
                continue
            if ok:
                write.future.set_result(value)
            elif isinstance(value, sqlite3.Error) and _is_io_failure(value):
                write.future.set_exception(StoreError(f"the SQLite store failed: {value}"))
            else:
                write.future.set_exception(value)


def _is_io_failure(error: object) -> bool:
    """An error of the file rather than of the write (corruption, I/O, full disk)."""
    return isinstance(error, sqlite3.DatabaseError) and not isinstance(
        error, sqlite3.IntegrityError | sqlite3.ProgrammingError
    )
