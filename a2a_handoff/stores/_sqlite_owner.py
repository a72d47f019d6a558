"""One SQLite file, one owner: an OS lock a second process cannot take.

A store that owns its file treats every task it finds running at start-up as left by a dead
process, and fails it. A second process opening a file another one serves would fail that
one's live tasks, so it must not start: the owner holds an exclusive `flock` on a file next
to the database (`<file>-owner`, holding its pid and command line for the error message),
and the kernel drops the lock when the owner dies, `kill -9` included — no stale lock to
clean up. Several processes may still share one file on purpose (`?shared=1`): then none
takes the lock and leases say which process runs what, as with Redis.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import sys
import time
from pathlib import Path
from typing import IO

from a2a_handoff.errors import StoreError


class OwnerLock:
    """The exclusive lock on a database file, held from `acquire()` until `release()`."""

    def __init__(self, database: Path) -> None:
        self.path = database.with_name(database.name + "-owner")
        self._file: IO[str] | None = None

    def acquire(self) -> None:
        """Take the lock, or raise StoreError naming the process that has it."""
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)  # its command line: ours only
        handle = open(fd, "r+", encoding="utf-8")  # noqa: SIM115 - held until release
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.seek(0)
            owner = _describe(handle.read())
            handle.close()
            database = str(self.path)[: -len("-owner")]
            raise StoreError(
                f"the SQLite file {database} is already served by another process ({owner});"
                " stop that one first, or open the store with ?shared=1 if replicas of the"
                " same agent are meant to share the file (another agent needs a store of its"
                " own)"
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(
            json.dumps({"pid": os.getpid(), "command": " ".join(sys.argv), "since": time.time()})
        )
        handle.flush()
        self._file = handle

    def release(self) -> None:
        if self._file is not None:
            with contextlib.suppress(OSError):
                self._file.seek(0)
                self._file.truncate()  # nothing of this process stays behind it
                self._file.close()  # closing the descriptor drops the lock
            self._file = None


def _describe(text: str) -> str:
    """ "pid 1234: python -m servers echo …, since 12:00:00" from the lock file's contents."""
    try:
        owner = json.loads(text)
        since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(float(owner["since"])))
        return f"pid {int(owner['pid'])}: {str(owner['command'])[:200]}, since {since}"
    except (ValueError, KeyError, TypeError):
        return "a process whose details are unknown"
