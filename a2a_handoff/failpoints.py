"""Failpoints for crash tests: `A2A_HANDOFF_FAILPOINT=<name>` kills the process there.

The exit is immediate (`os._exit`: no cleanup, no flush, no finally blocks), like `kill -9`.
Names: `handoff.after_checkpoint`, `handoff.after_create`, `handoff.after_terminate`,
`receive.after_create`, `gateway.after_send` (the gateway's message taken by the agent, its
answer not yet relayed), `delegate.after_checkpoint`, `delegate.after_send`,
`delegate.after_answer` (the delegate's outcome known, not yet recorded),
`delegate.after_record` (recorded — a delegation's outcome or an answer's — the handler not
yet resumed). A testing tool only:
never set it in production.
"""

from __future__ import annotations

import os
import sys

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
    }
)
EXIT_CODE = 137


def failpoint(name: str) -> None:
    """Exit at once when the failpoint `name` is armed."""
    if os.environ.get(ENV_VAR) == name:
        sys.stderr.write(f"failpoint {name}: exiting\n")
        sys.stderr.flush()
        os._exit(EXIT_CODE)
