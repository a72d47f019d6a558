"""Routing a user's messages to whoever owns the conversation, following transfers.

A message goes to the current owner (the entry agent at first) as a stream. When the task
ends TRANSFERRED, the orchestrator follows the pointer — subscribing to the successor, so the
user's stream continues across agents. Loops are guarded: at most `max_hops` transfers per user
message, and no (agent, task) twice.

The rules of a conversation (one context id):
- while its task waits for input, the next message goes to that task (at whoever owns it);
- while its task is still working (or handing off, or waiting for an operator), the next
  message waits — up to `wait` seconds — for it to pause or end, then goes as the rules say;
  if it is still busy then, the message is not delivered, and that is said (exit 6);
- once its last task is terminal, the next message starts a new task at the entry agent, in
  the same context: triage routes it again.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any

from a2a_handoff import (
    HANDOFF_EXTENSION_URI,
    AgentClient,
    Artifact,
    Message,
    Part,
    Role,
    Task,
    TaskState,
)
from a2a_handoff.client import CARD_PATH, reason, replicas
from a2a_handoff.errors import (
    CircuitOpenError,
    PayloadTooLargeError,
    RemoteError,
    TaskNotFoundError,
    UnavailableError,
)
from a2a_handoff.exits import ExitCode
from a2a_handoff.protocol import StreamResponse, TaskStatus, utc_now
from orchestrator.reach import Reach
from orchestrator.session import Hop, Session
from orchestrator.waiting import Backoff, until_answered

Event = dict[str, Any]
ClientEvent = tuple[int | None, StreamResponse]


Exit = ExitCode  # the one table of the three command lines (a2a_handoff.exits)


_ENDINGS = {
    TaskState.COMPLETED: ("completed", Exit.COMPLETED),
    TaskState.FAILED: ("failed", Exit.FAILED),
    TaskState.REJECTED: ("rejected", Exit.FAILED),
    TaskState.CANCELED: ("canceled", Exit.FAILED),
    TaskState.INPUT_REQUIRED: ("input_required", Exit.INPUT_REQUIRED),
    TaskState.AUTH_REQUIRED: ("auth_required", Exit.INPUT_REQUIRED),
}


MAX_DROPS = 3  # streams picked up again after a failure, per user message


class _TaskGone(Exception):
    """The agent that owns the conversation does not know its task (-32001)."""


NOT_FOUND = TaskNotFoundError.code


def _ext(metadata: dict[str, Any] | None) -> dict[str, Any]:
    value = (metadata or {}).get(HANDOFF_EXTENSION_URI)
    return value if isinstance(value, dict) else {}


def _text(status: TaskStatus) -> str:
    return status.message.text if status.message is not None else ""


@dataclass
class _Cursor:
    """Where the conversation is while following one user message."""

    url: str
    name: str
    task_id: str | None = None
    state: TaskState | None = None
    status_text: str = ""
    handing_off: bool = False
    delivery: str = ""  # why the handoff waits, as the source agent last said it
    pointer: dict[str, Any] | None = None
    escalation: dict[str, Any] | None = None  # the task is an escalation at a human agent
    told_escalation: bool = False
    shown: set[str] = field(default_factory=set)  # artifact ids already told
    replied: bool = False  # the agent answered with a direct Message (no task)

    @property
    def awaiting_operator(self) -> bool:
        return self.escalation is not None and self.state is TaskState.INPUT_REQUIRED


class Conversation:
    """One user's conversation, kept in a `Session`."""

    def __init__(
        self,
        client: AgentClient,
        session: Session,
        emit: Callable[[Event], None],
        *,
        save: Callable[[], None] = lambda: None,
        max_hops: int = 8,
        wait: float = 30.0,
        reach: Reach | None = None,
        hold: Callable[[], AbstractContextManager[object]] = contextlib.nullcontext,
    ) -> None:
        self.client = client
        self.hold = hold  # one wait on an operator (the gateway's raises TooManyWaits)
        self.session = session
        self.emit = emit
        self.save = save
        self.max_hops = max_hops
        self.wait = wait
        self.reach = reach
        self._names: dict[str, str] = {}
        self._failures: dict[str, Exception] = {}  # the first failure to reach each URL
        self._no_card: set[str] = set()  # URLs that answered, but with no agent card
        self._catching_up = False  # a pending answer is told by send(), as not delivered
        self._handing_off = False
        self._answered = False  # the agent answered the message being sent (it got it)
        self._session_task = False  # the call being followed names the session's task
        self._backoffs: dict[tuple[str, str], Backoff] = {}

    async def name_of(self, url: str) -> str:
        if url not in self._names:
            try:
                self._names[url] = (await self.client.card(url)).name
            except (UnavailableError, CircuitOpenError) as exc:
                self._failures.setdefault(url, exc)
                if _answered_without_card(exc):
                    self._no_card.add(url)
                return url
            except (RemoteError, ValueError):  # an answer, but not a card
                self._no_card.add(url)
                return url
        return self._names[url]

    # -- commands -------------------------------------------------------------------------

    async def send(self, text: str) -> Exit:
        """Send the user's text by the conversation's rules (see the module docstring) and
        follow it to an answer. A conversation whose task its agent no longer has (its data
        was wiped) starts again at the entry agent, and that is said in one line."""
        session = self.session
        stale = (session.owner_name or session.owner_url, session.task_id)
        try:
            return await self._deliver(text)
        except _TaskGone:
            session.restart()
            self.emit(
                {
                    "event": "new_conversation",
                    "agent": session.entry or "",
                    "taskId": stale[1],
                    "message": f"task {stale[1]} is no longer at {stale[0]} (its data was"
                    f" wiped?): a new conversation starts at {session.entry}",
                }
            )
            return await self._deliver(text)
        finally:
            self._session_task = False

    async def _deliver(self, text: str) -> Exit:
        session = self.session
        url = session.owner_url or session.entry
        if url is None:
            raise ValueError("no entry agent: pass --entry URL")
        self._session_task = session.task_id is not None  # the next call names that task
        self._answered = False
        try:
            if session.task_id and (
                session.awaiting_operator or (session.state and not _settled(session.state))
            ):
                # The last message is still being worked on (or handed off): wait for it to
                # pause or end — within `wait` — before this one goes.
                self._catching_up = True
                try:
                    code = await self._resume(url, session.task_id)
                finally:
                    self._catching_up = self._answered = False
                if code is Exit.PENDING:
                    self._not_delivered()
                    return Exit.NOT_DELIVERED
                if code is Exit.UNREACHABLE:
                    return code
        except (UnavailableError, CircuitOpenError) as exc:
            return self._unreachable(url, exc, delivered=self._answered)
        return await self.deliver(*self.prepare([Part(text=text)]))

    def prepare(self, parts: list[Part], message_id: str | None = None) -> tuple[str, Message]:
        """Where the user's next message goes and the message itself, by the conversation's
        rules (its last task paused or ended): the answer to the task that waits for input,
        else a new task at the entry agent in the same context."""
        session = self.session
        url = session.owner_url or session.entry
        if url is None:
            raise ValueError("no entry agent: pass --entry URL")
        message = Message(
            message_id=message_id or str(uuid.uuid4()),
            role=Role.USER,
            parts=parts,
            context_id=session.context_id,
        )
        if session.task_id and session.state in _INTERRUPTED:
            message.task_id = session.task_id  # the answer the task waits for
        elif session.task_id:
            # The conversation's last task is over: a new task at the entry agent, in the
            # same context, so the entry agent routes the new request afresh.
            message.reference_task_ids = [session.task_id]
            url = session.entry or url
            self._session_task = False  # a new task: not the session's
        return url, message

    async def deliver(self, url: str, message: Message) -> Exit:
        """Send `message` to `url` and follow it to an answer, across transfers. Sent again
        (the same message id), an agent answers with what the first one started."""
        try:
            cursor = _Cursor(url, await self.name_of(url))
            self._answered = False
            return await self._follow(cursor, self.client.stream(url, message))
        except (UnavailableError, CircuitOpenError) as exc:
            if url in self._no_card and not self._answered:
                return self._not_an_agent(url)
            return self._unreachable(url, exc, delivered=self._answered)

    def _not_delivered(self) -> None:
        session = self.session
        name = session.owner_name or session.owner_url or ""
        if session.awaiting_operator:
            why = f"the conversation waits for a human operator's decision at {name}"
        elif session.state == TaskState.WORKING.value and self._handing_off:
            why = f"the handoff from {name} is still pending (in {name}'s outbox)"
        else:
            why = f"{name} is still working on task {session.task_id}"
        self.emit(
            {
                "event": "not_delivered",
                "agent": name,
                "taskId": session.task_id,
                "message": f"your message was not delivered: {why} after {self.wait:g} s;"
                " send it again once it answers (`watch` follows it), or with a longer --wait",
            }
        )

    async def watch(self, url: str, task_id: str) -> Exit:
        """Follow one task across transfers until it ends or waits for input."""
        try:
            return await self._resume(url, task_id)
        except (UnavailableError, CircuitOpenError) as exc:
            return self._unreachable(url, exc)

    # -- following ------------------------------------------------------------------------

    async def _resume(self, url: str, task_id: str) -> Exit:
        cursor = _Cursor(url, await self.name_of(url), task_id)
        return await self._follow(cursor, self._pick_up(url, task_id))

    async def _pick_up(
        self, url: str, task_id: str, known: Task | None = None
    ) -> AsyncIterator[ClientEvent]:
        """A task already under way, as a stream: its state now (GetTask, or `known`), then,
        only while it is still in progress, its subscription. Subscribing to a task that is
        over is an error by the spec (-32004, UnsupportedOperationError), which its agent
        counts as one; a conversation often picks up a task that ended meanwhile (a fast
        successor, `watch` after the end), so it asks for it first."""
        task = known or await self.client.get_task(url, task_id, history_length=0)
        yield None, StreamResponse(task=task)
        if task.status.state.terminal or task.status.state.interrupted:
            return
        try:
            async for event in self.client.subscribe(url, task_id):
                yield event
        except RemoteError as exc:
            if exc.code != -32004:  # -32004: it ended between the two calls
                raise
            yield None, StreamResponse(task=await self.client.get_task(url, task_id))

    async def _follow(self, cursor: _Cursor, stream: AsyncIterator[ClientEvent]) -> Exit:
        hops = 0
        drops = 0
        visited: set[tuple[str, str]] = set()
        deadline = asyncio.get_running_loop().time() + self.wait
        while True:
            try:
                async with asyncio.timeout_at(deadline):
                    async for _, item in stream:
                        self._apply(cursor, item)
                        if cursor.state is not None and cursor.state.interrupted:
                            # A subscription stays open while the task waits for input
                            # (spec §3.1.6); this turn is over: the user answers next.
                            aclose = getattr(stream, "aclose", None)
                            if aclose is not None:
                                await aclose()
                            break
            except TimeoutError:
                return await self._pending(cursor)
            except (UnavailableError, CircuitOpenError):
                # The stream's replica died mid-way: pick the task up again (on another
                # replica, when the agent has several) rather than give up at once.
                if cursor.task_id is None or drops >= MAX_DROPS:
                    raise
                drops += 1
                stream = self._pick_up(cursor.url, cursor.task_id)
                continue
            except RemoteError as exc:
                if cursor.task_id is None and cursor.url in self._no_card:
                    return self._not_an_agent(cursor.url)
                if exc.code == PayloadTooLargeError.code:
                    return self._too_large(cursor, exc)
                if self._session_task and not self._answered and exc.code == NOT_FOUND:
                    raise _TaskGone from exc  # the session's task: gone from its agent
                self.emit(
                    {
                        "event": "error",
                        "agent": cursor.name,
                        "code": exc.code,
                        "message": exc.message,
                    }
                )
                return Exit.FAILED
            if cursor.task_id is None:  # no task: a direct Message is a complete answer
                return Exit.COMPLETED if cursor.replied else Exit.FAILED
            if cursor.state is None or not (cursor.state.terminal or cursor.state.interrupted):
                # The stream ended early (a dropped connection): ask for the task itself.
                task = await self.client.get_task(cursor.url, cursor.task_id)
                self._apply(cursor, StreamResponse(task=task))
                if not (task.status.state.terminal or task.status.state.interrupted):
                    stream = self._pick_up(cursor.url, cursor.task_id, task)
                    continue
            if cursor.awaiting_operator:
                # Escalated: the task waits for an operator, not for the user. Follow it
                # (a stream of ours pauses at INPUT_REQUIRED) until it moves on or the wait
                # runs out.
                self._tell_escalation(cursor)
                try:
                    async with asyncio.timeout_at(deadline):
                        task = await self._until_answered(cursor)
                except TimeoutError:
                    return await self._pending(cursor)
                self._apply(cursor, StreamResponse(task=task))
                if cursor.state is not TaskState.TRANSFERRED:
                    stream = self._pick_up(cursor.url, cursor.task_id, task)
                    continue
            if cursor.state is not TaskState.TRANSFERRED:
                return self._finish(cursor)
            pointer = cursor.pointer or {}
            if not pointer.get("agentUrl") or not pointer.get("taskId"):
                self.emit(
                    {
                        "event": "error",
                        "agent": cursor.name,
                        "code": 0,
                        "message": "a transferred task without a transfer pointer",
                    }
                )
                return Exit.FAILED
            visited.add((cursor.url, cursor.task_id))
            hops += 1
            target = (pointer["agentUrl"], pointer["taskId"])
            if hops > self.max_hops or target in visited:
                why = (
                    f"more than {self.max_hops} transfers"
                    if hops > self.max_hops
                    else (f"{pointer['agentName']} task {pointer['taskId']} was already visited")
                )
                self.emit(
                    {
                        "event": "loop",
                        "agent": cursor.name,
                        "taskId": cursor.task_id,
                        "message": f"stopped following transfers: {why}",
                    }
                )
                return Exit.FAILED
            self.emit(
                {
                    "event": "transferred",
                    "from": cursor.name,
                    "to": pointer["agentName"],
                    "taskId": pointer["taskId"],
                    "reason": pointer.get("reason", ""),
                }
            )
            if self.reach is not None and not await self.reach.allows(pointer["agentUrl"]):
                self.emit(
                    {
                        "event": "refused",
                        "agent": cursor.name,
                        "taskId": cursor.task_id,
                        "url": pointer["agentUrl"],
                        "message": f"not following the transfer to {pointer['agentUrl']}: that"
                        " origin is not reachable from the configured agents' trust lists",
                    }
                )
                return Exit.REFUSED
            self.session.context_id = pointer.get("contextId") or self.session.context_id
            cursor = _Cursor(pointer["agentUrl"], pointer["agentName"], pointer["taskId"])
            self._names[cursor.url] = cursor.name
            self._record(cursor, TaskState.SUBMITTED, pointer.get("reason", ""))
            stream = self._pick_up(cursor.url, pointer["taskId"])

    def _tell_escalation(self, cursor: _Cursor) -> None:
        if cursor.told_escalation or cursor.escalation is None:
            return
        cursor.told_escalation = True
        escalation = cursor.escalation
        self.emit(
            {
                "event": "escalated",
                "agent": cursor.name,
                "taskId": cursor.task_id,
                "tier": escalation.get("tier", "blocking"),
                "need": escalation.get("need", ""),
                "text": escalation.get("whatIsNeeded", ""),
            }
        )
        # Said at once: what this command now waits for, and where an operator answers.
        inbox = f"python -m orchestrator inbox --agent {cursor.url}"
        self.emit(
            {
                "event": "awaiting_operator",
                "agent": cursor.name,
                "taskId": cursor.task_id,
                "inbox": inbox,
                "message": f"waiting up to {self.wait:g} s for a human operator at"
                f" {cursor.name} to answer; an operator sees it with `{inbox}` (or the console)",
            }
        )

    async def _until_answered(self, cursor: _Cursor) -> Task:
        """The escalated task once an operator answered: one wait (`self.hold`: the gateway
        caps a client's), followed as `orchestrator.waiting` does for the CLI and gateway."""
        assert cursor.task_id is not None
        # One backoff per escalation for the conversation's life: a wait taken up again (the
        # gateway's next round) goes on at its pace rather than from 0.25 s.
        backoff = self._backoffs.setdefault((cursor.url, cursor.task_id), Backoff())
        with self.hold():
            return await until_answered(self.client, cursor.url, cursor.task_id, backoff)

    def _apply(self, cursor: _Cursor, item: StreamResponse) -> None:
        """Take one stream item: track the task, tell the user."""
        self._answered = True
        if item.task is not None:
            task = item.task
            cursor.task_id = task.id
            self.session.context_id = task.context_id
            cursor.escalation = _ext(task.metadata).get("escalation") or cursor.escalation
            cursor.pointer = _ext(task.metadata).get("transfer") or cursor.pointer
            cursor.handing_off = _ext(task.metadata).get("state") == "HANDING_OFF"
            cursor.delivery = str((_ext(task.metadata).get("delivery") or {}).get("reason", ""))
            for artifact in task.artifacts or []:
                self._artifact(cursor, artifact)
            self._status(cursor, task.status)
        elif item.status_update is not None:
            update = item.status_update
            cursor.task_id = update.task_id
            ext = _ext(update.metadata)
            if ext.get("transfer"):
                cursor.pointer = ext["transfer"]
            cursor.handing_off = ext.get("state") == "HANDING_OFF" or (
                cursor.handing_off and update.status.state is TaskState.WORKING
            )
            if ext.get("delivery"):
                cursor.delivery = str(ext["delivery"].get("reason", ""))
            self._status(cursor, update.status)
        elif item.artifact_update is not None:
            self._artifact(cursor, item.artifact_update.artifact)
        elif item.message is not None:
            cursor.replied = True
            self.emit({"event": "message", "agent": cursor.name, "text": item.message.text})

    def _artifact(self, cursor: _Cursor, artifact: Artifact) -> None:
        if artifact.artifact_id in cursor.shown:
            return
        cursor.shown.add(artifact.artifact_id)
        self.emit(
            {
                "event": "artifact",
                "agent": cursor.name,
                "taskId": cursor.task_id,
                "name": artifact.name or "",
                "artifactId": artifact.artifact_id,
                "parts": [p.dump() for p in artifact.parts],
            }
        )

    def _status(self, cursor: _Cursor, status: TaskStatus) -> None:
        changed = status.state is not cursor.state or _text(status) != cursor.status_text
        cursor.state, cursor.status_text = status.state, _text(status)
        self._record(cursor, status.state)
        if changed and status.state in (TaskState.SUBMITTED, TaskState.WORKING):
            self.emit(
                {
                    "event": "status",
                    "agent": cursor.name,
                    "taskId": cursor.task_id,
                    "state": status.state.name.lower(),
                    "text": _text(status),
                }
            )

    def _record(self, cursor: _Cursor, state: TaskState, reason: str = "") -> None:
        if cursor.task_id is None:
            return
        self.session.record(
            Hop(cursor.url, cursor.name, cursor.task_id, state.value, reason, utc_now())
        )
        self.session.awaiting_operator = cursor.awaiting_operator
        self.save()

    def _finish(self, cursor: _Cursor) -> Exit:
        assert cursor.state is not None
        event, code = _ENDINGS.get(cursor.state, ("failed", Exit.FAILED))
        self.emit(
            {
                "event": event,
                "agent": cursor.name,
                "taskId": cursor.task_id,
                "text": cursor.status_text,
            }
        )
        return code

    async def _pending(self, cursor: _Cursor) -> Exit:
        if self._catching_up:  # send() tells the user their message was not delivered
            self._handing_off = cursor.handing_off
            return Exit.PENDING
        if cursor.awaiting_operator:
            self.emit(
                {
                    "event": "pending",
                    "agent": cursor.name,
                    "taskId": cursor.task_id,
                    "message": f"waiting for a human operator at {cursor.name} to answer the"
                    " escalation; `watch` or the next `send` picks the conversation up",
                }
            )
        elif cursor.handing_off:
            self.emit(
                {
                    "event": "pending",
                    "agent": cursor.name,
                    "taskId": cursor.task_id,
                    "message": f"the handoff from {cursor.name} is pending: "
                    + (f"{cursor.delivery}. " if cursor.delivery else "")
                    + f"{cursor.name} keeps trying until the handoff is taken, refused or"
                    " expires; `send` or `watch` picks the conversation up, `cancel`"
                    " withdraws it",
                }
            )
        else:
            self.emit(
                {
                    "event": "pending",
                    "agent": cursor.name,
                    "taskId": cursor.task_id,
                    "message": f"{cursor.name} is still working on task {cursor.task_id};"
                    " `watch` or the next `send` picks it up",
                }
            )
        return Exit.PENDING

    def _not_an_agent(self, url: str) -> Exit:
        """The URL answers HTTP, but is no agent: no agent card where A2A puts it."""
        card = replicas(url)[0].rstrip("/") + "/" + CARD_PATH
        self.emit(
            {
                "event": "not_an_agent",
                "url": url,
                "message": f"{url} is not an A2A agent (no agent card at {card});"
                " your message was not delivered",
            }
        )
        return Exit.USAGE

    def _too_large(self, cursor: _Cursor, exc: RemoteError) -> Exit:
        """-32100: the agent takes requests up to a size; the message was over it."""
        limit = re.search(r"over (\d+) bytes", exc.message)
        size = f" ({_size(int(limit.group(1)))})" if limit else ""
        self.emit(
            {
                "event": "too_large",
                "agent": cursor.name,
                "code": exc.code,
                "message": f"{cursor.name} refused your message: {exc.message}{size};"
                " it was not delivered: send a shorter one",
            }
        )
        return Exit.USAGE

    def _unreachable(self, url: str, exc: Exception, delivered: bool = True) -> Exit:
        """`cannot reach billing at URL (connection refused)`: the first failure's reason; the
        circuit breaker only when it is why the call was not made."""
        first = self._failures.get(url)
        if isinstance(exc, CircuitOpenError) and first is not None:
            exc = first
        name = self._names.get(url) or (
            self.session.owner_name if url == self.session.owner_url else None
        )
        who = f"{name} at {url}" if name and name != url else url
        why = str(exc) if isinstance(exc, CircuitOpenError) else describe(exc)
        tail = "" if delivered else "; your message was not delivered"
        self.emit(
            {
                "event": "unreachable",
                "url": url,
                "message": f"cannot reach {who} ({why}){tail}",
            }
        )
        return Exit.UNREACHABLE


