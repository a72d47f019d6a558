"""The handoff envelope: what one agent sends another when it gives a task away.

The same frozen model validates the envelope on both sides. Its idempotency key is derived,
not random — HMAC-SHA256 of the chain's root key and the hop number — so replaying a handoff
(after a crash, a lost reply, a retry) reproduces the key and the target creates its task at
most once.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from datetime import datetime, timedelta
from typing import Any, Literal

from pydantic import ConfigDict, Field

from a2a_handoff.protocol.extension import DEFAULT_TTL_SECONDS
from a2a_handoff.protocol.models import WireModel, parse_time


class SourceRef(WireModel):
    model_config = ConfigDict(frozen=True)

    agent: str
    url: str
    task_id: str

    def as_wire(self) -> dict[str, str]:
        """`dump()`, written out: every member is a required string (a received task records
        it; pydantic's serializer costs more than the three members)."""
        return {"agent": self.agent, "url": self.url, "taskId": self.task_id}


class TargetRef(WireModel):
    model_config = ConfigDict(frozen=True)

    agent: str
    url: str


class HandoffEnvelope(WireModel):
    """Every field DESIGN §4 lists; camelCase on the wire."""

    model_config = ConfigDict(frozen=True)

    handoff_id: str = Field(min_length=1)
    idempotency_key: str = Field(min_length=16)
    root_key: str = Field(min_length=16)
    context_id: str = Field(min_length=1)
    source: SourceRef
    target: TargetRef
    reason: str
    transfer_context: dict[str, Any] = Field(default_factory=dict)
    required_capabilities: list[str] = Field(default_factory=list)
    continuation_token: str | None = None
    next_skill_hint: str | None = None
    hop: int = Field(ge=1)
    visited: list[str] = Field(default_factory=list)
    trace_id: str = Field(min_length=1)
    created_at: str
    ttl_seconds: int = Field(default=DEFAULT_TTL_SECONDS, ge=1, le=86400)
    on_behalf_of: str | None = None  # the source task's owner: may read the successor too
    # handoff: a task given away; escalation / notice: a blocking / non-blocking escalation
    # to a human agent; return: the human's decision handed back to the agent that escalated;
    # delegation: a sub-task asked for, the source keeping its task (`ctx.delegation.ask`).
    kind: Literal["handoff", "escalation", "notice", "return", "delegation"] = "handoff"
    contract: str | None = None  # `id@version` of the handoff contract of this edge, if any

    @property
    def summary(self) -> str:
        """What the successor's handler reads as `ctx.text`: the context's summary, else the
        handoff's reason."""
        return str(self.transfer_context.get("summary") or self.reason)

    @property
    def shared_with(self) -> str:
        """The principal the task this envelope makes is shared with, beside the sender's
        own: the user a handoff is made for (`onBehalfOf`) — who follows the conversation
        there. None for a delegation: its sub-task is the delegating agent's alone (its user
        reads the outcome in the delegating task), so nobody else reads, answers or cancels
        it."""
        return "" if self.kind == "delegation" else (self.on_behalf_of or "")

    def expires_at(self) -> datetime:
        return parse_time(self.created_at) + timedelta(seconds=self.ttl_seconds)

    def expired(self, now: datetime | None = None) -> bool:
        if now is not None:
            return now >= self.expires_at()
        # The same comparison in seconds since the epoch: read for every handoff received,
        # and a datetime for "now" and a timedelta cost twice the rest.
        return time.time() >= parse_time(self.created_at).timestamp() + self.ttl_seconds


def root_key_for(agent_url: str, task_id: str) -> str:
    """The root key of a chain that starts at this task."""
    return hashlib.sha256(f"{agent_url}#{task_id}".encode()).hexdigest()


def derive_key(root_key: str, hop: int, salt: str = "") -> str:
    """The idempotency key of hop `hop` of the chain rooted at `root_key` (`salt`: of a
    message sent from that hop without ending it, such as a non-blocking escalation)."""
    label = f"hop:{hop}" + (f":{salt}" if salt else "")
    return hmac.new(root_key.encode(), label.encode(), hashlib.sha256).hexdigest()
