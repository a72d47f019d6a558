"""Failpoints for crash tests: `A2A_HANDOFF_FAILPOINT=<name>` kills the process there.

The exit is immediate (`os._exit`: no cleanup, no flush, no finally blocks), like `kill -9`.
Names: `handoff.after_checkpoint`, `handoff.after_create`, `handoff.after_terminate`,
`receive.after_create`, `gateway.after_send` (the gateway's message taken by the agent, its
answer not yet relayed), `delegate.after_checkpoint`, `delegate.after_send`,
`delegate.after_answer` (the delegate's outcome known, not yet recorded),
`delegate.after_record` (recorded — a delegation's outcome or an answer's — the handler not
yet resumed), `step.after_record` (a journaled step's result committed, not yet returned).
A testing tool only: never set it in production. `pausepoint` (below) holds a write instead.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

ENV_VAR = "A2A_HANDOFF_FAILPOINT"
NAMES = frozenset(
    {
        "handoff.after_checkpoint",
        "handoff.after_create",
        "handoff.after_terminate",
        "receive.after_create",
        "gateway.after_send",
        "delegate.after_checkpoint",
        "delegate.after_send",
        "delegate.after_answer",
        "delegate.after_record",
        "step.after_record",
    }
)
EXIT_CODE = 137


# Read once, as a process starts (a crash test arms it in the environment it starts the
# process with): a failpoint is passed several times a handoff, and an environment look-up
# of a name that is not set costs more than the rest of it.
_ARMED = os.environ.get(ENV_VAR, "")


def failpoint(name: str) -> None:
    """Exit at once when the failpoint `name` is armed."""
    if name == _ARMED:
        sys.stderr.write(f"failpoint {name}: exiting\n")
        sys.stderr.flush()
        os._exit(EXIT_CODE)


PAUSE_VAR = "A2A_HANDOFF_PAUSE"
PAUSE_FILE_VAR = "A2A_HANDOFF_PAUSE_FILE"
_PAUSE = os.environ.get(PAUSE_VAR, "")


async def pausepoint(name: str) -> None:
    """Wait forever at `name` when `A2A_HANDOFF_PAUSE=<name>` (creating the file that
    `A2A_HANDOFF_PAUSE_FILE` names first): the write that follows never happens, while the
    rest of the process goes on — a crash test's window held open, to `kill -9` the process
    in. Names: `task.before_create` (a new task's first write), `task.before_accept` (a
    follow-up's or a resumed run's first write), `step.before_record` (a journaled step's
    result), `tool.before_record` (a keyed tool call's), `handoff.before_send` (a delivery's
    try, its card read), `handoff.after_create` (the target's answer in, the source not yet
    terminated), `service.before_close` (the app's close, once the server stopped: a close
    that hangs). A testing tool only."""
    if name != _PAUSE:
        return
    marker = os.environ.get(PAUSE_FILE_VAR)
    if marker:  # a few bytes, once, in a test: written where the loop is
        Path(marker).write_text(f"{name}\n")  # noqa: ASYNC240
    sys.stderr.write(f"pausepoint {name}: waiting\n")
    sys.stderr.flush()
    await asyncio.Event().wait()
