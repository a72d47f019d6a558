"""Secrets given to a command: never on its command line.

A command line is visible to every local user (`ps`, `/proc/PID/cmdline`), so an option that
takes a secret — an API key, a credential — takes where to read it instead: `@PATH` (the
file's content, stripped; the file should be readable by its owner only) or `env:NAME` (an
environment variable). A literal value is refused with a message saying how to pass it.
"""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

log = logging.getLogger("a2a_handoff.secrets")

HOW = (
    "a secret on the command line is visible to every local user (ps): write it to a file"
    " readable only by you (chmod 600) and pass @FILE, or put it in an environment variable"
    " and pass env:NAME"
)


class SecretError(ValueError):
    """A secret given the wrong way, or that cannot be read."""


def read_secret(value: str, what: str) -> str:
    """The secret `value` points at (`@PATH` or `env:NAME`); SecretError for a literal."""
    if value.startswith("env:"):
        name = value[4:]
        secret = os.environ.get(name)
        if not name or not secret:
            raise SecretError(f"{what}: the environment variable {name!r} is not set")
        return secret
    if value.startswith("@"):
        path = Path(value[1:])
        try:
            secret = path.read_text().strip()
        except OSError as exc:
            raise SecretError(f"{what}: cannot read {path}: {exc.strerror or exc}") from None
        if not secret:
            raise SecretError(f"{what}: {path} is empty")
        warn_if_shared(path, what)
        return secret
    raise SecretError(f"{what}: {HOW}")


def warn_if_shared(path: Path, what: str) -> None:
    """Say so, in one WARNING line, when a file holding secrets is readable by others."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        log.warning(
            "INSECURE: %s: %s holds secrets and is readable by other users (mode %o):"
            " chmod 600 %s",
            what, path, stat.S_IMODE(mode), path,
        )  # fmt: skip


def private_dir(path: Path) -> None:
    """Make directory `path` (and its parents) if missing, the new ones mode 0700."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)


def create_private(path: Path) -> None:
    """Create file `path`, empty and mode 0600, unless it exists (a store's file: everything
    its agent was told is in it). An existing file readable by others is named in a WARNING
    line."""
    try:
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
    except FileExistsError:
        warn_if_shared(path, "store")
