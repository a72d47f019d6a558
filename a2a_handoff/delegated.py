"""What a delegation gives back: the sub-task's outcome, as the delegating handler reads it.

A delegation (`await ctx.delegation.ask(route, text)`) asks another agent for a sub-result while
the delegating task stays WORKING. Whatever happens, the handler gets a `Delegated`: the state
the sub-task reached — COMPLETED with its artifacts; INPUT_REQUIRED with the delegate's question
(`answer()` sends the reply); FAILED, REJECTED or CANCELED with the reason — never an exception
for something the handler could act on. A refusal before anything was sent (the capability
gate, the edge's contract, an unknown route) is REJECTED too, with `sent` False.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from a2a_handoff.protocol.extension import HANDOFF_EXTENSION_URI
from a2a_handoff.protocol.models import Artifact, Task
from a2a_handoff.protocol.states import TaskState

__all__ = ["MAX_OUTCOME_BYTES", "Delegated"]

# What the delegating task keeps of one outcome: its text cut to MAX_TEXT_CHARS, then its
# artifacts, whole and in order, while they fit in MAX_OUTCOME_BYTES (as JSON); the others
# are left out and named in `omitted` (the first MAX_OMITTED of them).
MAX_OUTCOME_BYTES = 64 * 1024
MAX_TEXT_CHARS = 8 * 1024
MAX_OMITTED = 32
MAX_NAME_CHARS = 200  # of an artifact left out: its id and name, as named in `omitted`


@dataclass(frozen=True, slots=True)
class Delegated:
    """The outcome of one delegation (or of one answer to it).

    `state`: the sub-task's state — terminal, or INPUT_REQUIRED / AUTH_REQUIRED when the
    delegate asks something (`question`); `text`: its status message (the answer, the
    question or the reason); `artifacts`: what it published. `task_id`: the sub-task at the
    delegate (None when nothing was sent). `round`: 0 for the delegation, n for the n-th
    answer to it. `omitted`: the artifacts left out, over the bound the delegating task keeps
    (`MAX_OUTCOME_BYTES`), each as {artifactId, name, bytes}; they stay at the delegate.
    """

    agent: str
    state: TaskState
    text: str = ""
    artifacts: tuple[Artifact, ...] = ()
    task_id: str | None = None
    key: str = ""
    round: int = 0
    sent: bool = True
    omitted: tuple[dict[str, Any], ...] = ()
    _answer: Callable[[Delegated, str], Awaitable[Delegated]] | None = field(
        default=None, repr=False, compare=False
    )

    @property
    def ok(self) -> bool:
        """Whether the delegate completed the sub-task."""
        return self.state is TaskState.COMPLETED

    @property
    def needs_input(self) -> bool:
        """Whether the delegate waits for an answer (`question`; reply with `answer()`)."""
        return self.state.interrupted

    @property
    def question(self) -> str | None:
        """What the delegate asks, while it waits for an answer."""
        return self.text if self.needs_input else None

    def data(self, name: str | None = None) -> Any:
        """The first data part of the artifact `name` (of any artifact when None), or None."""
        for artifact in self.artifacts:
            if name is not None and artifact.name != name:
                continue
            for part in artifact.parts:
                if part.data is not None:
                    return part.data
        return None

    async def answer(self, text: str) -> Delegated:
        """Reply to the delegate's question; its next outcome. Idempotent like the
        delegation: after a restart the same answer is not sent twice (the reply's id is
        derived from the delegation's key and the round)."""
        if not self.needs_input or self._answer is None or self.task_id is None:
            raise RuntimeError(f"the delegation to {self.agent} asks nothing ({self.state.name})")
        return await self._answer(self, text)

    def to_stored(self) -> dict[str, Any]:
        """The outcome as A's journal keeps it (the task's metadata)."""
        return {
            "state": self.state.value,
            "text": self.text,
            "artifacts": [a.dump() for a in self.artifacts],
            "taskId": self.task_id,
            "sent": self.sent,
            **({"omitted": list(self.omitted)} if self.omitted else {}),
        }

    @classmethod
    def from_stored(cls, agent: str, key: str, rnd: int, stored: dict[str, Any]) -> Delegated:
        """An outcome read back from the journal (a handler re-run after a restart)."""
        artifacts = tuple(Artifact.model_validate(a) for a in stored.get("artifacts") or ())
        return cls(
            agent,
            TaskState(stored["state"]),
            str(stored.get("text") or ""),
            artifacts,
            stored.get("taskId"),
            key,
            rnd,
            bool(stored.get("sent", True)),
            tuple(stored.get("omitted") or ()),
        )

    @classmethod
    def of_task(cls, agent: str, key: str, rnd: int, task: Task) -> Delegated:
        """The outcome the sub-task `task` (as the delegate answered it) says."""
        message = task.status.message
        text = message.text if message is not None else ""
        if len(text) > MAX_TEXT_CHARS:
            text = f"{text[:MAX_TEXT_CHARS]}… ({len(text) - MAX_TEXT_CHARS} characters more)"
        kept, omitted = _within(task.artifacts or (), MAX_OUTCOME_BYTES - len(text.encode()))
        return cls(agent, task.status.state, text, kept, task.id, key, rnd, omitted=omitted)


def timed_out(
    agent: str, key: str, rnd: int, within: float, task_id: str, final: Task | None
) -> Delegated:
    """The outcome of a sub-task `task_id` the delegating side stopped waiting for after
    `within` seconds and then canceled: `final` is how it ended — CANCELED by that cancel
    (saying whether it had recorded any work), or the outcome it reached first, adopted as
    the delegate's answer — or None when the delegate answered nothing (its state unknown)."""
    late = f"no answer from {agent} within {within:g} s"
    if final is None:
        return Delegated(
            agent,
            TaskState.FAILED,
            f"{late}, and its task {task_id} could not be canceled ({agent} did not answer):"
            " whether it did the work is unknown",
            task_id=task_id,
            key=key,
            round=rnd,
        )
    if final.status.state is not TaskState.CANCELED:
        return Delegated.of_task(agent, key, rnd, final)
    work = recorded_work(final)
    done = f"after it recorded work ({', '.join(work)})" if work else "before it recorded any work"
    said = f"{late}: its task {task_id} was canceled {done}"
    return Delegated(agent, TaskState.CANCELED, said, task_id=task_id, key=key, round=rnd)


def recorded_work(task: Task) -> list[str]:
    """What a task's journal says its handler did: its journaled steps, keyed tool calls and
    delegations, by name."""
    ext = (task.metadata or {}).get(HANDOFF_EXTENSION_URI)
    if not isinstance(ext, dict):
        return []
    kinds = (("step", "steps"), ("tool call", "toolCalls"), ("delegation", "delegations"))
    return [f"{kind} {name}" for kind, member in kinds for name in (ext.get(member) or {})]


def _within(
    artifacts: Sequence[Artifact], budget: int
) -> tuple[tuple[Artifact, ...], tuple[dict[str, Any], ...]]:
    """The artifacts kept (whole, in order, while their JSON fits `budget` bytes), and the
    ones left out, named."""
    kept: list[Artifact] = []
    omitted: list[dict[str, Any]] = []
    for artifact in artifacts:
        size = len(artifact.dump_json().encode())
        if size <= budget:
            kept.append(artifact)
            budget -= size
        elif len(omitted) < MAX_OMITTED:
            # Cut: a hostile delegate's names of any length would not be bounded otherwise.
            left = {
                "artifactId": _cut(artifact.artifact_id),
                "name": _cut(artifact.name),
                "bytes": size,
            }
            omitted.append({k: v for k, v in left.items() if v is not None})
    return tuple(kept), tuple(omitted)


def _cut(name: str | None) -> str | None:
    return name if name is None or len(name) <= MAX_NAME_CHARS else name[:MAX_NAME_CHARS] + "…"
