"""The gateway: any A2A client carried through handoffs (`python -m orchestrator serve`).

An A2A 1.0 agent of our own (`create_app` with `GatewayAgent` as its handler) in front of an
entry agent. A client owns one task at the gateway; the gateway owns the conversation across
agents, as the CLI does (`orchestrator.conversation`): it sends the client's message to whoever
owns the conversation now, follows TRANSFERRED pointers itself, and relays the current owner's
statuses, artifacts and questions into the client's task (same task id and context for the
client). A question (INPUT_REQUIRED) pauses the client's task; the client's answer on that
task goes to the agent's task that asked. A new task in the same context is a new request in
the same conversation: it starts at the entry agent (which routes it afresh), in the agents'
context of the client's earlier tasks.

Invariants:
- a conversation is kept per client task (and a client's context maps to one context at the
  agents), in files named for the client's principal: a client never reaches another
  client's conversation, whatever context or task id it sends;
- the message to an agent is written to that file (with its id) before it is sent; a gateway
  that restarted (kill -9 included) runs the step again and sends that same message again —
  the same id, so the agent answers with what the first one started —, never a second one;
- an artifact is relayed under the id the agent gave it: relayed again after a restart, it
  replaces itself; the client's task never holds it twice;
- a status or an artifact is relayed only when the client's task does not show it already:
  a wait on an operator, followed in rounds of `wait` seconds, tells the escalation once;
  a step run again after a restart (kill -9 included) re-reads the conversation and tells
  only what its task's history does not hold for that step; so a client's push config gets
  each status once. (Not the runtime's own: a resumed step's task goes WORKING afresh.)
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import json
import os
import tempfile
import time
import uuid
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from a2a_handoff import (
    AgentClient,
    Completed,
    Failed,
    InputRequired,
    Message,
    Part,
    Rejected,
    Reply,
    Role,
    TaskContext,
    TaskState,
)
from a2a_handoff.errors import HandoffError
from a2a_handoff.failpoints import failpoint
from a2a_handoff.outcomes import Outcome
from orchestrator.conversation import Conversation, Event, Exit
from orchestrator.reach import Reach
from orchestrator.session import Hop, Session
from orchestrator.waiting import TooManyWaits, Waits

UNREACHABLE_GIVE_UP = 60.0  # seconds a turn tries an agent it cannot reach before failing
MAX_WAITS = 10  # escalations one client may wait on at once (`--max-waits`)


@dataclass
class Kept:
    """One conversation as the gateway keeps it: the CLI's session, and the message last
    sent for it (`outgoing`: the client's message id it answers, where it went, itself)."""

    session: Session
    outgoing: dict[str, Any] | None = None
    path: Path | None = field(default=None, repr=False)

    @classmethod
    def load(cls, path: Path, entry: str) -> Kept:
        if not path.exists():
            return cls(Session(entry=entry), None, path)
        data: dict[str, Any] = json.loads(path.read_text())
        raw = data["session"]
        chain = [Hop(**hop) for hop in raw.pop("chain", [])]
        return cls(Session(**raw, chain=chain), data.get("outgoing"), path)

    def save(self) -> None:
        assert self.path is not None
        _write(self.path, {"session": asdict(self.session), "outgoing": self.outgoing})


def _write(path: Path, body: dict[str, Any]) -> None:
    """Atomically and durably: a crash leaves the old or the new file."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".conversation-")
    with os.fdopen(fd, "w") as out:
        json.dump(body, out)
        out.flush()
        os.fsync(out.fileno())
    os.replace(tmp, path)


class Conversations:
    """The gateway's conversations, one file each in `directory` (made 0700)."""

    def __init__(self, directory: Path, entry: str) -> None:
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.directory = directory
        self.entry = entry
        self._locks: dict[str, asyncio.Lock] = {}

    def _name(self, principal: str, context_id: str) -> str:
        digest = hashlib.sha256(f"{principal}\x1f{context_id}".encode()).hexdigest()
        return digest[:40]

    def lock(self, principal: str, context_id: str) -> asyncio.Lock:
        """One step at a time per conversation (two tasks of one context take turns)."""
        return self._locks.setdefault(self._name(principal, context_id), asyncio.Lock())

    def open(self, principal: str, context_id: str, task_id: str) -> Kept:
        """The conversation of one client task. A new task of a context the client used
        before continues that context at the agents: a new request at the entry agent, in
        the agents' context of the client's earlier tasks."""
        path = self.directory / f"{self._name(principal, context_id + chr(31) + task_id)}.json"
        kept = Kept.load(path, self.entry)
        if not path.exists():
            index = self.directory / f"{self._name(principal, context_id)}.json"
            if index.exists():
                kept.session.context_id = json.loads(index.read_text()).get("contextId")
        return kept

    def remember(self, principal: str, context_id: str, kept: Kept) -> None:
        """The agents' context of a client's context, for the client's next task in it."""
        if kept.session.context_id is None:
            return
        index = self.directory / f"{self._name(principal, context_id)}.json"
        _write(index, {"contextId": kept.session.context_id})


class _Relay:
    """The conversation's events, carried into the client's task in order; a status or an
    artifact the client's task already shows is not carried again (its push config would
    deliver it again): a wait followed in rounds, or a step run again after a restart,
    re-reads the agent's task and tells what it already told."""

    def __init__(self, ctx: TaskContext) -> None:
        self.ctx = ctx
        self.queue: asyncio.Queue[Event | None] = asyncio.Queue()
        self.last: Event | None = None  # the last event that ends a turn
        self.spoke = False
        self.reply: str | None = None
        self.first = True
        status = ctx.task.status
        shown = status.message.text if status.message is not None else ""
        self.said = shown if status.state is TaskState.WORKING else None  # the task's status
        self.told = _told(ctx)  # what this step said before a restart cut it
        self.shown = {a.artifact_id: _parts(a.parts) for a in ctx.task.artifacts or []}

    def emit(self, event: Event) -> None:
        if self.first:
            self.first = False
            failpoint("gateway.after_send")
        self.queue.put_nowait(event)

    async def pump(self) -> None:
        while (event := await self.queue.get()) is not None:
            await self._carry(event)

    async def _carry(self, event: Event) -> None:
        kind = event["event"]
        if kind == "status" and event.get("text"):
            await self._say(event["text"])
        elif kind == "transferred":
            reason = f": {event['reason']}" if event.get("reason") else ""
            await self._say(f"Transferred to {event['to']}{reason}")
        elif kind == "escalated":
            await self._say(f"Escalated to a human operator: {event.get('text', '')}")
        elif kind == "artifact":
            self.spoke = True
            parts = [Part.model_validate(p) for p in event["parts"]]
            if self.shown.get(event["artifactId"]) == _parts(parts):
                return  # told before: the client's task has it as it is
            self.shown[event["artifactId"]] = _parts(parts)
            await self.ctx.artifact(
                *parts,
                name=event.get("name") or None,
                artifact_id=event["artifactId"],
                last_chunk=True,
            )
        elif kind == "message":
            self.reply = str(event.get("text", ""))
        elif kind not in ("status", "pending", "awaiting_operator"):
            self.last = event

    async def _say(self, text: str) -> None:
        """A WORKING status on the client's task, unless it is the one the task shows."""
        self.spoke = True
        if text == self.said:
            return
        self.said = text
        if self.told[text]:  # the step run again re-reads what it told before it was cut
            self.told[text] -= 1
            return
        await self.ctx.status(text)

    def outcome(self, code: Exit) -> Outcome:
        """How the client's task step ends, from how the conversation's turn ended."""
        last = self.last or {}
        text = str(last.get("text") or last.get("message") or "")
        if code is Exit.COMPLETED:
            if self.reply is not None:
                return Reply(text=self.reply) if not self.spoke else Completed(self.reply)
            return Completed(text or None)
        if code is Exit.INPUT_REQUIRED:
            return InputRequired(text or "The agent needs more input.")
        if last.get("event") == "rejected":
            return Rejected(text or "rejected")
        if last.get("event") == "canceled":
            return Failed(f"canceled at {last.get('agent', 'the agent')}: {text}".rstrip(": "))
        return Failed(text or f"the conversation ended: {code.name.lower()}")


class GatewayAgent:
    """The gateway's handler: a client's message carried to the conversation's owner."""

    resumes = True  # a step cut by a restart runs again: the kept message is sent again

    def __init__(
        self,
        client: AgentClient,
        conversations: Conversations,
        reach: Reach,
        *,
        max_hops: int = 8,
        wait: float = 300.0,
        give_up: float = UNREACHABLE_GIVE_UP,
        max_waits: int = MAX_WAITS,
    ) -> None:
        self.client = client
        self.conversations = conversations
        self.reach = reach
        self.max_hops = max_hops
        self.wait = wait
        self.give_up = give_up
        self.waits = Waits(max_waits)  # per principal: what one client makes the agents bear

    async def handle(self, ctx: TaskContext) -> Outcome:
        async with self.conversations.lock(ctx.principal, ctx.context_id):
            book = self.conversations
            kept = book.open(ctx.principal, ctx.context_id, ctx.task_id)
            relay = _Relay(ctx)
            pump = asyncio.create_task(relay.pump())
            refused: TooManyWaits | None = None
            try:
                code = await self._turn(ctx, kept, relay)
            except TooManyWaits as exc:
                refused = exc
            except asyncio.CancelledError:  # the client canceled its task: so is the agent's
                await asyncio.shield(self._cancel_at_owner(kept.session))
                raise
            finally:
                relay.queue.put_nowait(None)
                await pump
                book.remember(ctx.principal, ctx.context_id, kept)
            if refused is not None:
                return InputRequired(_too_many(refused, kept.session))
            return relay.outcome(code)

    async def _cancel_at_owner(self, session: Session) -> None:
        if not (session.owner_url and session.task_id):
            return
        with contextlib.suppress(HandoffError, TimeoutError):
            await asyncio.wait_for(self.client.cancel(session.owner_url, session.task_id), 5.0)

    async def _turn(self, ctx: TaskContext, kept: Kept, relay: _Relay) -> Exit:
        conversation = Conversation(
            self.client,
            kept.session,
            relay.emit,
            save=kept.save,
            max_hops=self.max_hops,
            wait=self.wait,
            reach=self.reach,
            hold=functools.partial(self.waits.hold, ctx.principal),
        )
        outgoing = kept.outgoing
        session = kept.session
        if outgoing is not None and outgoing.get("for") == [ctx.task_id, ctx.message.message_id]:
            # This step ran before and was cut (a restart): the same message, sent again.
            url, message = outgoing["url"], Message.model_validate(outgoing["message"])
        elif session.awaiting_operator and session.owner_url and session.task_id:
            # Its wait was refused (TooManyWaits): the client's next message on the task
            # takes it up again. It is no answer to the operator's question: sent to no one.
            return await self._until_settled(conversation, kept, Exit.PENDING)
        else:
            url, message = conversation.prepare(list(ctx.message.parts), str(uuid.uuid4()))
            kept.outgoing = {
                "for": [ctx.task_id, ctx.message.message_id],
                "url": url,
                "message": json.loads(message.dump_json()),
            }
            kept.save()  # before it is sent: a restart sends this one again, not another
        code = await conversation.deliver(url, message)
        return await self._until_settled(conversation, kept, code, url, message)

    async def _until_settled(
        self,
        conversation: Conversation,
        kept: Kept,
        code: Exit,
        url: str = "",
        message: Message | None = None,
    ) -> Exit:
        """Follow the turn past waits (an escalation, long work) and an unreachable agent (the
        message sent again, for `give_up` seconds) to where it pauses or ends."""
        deadline = time.monotonic() + self.give_up
        delay = 0.2
        while True:
            session = kept.session
            if code is Exit.PENDING and session.owner_url and session.task_id:
                code = await conversation.watch(session.owner_url, session.task_id)
            elif code is Exit.UNREACHABLE and message is not None and time.monotonic() < deadline:
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)
                code = await conversation.deliver(url, message)  # same id: never a second one
            else:
                return code


def _told(ctx: TaskContext) -> Counter[str]:
    """The statuses the client's task shows for this step already (its history after the
    step's message: empty unless the step ran before and was cut), each as often as told."""
    history = ctx.task.history or []
    ids = [m.message_id for m in history]
    if ctx.message.message_id not in ids:
        return Counter()
    start = len(ids) - ids[::-1].index(ctx.message.message_id)
    return Counter(m.text for m in history[start:] if m.role is Role.AGENT and m.text)


def _parts(parts: list[Part]) -> list[dict[str, Any]]:
    return [part.dump() for part in parts]


def _too_many(refused: TooManyWaits, session: Session) -> str:
    """The question a refused wait pauses the client's task with: what and how to go on."""
    name = session.owner_name or session.owner_url or "the human agent"
    return (
        f"Too many waits: this gateway {refused}. This request waits for a human operator at"
        f" {name} (task {session.task_id}) and is not followed for now; send any message on"
        " this task once fewer of your requests wait, and it is followed again (the message"
        " goes to no one: the operator answers the escalation)."
    )
