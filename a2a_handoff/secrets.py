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
            secret = read_private(path, what).strip()
        except OSError as exc:
            raise SecretError(f"{what}: cannot read {path}: {exc.strerror or exc}") from None
        if not secret:
            raise SecretError(f"{what}: {path} is empty")
        return secret
    raise SecretError(f"{what}: {HOW}")


INSECURE_FILES_ENV = "A2A_ALLOW_INSECURE_FILES"
_accepted = [False]


def accept_insecure_files() -> None:
    """Accept, for this process, files of secrets that another user owns or can read
    (`--allow-insecure-files`, or ${A2A_ALLOW_INSECURE_FILES}=1): each is then named in a
    WARNING line instead of refused."""
    _accepted[0] = True


def insecure_files_accepted() -> bool:
    return _accepted[0] or os.environ.get(INSECURE_FILES_ENV) == "1"


def check_private(path: Path, what: str) -> None:
    """SecretError unless `path` is this user's own file that no other user can read or
    change: another user could have put it there (keys of their choosing), or reads what it
    holds. With the risk accepted (`accept_insecure_files`), one WARNING line instead. A
    file read by this process is better read by `read_private`, which checks the very file
    it opened."""
    try:
        status = path.stat()
    except OSError:
        return  # not there: whoever reads it says so
    _check_status(status, path, what)


def read_private(path: Path, what: str) -> str:
    """The text of `path`, checked as `check_private` does on the file opened (not on the
    name, which another user could point elsewhere between a check and a read). OSError
    when it cannot be read."""
    with path.open(encoding="utf-8") as handle:
        _check_status(os.fstat(handle.fileno()), path, what)
        return handle.read()


def _check_status(status: os.stat_result, path: Path, what: str) -> None:
    problem = None
    if status.st_uid != os.geteuid():
        problem = f"belongs to uid {status.st_uid}, not to this user ({os.geteuid()})"
    elif status.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
        problem = f"is readable by other users (mode {stat.S_IMODE(status.st_mode):o})"
    if problem is None:
        return
    if insecure_files_accepted():
        log.warning("INSECURE: %s: %s %s (accepted: --allow-insecure-files)", what, path, problem)
        return
    raise SecretError(
        f"{what}: {path} {problem}: make it yours and mode 600 (chmod 600 {path}), or accept"
        f" the risk with --allow-insecure-files (${INSECURE_FILES_ENV}=1)"
    )


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
        _warn_if_shared(path, "store")


def _warn_if_shared(path: Path, what: str) -> None:
    try:
        mode = path.stat().st_mode
    except OSError:
        return
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        shown = f"{stat.S_IMODE(mode):o}"
        log.warning(
            "INSECURE: %s: %s is readable by other users (mode %s): chmod 600 %s",
            what,
            path,
            shown,
            path,
        )
