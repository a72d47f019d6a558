"""One conversation of `orchestrator mcp`, carried through waits for a human operator.

An MCP host cannot run the operator's commands nor wait minutes for a tool call: while an
escalation waits, it is told so, in a normal result, and asks again later.

Invariants:
- a turn (the user's message sent, or an escalation followed) runs as a task of its own; a
  call answers when the turn ends, or as soon as it waits for a human operator — the turn
  goes on following the escalation in the background (for up to `wait` seconds; a later call
  follows it again);
- while the conversation waits for an operator, a message goes to no agent: it is kept as a
  note and answered with the pending status (the operator answers an escalation, not the
  user; a new request would start the conversation again at the entry agent);
- an outcome reached in the background is told by the next call (`converse` or `status`)
  with the notes kept meanwhile, which are then dropped; a later `status` shows the outcome
  without them.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from a2a_handoff import AgentClient, TaskState
from a2a_handoff.errors import HandoffError
from orchestrator.conversation import Conversation, Event, Exit
from orchestrator.session import Session

AWAITING = "awaiting_operator"  # the outcome of a turn that waits for an operator's decision
_LOGGED = 20  # events `status` shows (the last ones)

Start = Callable[[Session, Callable[[Event], None]], Conversation]


@dataclass
class Answer:
    """What a call tells: how the conversation stands, and the events since the last call."""

    outcome: str  # an exit code's name (`completed`, …), `awaiting_operator`, or `none`
    events: list[Event]  # those no call answered with before
    notes: list[str] = field(default_factory=list)  # messages kept during the wait, told once
    code: Exit | None = None  # how the turn ended (None: it waits, or there was none)


class Thread:
    """A conversation by name: its session, its turn (maybe running), its notes."""

    def __init__(self, client: AgentClient, session: Session, start: Start) -> None:
        self.client = client
        self.session = session
        self.start = start
        self.turn: asyncio.Task[Exit] | None = None
        self.fresh: list[Event] = []  # events no call has answered with yet
        self.told = True  # the last turn's outcome was answered to some call
        self.notes: list[str] = []
        self.log: deque[Event] = deque(maxlen=_LOGGED)
        self.waiting_for = ""  # what the escalation asks the operator (its `whatIsNeeded`)
        self.lock = asyncio.Lock()  # one call at a time moves the conversation

    def close(self) -> None:
        """The conversation is dropped (`new`): its background turn with it."""
        if self.turn is not None:
            self.turn.cancel()

    async def converse(self, text: str) -> Answer:
        """The user's message: sent by the conversation's rules, or kept while it waits."""
        async with self.lock:
            if await self._settle():
                self.notes.append(text)
                return Answer(AWAITING, self._take())
            if not self.told:  # the decision came while nobody asked: told before anything
                self.notes.append(text)
                return self._told()
            waits = await self._run(text)
            return Answer(AWAITING, self._take()) if waits else self._told()

    async def status(self) -> Answer:
        """Where the conversation is; the outcome of a wait once the operator decided. While
        a message of a call still runs (not a wait), what is known so far, at once."""
        if self.lock.locked():
            return Answer("working", [])  # the call running tells its events
        async with self.lock:
            if await self._settle():
                return Answer(AWAITING, self._take())
            if self.turn is None:
                return Answer("none", [])
            if not self.told:
                return self._told()
            return Answer(self._name(self.turn.result()), self._take())

    # -- turns --------------------------------------------------------------------------------

    async def _settle(self) -> bool:
        """Bring the conversation up to date: whether it (still) waits for an operator."""
        turn = self.turn
        if turn is not None and not turn.done():
            if self.session.awaiting_operator and not await self._decided():
                return True
            await asyncio.shield(turn)  # decided (or other work): it ends within its wait
        if self.session.awaiting_operator and self.session.task_id:
            return await self._run(None)  # its wait ran out: follow the escalation again
        return False

    async def _decided(self) -> bool:
        """Whether the escalated task moved on (asked of its agent: a decision the turn's
        subscription has not seen yet is seen here)."""
        session = self.session
        if not (session.owner_url and session.task_id):
            return True
        try:
            task = await self.client.get_task(session.owner_url, session.task_id, history_length=0)
        except HandoffError:
            return False  # not reachable now: it still waits, as far as anyone can tell
        return task.status.state is not TaskState.INPUT_REQUIRED

    async def _run(self, text: str | None) -> bool:
        """Start a turn (`text` sent, or, None, the session's task followed); True when it
        waits for an operator (it goes on in the background), False once it ended."""
        self.told = False
        escalated = asyncio.Event()

        def emit(event: Event) -> None:
            self.fresh.append(event)
            self.log.append(event)
            if event["event"] == "escalated":
                self.waiting_for = str(event.get("text", ""))
            elif event["event"] == AWAITING:
                escalated.set()

        conversation = self.start(self.session, emit)
        session = self.session
        url, task_id = session.owner_url or "", session.task_id or ""
        job = conversation.send(text) if text is not None else conversation.watch(url, task_id)
        self.turn = asyncio.ensure_future(job)
        flag = asyncio.ensure_future(escalated.wait())
        try:
            await asyncio.wait({self.turn, flag}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            flag.cancel()
        if self.turn.done():
            return self.turn.result() is Exit.PENDING and session.awaiting_operator
        return True

    def _take(self) -> list[Event]:
        fresh, self.fresh = self.fresh, []
        return fresh

    def _told(self) -> Answer:
        """The ended turn's outcome, told now with the notes kept meanwhile (then dropped)."""
        assert self.turn is not None
        code = self.turn.result()
        notes, self.notes, self.told = self.notes, [], True
        return Answer(self._name(code), self._take(), notes, code)

    def _name(self, code: Exit) -> str:
        return (
            AWAITING
            if code is Exit.PENDING and self.session.awaiting_operator
            else code.name.lower()
        )
