"""The conversation as kept on disk, so that the next `send` or a restarted `chat` resumes."""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any


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
        if not path.exists():
            return cls()
        data: dict[str, Any] = json.loads(path.read_text())
        chain = [Hop(**hop) for hop in data.pop("chain", [])]
        return cls(**data, chain=chain)

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