def _answered_without_card(exc: Exception) -> bool:
    """Whether a card could not be read because the URL answered without one (a web page, a
    wrong path): not a failure to reach it, nor a card refused for its signature."""
    found = re.search(r"agent card answered HTTP (\d+)", str(exc))
    return found is not None and int(found.group(1)) in (400, 404, 405, 406, 410, 415, 501)


def _size(count: int) -> str:
    """A byte count as a person reads it: `1 MiB`, `64 KiB`, `900 bytes`."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if count >= scale:
            return f"{count / scale:.3g} {unit}"
    return f"{count} bytes"


def describe(exc: Exception) -> str:
    """Why an agent could not be reached, in words: the transport's reason when there is one
    (`connection refused`), else what the client said."""
    if exc.__cause__ is not None:
        return reason(exc.__cause__)
    return str(exc)


_INTERRUPTED = {TaskState.INPUT_REQUIRED.value, TaskState.AUTH_REQUIRED.value}


def _settled(state: str) -> bool:
    parsed = TaskState(state)
    return parsed.terminal or parsed.interrupted


def created_at(task_id: str) -> str | None:
    """When a task was created, from its id when that is a UUIDv7 (ours are: see
    a2a_handoff.ids) — the time order of a chain; None for other ids."""
    digits = task_id.replace("-", "")
    if len(digits) != 32 or digits[12] != "7":
        return None
    try:
        millis = int(digits[:12], 16)
    except ValueError:
        return None
    seconds, ms = divmod(millis, 1000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{ms:03d}Z"


async def chain_of(
    client: AgentClient, url: str, context_id: str, reach: Reach | None = None
) -> list[Hop]:
    """The tasks of a context, following transfer pointers across agents (only to origins
    `reach` allows)."""
    hops: list[Hop] = []
    seen: set[tuple[str, str]] = set()
    queue = [url]
    while queue:
        agent_url = queue.pop(0)
        try:
            name = (await client.card(agent_url)).name
            page = await client.list_tasks(agent_url, contextId=context_id, pageSize=100)
        except (UnavailableError, CircuitOpenError, RemoteError):
            continue
        for raw in reversed(page["tasks"]):
            task = Task.model_validate(raw)
            if (agent_url, task.id) in seen:
                continue
            seen.add((agent_url, task.id))
            ext = _ext(task.metadata)
            transfer = ext.get("transfer") or {}
            state = (
                TaskState.TRANSFERRED.value
                if ext.get("state") == "TRANSFERRED"
                else (task.status.state.value)
            )
            hops.append(
                Hop(
                    agent_url,
                    name,
                    task.id,
                    state,
                    transfer.get("reason", ""),
                    created_at(task.id) or task.status.timestamp or "",
                )
            )
            successor = transfer.get("agentUrl")
            if (
                successor
                and successor not in queue
                and (reach is None or await reach.allows(str(successor)))
            ):
                queue.append(successor)
    return hops
