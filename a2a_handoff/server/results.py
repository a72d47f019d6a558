"""Who asks an agent's service, and what it answers (`server.service`).

A `Caller` is the principal a face authenticated and the extensions active for the call. What
the operations answer are domain values — no response, no envelope, no framing: a `TaskView`
(a task as its caller is shown it), a `Message` (`protocol.models`), a `TaskPage`, an
`EventStream`, and for a SendMessage the `Sent` whose answer comes once the task settles. A
failure is an A2A error raised (`errors`).

A task is serialised at most once per answer: `TaskView.json()` is the JSON the store wrote
when the caller is shown the task unchanged, else the view's own, made on first use (a face
that encodes the task otherwise — A2A 0.3, the MCP tools — never makes it).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass, field
from typing import Any

from a2a_handoff.protocol.extension import (
    HANDOFF_EXTENSION_URI,
    render_item,
    render_task,
    with_ext_metadata,
)
from a2a_handoff.protocol.models import Message, StreamResponse, Task
from a2a_handoff.protocol.shallow import copied
from a2a_handoff.protocol.states import TaskState
from a2a_handoff.runtime.submission import Replied, Submission
from a2a_handoff.stores.records import slot_setters, tenant_owner

Items = AsyncGenerator[tuple[int, StreamResponse], None]
"""A task's stream items as stored, each with its event sequence number (0: none)."""


@dataclass(frozen=True, slots=True, init=False)
class Caller:
    """Who calls: the principal a face authenticated ("" without auth), and the extensions
    active for the call (ours among those the caller asked for). One a call: its `__init__`
    is written out, as `stores.records.Commit`'s is."""

    principal: str = ""
    extensions: frozenset[str] = field(default=frozenset())
    tenant: str = ""  # the tenant the call names ("": the default tenant), checked

    def __init__(
        self, principal: str = "", extensions: frozenset[str] = frozenset(), tenant: str = ""
    ) -> None:
        _set_principal(self, principal)
        _set_extensions(self, extensions)
        _set_tenant(self, tenant)

    @property
    def owner(self) -> str:
        """Whose tasks the call reaches: the principal within its tenant (`tenant_owner`)."""
        return tenant_owner(self.tenant, self.principal)

    @property
    def transfers_visible(self) -> bool:
        """Whether the caller is shown TRANSFERRED (the handoff extension is active); without
        it a handed-off task is COMPLETED, its pointer in the metadata."""
        return HANDOFF_EXTENSION_URI in self.extensions


_set_principal, _set_extensions, _set_tenant = slot_setters(Caller, "principal extensions tenant")


def trim_history(task: Task, history_length: int | None) -> Task:
    """`task` with only its last `history_length` messages (None: all)."""
    if history_length is None or task.history is None:
        return task
    history = task.history[-history_length:] if history_length else []
    return copied(task, {"history": history or None})


class TaskView:
    """A task as one caller is shown it — TRANSFERRED as COMPLETED unless the handoff
    extension is active, its history cut to `history_length` messages — and its JSON."""

    __slots__ = ("_json", "task")

    def __init__(
        self, task: Task, visible: bool, history_length: int | None = None, json: str = ""
    ) -> None:
        """`json`: the task's JSON as stored, the view's own when nothing is to be changed."""
        if history_length is None and (visible or task.status.state is not TaskState.TRANSFERRED):
            self.task = task
            self._json = json
        else:
            self.task = trim_history(render_task(task, visible), history_length)
            self._json = ""

    def json(self) -> str:
        """The task as A2A 1.0 JSON (ProtoJSON), made once."""
        if not self._json:
            self._json = self.task.dump_json()
        return self._json


@dataclass(frozen=True, slots=True)
class TaskPage:
    """A page of ListTasks: the tasks, the next page's token (None: the last page), the page
    size asked for and how many tasks match in all."""

    tasks: list[TaskView]
    next_page_token: str | None
    page_size: int
    total_size: int


class Sent:
    """A message the service took (SendMessage), and its answer to come.

    `ready` is what the answer waits for — the task settled (ended, or waiting for its
    caller) — or None when it is to be made at once (`returnImmediately`, a direct reply): a
    face that must not keep its client waiting in silence watches it (`server._patience`).
    `result()` is the answer: the task as the caller is shown it, or the handler's direct
    Message.
    """

    __slots__ = ("_history_length", "_reply", "_submission", "_visible", "ready")

    def __init__(
        self,
        submission: Submission | None,
        caller: Caller,
        *,
        immediately: bool = False,
        history_length: int | None = None,
        reply: Message | None = None,
    ) -> None:
        self._submission = submission
        self._visible = caller.transfers_visible
        self._history_length = history_length
        self._reply = reply
        self.ready: asyncio.Future[Any] | None = None
        if submission is not None and not immediately:
            self.ready = submission.settled

    @classmethod
    def replied(cls, message: Message, caller: Caller) -> Sent:
        """An answer known at once: a Message."""
        return cls(None, caller, reply=message)

    async def result(self) -> TaskView | Message:
        submission = self._submission
        if submission is not None:
            waiting = submission.created if self.ready is None else self.ready
            if not waiting.done():
                with contextlib.suppress(Replied):  # answered by `settled_result`
                    await asyncio.shield(waiting)
        return self.settled_result()

    def settled_result(self) -> TaskView | Message:
        """`result()`, once what it waits for is done (`ready`, when there is one)."""
        submission = self._submission
        if submission is None:
            assert self._reply is not None
            return self._reply
        waiting = submission.created if self.ready is None else self.ready
        try:
            record = waiting.result()
        except Replied as replied:
            return replied.message
        if submission.duplicate:
            # A repeated message id: the task its first sending made, said to be that one.
            task = with_ext_metadata(record.task, duplicate=True)
            return TaskView(task, self._visible, self._history_length)
        return TaskView(record.task, self._visible, self._history_length, record.json)


class EventStream:
    """A task's events as one caller is shown them: (sequence number, item) pairs, until
    the task ends or waits for its caller. `aclose()` ends it early and gives its place
    among the agent's open streams back (a face closes every stream it was given)."""

    __slots__ = ("_items", "_release", "_visible")

    def __init__(
        self, items: Items, visible: bool, release: Callable[[], None] | None = None
    ) -> None:
        self._items = items
        self._visible = visible
        self._release = release  # gives the stream's slot back (`StreamSlots.give`)

    def __aiter__(self) -> EventStream:
        return self

    async def __anext__(self) -> tuple[int, StreamResponse]:
        seq, item = await anext(self._items)
        return seq, render_item(item, self._visible)

    async def aclose(self) -> None:
        release, self._release = self._release, None
        try:
            await self._items.aclose()
        finally:
            if release is not None:
                release()
