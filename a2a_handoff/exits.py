"""The exit codes of the three command lines (`python -m orchestrator`, `python -m servers`,
`python -m a2a_handoff`): one table, shown in each one's `--help` and in the README."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from enum import IntEnum
from typing import NoReturn


class ExitCode(IntEnum):
    COMPLETED = 0  # done: the task completed, the command did what it was asked
    FAILED = 1  # failed, rejected or canceled (or refused: a lint error, a loop stopped)
    INPUT_REQUIRED = 2  # an agent asks for input (or for authentication)
    UNREACHABLE = 3  # an agent could not be reached
    PENDING = 4  # not there yet after --wait: a handoff in an outbox, work still going on
    REFUSED = 5  # a transfer pointer not followed (untrusted origin)
    NOT_DELIVERED = 6  # the message was not delivered: the task was still busy after --wait
    USAGE = 64  # a usage error: bad or missing arguments, nothing to work on
    INTERRUPTED = 130  # Ctrl-C, or the reader of the output went away (a closed pipe)


EXIT_TABLE = """exit codes (the same for python -m orchestrator, servers, a2a_handoff):
  0    completed
  1    failed, rejected or canceled (lint: a contract has an error)
  2    an agent asks for input
  3    an agent could not be reached
  4    still pending after --wait (a handoff in an outbox, a task still working)
  5    a transfer pointer refused: its origin is not trusted
  6    the message was not delivered: the task was still busy after --wait
  64   usage error (bad or missing arguments, no conversation yet)
  130  interrupted (Ctrl-C, or the output pipe closed)"""


class Parser(argparse.ArgumentParser):
    """argparse, with usage errors exiting 64 (argparse's own 2 means "input required" here)
    and the exit-code table at the end of `--help`."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        kwargs.setdefault("formatter_class", argparse.RawDescriptionHelpFormatter)
        kwargs.setdefault("epilog", EXIT_TABLE)
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(int(ExitCode.USAGE), f"{self.prog}: error: {message}\n")


def quiet_pipe(main: Callable[[], int]) -> int:
    """Run `main`; a reader that went away (`| head`) ends it quietly, exit 130."""
    try:
        code = main()
        sys.stdout.flush()
        return code
    except BrokenPipeError:
        # Python would complain again when it flushes stdout at exit: point it at nothing.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return int(ExitCode.INTERRUPTED)
    except KeyboardInterrupt:
        return int(ExitCode.INTERRUPTED)
