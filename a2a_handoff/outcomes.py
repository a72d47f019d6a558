"""How a handler's step ends: the outcomes it may return (None completes the task).

Plain frozen data. The runtime carries them out: `Completed`, `InputRequired`, `Failed` and
`Rejected` become the task's state; a `Handoff` (or an `Escalate`, a handoff to the human
agent) runs the three-phase handoff; a `Reply` answers with a direct Message and no task —
when nothing of the task was written yet (see `Reply`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from a2a_handoff.escalation import Escalate, Escalation
from a2a_handoff.protocol.agent_card import AgentCard
from a2a_handoff.protocol.models import Part

if TYPE_CHECKING:  # imported when contracts are used: jsonschema is slow to import
    from a2a_handoff.contracts.contract import Contract

__all__ = [
    "Completed",
    "Failed",
    "Handoff",
    "InputRequired",
    "Outcome",
    "Rejected",
    "Reply",
    "Route",
]


@dataclass(frozen=True, slots=True)
class Completed:
    """End the task COMPLETED, optionally with a closing message."""

    message: str | None = None


@dataclass(frozen=True, slots=True)
class InputRequired:
    """Pause the task INPUT_REQUIRED; the caller's next message (same taskId) resumes it."""

    question: str


MAX_REASON = 300  # characters of an exception's message in a failed task's reason


@dataclass(frozen=True, slots=True)
class Failed:
    """End the task FAILED with a reason the caller can read.

    `kind` names the class of failure (an exception's type name when the handler raised):
    the repeated-failure rule counts failures of one kind per context.
    """

    reason: str
    kind: str = "failed"

    @classmethod
    def raised(cls, exc: BaseException) -> Failed:
        """The failure of a handler that raised `exc`, as one line the caller can read:
        `KeyError: 'missing'` (the exception's type, then the first line of its message)."""
        name = type(exc).__name__
        said = (str(exc).strip().splitlines() or [""])[0]
        if len(said) > MAX_REASON:
            said = said[: MAX_REASON - 1] + "…"
        return cls(f"{name}: {said}" if said else name, kind=name)


@dataclass(frozen=True, slots=True)
class Rejected:
    """Refuse the task: it ends REJECTED with the reason."""

    reason: str


@dataclass(frozen=True, slots=True)
class Reply:
    """Answer with a direct Message (A2A's message-only answer): no task is created.

    `SendMessage` answers `{"message": …}`, `SendStreamingMessage` a stream of that one
    Message. It must come before the handler emitted anything (a status, an artifact, a
    notice) on a new task that was not received by handoff. For a blocking `SendMessage` the
    new task is written only once its handler emits something or ends, so the handler may
    await (a model, say) and then reply. A stream or a `returnImmediately` caller gets the task
    as soon as the handler first waits: reply before that. With a store shared by replicas the
    task is always written before the handler runs. Where the task exists already (and on a
    follow-up), a `Reply` completes it with the message as its status message. A direct reply
    is not stored, so the same message id sent again runs the handler again.
    """

    text: str | None = None
    parts: Sequence[Part] = ()
    data: Any = None

    def all_parts(self) -> list[Part]:
        """The message's parts: `parts`, then the text, then the data."""
        parts = list(self.parts)
        if self.text is not None:
            parts.append(Part(text=self.text))
        if self.data is not None:
            parts.append(Part(data=self.data))
        if not parts:
            raise ValueError("a reply needs a text, data or at least one part")
        return parts


@dataclass(frozen=True, slots=True)
class Handoff:
    """Give the task to another agent: it ends TRANSFERRED, pointing at the successor task.

    `target` is a route name the agent was configured with (or an agent URL); `context` is
    the transfer context — a bounded, typed summary, never the raw transcript.
    `required` capabilities must be offered by the target and allowed by this agent's scope.
    """

    target: str
    reason: str
    context: Mapping[str, Any] = field(default_factory=dict)
    required: tuple[str, ...] = ()
    next_skill: str | None = None
    continuation_token: str | None = None
    kind: str = "handoff"  # "escalation" to a human agent, "return" of its decision

    @classmethod
    def to_human(
        cls, escalation: Escalation, *, blocking: bool = True, reason: str | None = None
    ) -> Handoff:
        """An escalation as a handoff to the human agent: blocking (kind `escalation`: the
        task waits for the decision) or not (kind `notice`: the task goes on)."""
        said = "escalated" if blocking else "for your information"
        return cls(
            target=escalation.target,
            reason=reason or f"{said} ({escalation.trigger}): {escalation.what_is_needed}",
            context={
                "escalation": escalation.to_json("blocking" if blocking else "non-blocking"),
                "resume": dict(escalation.resume),
                "summary": escalation.what_happened,
            },
            kind="escalation" if blocking else "notice",
        )


Outcome = Completed | InputRequired | Failed | Rejected | Reply | Handoff | Escalate


@dataclass(frozen=True, slots=True)
class Route:
    """A route as a handler may see it before handing off: the target's card (None while it
    cannot be fetched) and the contract of the edge to it (None: no contract applies)."""

    name: str
    url: str
    card: AgentCard | None
    contract: Contract | None
