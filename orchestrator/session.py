"""The conversation as kept on disk, so that the next `send` or a restarted `chat` resumes."""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from a2a_handoff import TaskState


def default_session_path() -> Path:
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "a2a-handoff" / "session.json"


@dataclass
class Hop:
    """One task of the conversation's chain."""

    agent_url: str
    agent_name: str
    task_id: str
    state: str
    reason: str = ""
    at: str = ""


@dataclass
class Session:
    """Who owns the conversation now, its current task, and the chain so far."""

    entry: str | None = None
    context_id: str | None = None
    owner_url: str | None = None
    owner_name: str | None = None
    task_id: str | None = None
    state: str | None = None
    awaiting_operator: bool = False  # the task waits for a human operator, not for the user
    chain: list[Hop] = field(default_factory=list)

    @classmethod
    def load(cls, path: Path) -> Session:
        """The session kept at `path` (a new one when there is none); SessionDamaged when the
        file is not a session this CLI wrote (not JSON, not an object, fields of the wrong
        type): nothing of it is used but a well-formed entry URL (`SessionDamaged.entry`)."""
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return cls()
        except (OSError, UnicodeDecodeError) as exc:
            raise SessionDamaged(f"unreadable: {exc}") from None
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise SessionDamaged(f"not JSON: {exc}") from None
        if not isinstance(data, dict):
            raise SessionDamaged(f"a JSON {type(data).__name__}, not an object")
        try:
            return _parse(data)
        except ValueError as exc:
            entry = data.get("entry")
            raise SessionDamaged(str(exc), entry if _is_url(entry) else None) from None

    def restart(self) -> None:
        """A new conversation at the same entry agent (in place: its holders keep it)."""
        entry = self.entry
        self.__dict__.update(vars(Session(entry=entry)))

    def save(self, path: Path) -> None:
        """Atomically: a crash leaves the old or the new file, never half of one."""
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".session-")
        with os.fdopen(fd, "w") as out:
            json.dump(asdict(self), out, indent=2)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)

    def record(self, hop: Hop) -> None:
        """Set the current task, updating its hop in the chain or appending a new one."""
        self.owner_url, self.owner_name = hop.agent_url, hop.agent_name
        self.task_id, self.state = hop.task_id, hop.state
        for existing in self.chain:
            if existing.agent_url == hop.agent_url and existing.task_id == hop.task_id:
                existing.state = hop.state
                existing.reason = hop.reason or existing.reason
                return
        self.chain.append(hop)


class SessionDamaged(ValueError):
    """A session file that cannot be used; `entry` is its entry URL when that much is sound."""

    def __init__(self, reason: str, entry: str | None = None) -> None:
        super().__init__(reason)
        self.entry = entry


def _is_url(value: object) -> bool:
    return isinstance(value, str) and value.startswith(("http://", "https://"))


def _text(data: dict[str, Any], name: str, url: bool = False) -> str | None:
    value = data.get(name)
    if value is None:
        return None
    if not isinstance(value, str) or (url and not _is_url(value)):
        raise ValueError(f"{name!r} is {value!r:.60}, not {'a URL' if url else 'text'}")
    return value


def _parse(data: dict[str, Any]) -> Session:
    """A session from its JSON object, every field checked (unknown members are ignored)."""
    state = _text(data, "state")
    if state is not None and state not in {s.value for s in TaskState}:
        raise ValueError(f"'state' is {state!r:.60}, not a task state")
    awaiting = data.get("awaiting_operator", False)
    if not isinstance(awaiting, bool):
        raise ValueError("'awaiting_operator' is not true or false")
    raw_chain = data.get("chain", [])
    if not isinstance(raw_chain, list):
        raise ValueError("'chain' is not a list")
    chain = []
    for hop in raw_chain:
        if not isinstance(hop, dict):
            raise ValueError("a hop of 'chain' is not an object")
        values = {f.name: hop.get(f.name, f.default) for f in fields(Hop)}
        if not all(isinstance(v, str) for v in values.values()) or not _is_url(hop["agent_url"]):
            raise ValueError("a hop of 'chain' is not a task of an agent")
        chain.append(Hop(**values))
    return Session(
        entry=_text(data, "entry", url=True),
        context_id=_text(data, "context_id"),
        owner_url=_text(data, "owner_url", url=True),
        owner_name=_text(data, "owner_name"),
        task_id=_text(data, "task_id"),
        state=state,
        awaiting_operator=awaiting,
        chain=chain,
    )
