"""Schema versions: the migrations a backend knows, where a store stands, and whether this code
may use it.

Every backend that keeps a schema (SQLite, PostgreSQL) or a key layout (Redis) numbers it: a
store is at version n once migrations 1…n ran on it; the code is at `len(migrations)`. A
store that does not exist yet is made at the code's version when it is opened. A store
*behind* the code is refused at open, naming the command that brings it up
(`python -m a2a_handoff db upgrade --store URL`): a migration is an operator's act, run once,
not a side effect of whichever replica starts first.

During a rolling upgrade old and new replicas share one store, so every migration says what
older code may still do once it ran (`Migration.kind`):

- `expand`: code of the previous version keeps working on the store (something was only
  added). Rolled out by upgrading first, then restarting the replicas one by one.
- `contract`: code of the previous version keeps working (what it removes only the version
  before that used). The same, once no replica older than the previous version is left.
- `breaking`: code of the previous version cannot use the store. Every replica is stopped,
  the store upgraded, the new replicas started.

A change that removes something is shipped as an expand step in one version (the code
writes the new shape and reads both) and its contract step in the next.

A store keeps, beside its version, the oldest code version that may use it
(`compatible_from`, the largest `oldest_code` of the migrations applied). Code that finds a
store *ahead* of it uses it when `compatible_from` allows, and refuses it otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from a2a_handoff.errors import StoreVersionError

KINDS = ("expand", "contract", "breaking")


@dataclass(frozen=True, slots=True)
class Migration:
    """One step: from version `version - 1` to `version`, named, of a `kind` (see above)."""

    version: int
    name: str
    kind: str

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"a migration's kind is one of {KINDS}, not {self.kind!r}")

    @property
    def oldest_code(self) -> int:
        """The oldest code version that may use a store this migration ran on."""
        if self.kind == "expand":
            return 0
        return self.version - 1 if self.kind == "contract" else self.version


def compatible_from(migrations: tuple[Migration, ...], version: int) -> int:
    """The oldest code version that may use a store at `version` (of `migrations`)."""
    return max((m.oldest_code for m in migrations[:version]), default=0)


@dataclass(frozen=True, slots=True)
class SchemaStatus:
    """Where a store stands: its version (0 when it does not exist yet), the code's, the oldest
    code version that may use it, and the migrations it is missing (none for a store that
    does not exist: an agent makes it whole, and `db upgrade` leaves it alone)."""

    where: str  # what was looked at: "SQLite file data/billing.db", "PostgreSQL schema …"
    current: int
    code: int
    compatible_from: int
    pending: tuple[Migration, ...]
    exists: bool = True  # False: nothing there yet (made at the code's version when opened)

    @property
    def behind(self) -> bool:
        """An existing store missing migrations: refused until upgraded."""
        return self.exists and self.current < self.code

    @property
    def ahead(self) -> bool:
        return self.current > self.code

    @property
    def usable(self) -> bool:
        """Whether this code may open the store."""
        return not self.behind and self.compatible_from <= self.code

    def to_json(self) -> dict[str, Any]:
        return {
            "store": self.where,
            "exists": self.exists,
            "current": self.current,
            "code": self.code,
            "compatibleFrom": self.compatible_from,
            "upToDate": not self.pending and not self.behind,
            "usable": self.usable,
            "pending": [
                {"version": m.version, "name": m.name, "kind": m.kind} for m in self.pending
            ],
        }

    def render(self) -> str:
        """The status as `db status` prints it."""
        if not self.exists:
            return (
                f"{self.where} does not exist yet: an agent opening it makes it at this"
                f" code's version, {self.code}"
            )
        lines = [f"{self.where} is at version {self.current}; this code is at version {self.code}"]
        if self.ahead:
            verdict = "usable" if self.usable else "NOT usable"
            lines.append(
                f"the store is ahead of this code: {verdict} by it (compatible from version"
                f" {self.compatible_from})"
            )
        if self.pending:
            lines.append("pending migrations:")
            lines += [f"  {m.version}  {m.name} ({m.kind})" for m in self.pending]
        elif not self.ahead:
            lines.append("up to date")
        return "\n".join(lines)


def status_of(
    where: str,
    migrations: tuple[Migration, ...],
    current: int,
    kept_compatible_from: int | None,
    *,
    exists: bool = True,
) -> SchemaStatus:
    """A store's status from its version and the `compatible_from` it keeps (None: it keeps
    none, as a store an older version made: computed from the migrations known)."""
    code = len(migrations)
    if kept_compatible_from is None:
        kept_compatible_from = compatible_from(migrations, min(current, code))
    pending = tuple(migrations[current:]) if exists else ()  # a new store is made whole
    return SchemaStatus(where, current, code, kept_compatible_from, pending, exists)


def upgrade_command(url: str) -> str:
    """The command that upgrades the store at `url` (a password in it left out)."""
    parts = urlsplit(url)
    if parts.password:
        host = parts.netloc.rpartition("@")[2]
        user = parts.username or ""
        url = parts._replace(netloc=f"{user}:PASSWORD@{host}").geturl()
    return f"python -m a2a_handoff db upgrade --store '{url}'"


def check_usable(status: SchemaStatus, url: str) -> None:
    """StoreVersionError when this code may not open the store `status` describes: behind it
    (naming the command that upgrades it), or ahead of it and not compatible."""
    if status.behind:
        names = ", ".join(f"{m.version} {m.name}" for m in status.pending)
        raise StoreVersionError(
            f"{status.where} is at version {status.current}, behind this code's"
            f" {status.code} (pending: {names}): stop its replicas if a pending migration is"
            f" breaking, then run `{upgrade_command(url)}`"
        )
    if not status.usable:
        raise StoreVersionError(
            f"{status.where} is at version {status.current}, newer than this code knows"
            f" ({status.code}) and usable only from version {status.compatible_from}: run"
            " this agent's newer version"
        )
