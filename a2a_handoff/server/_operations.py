"""The A2A operations of one agent, answered with domain values (`server.service`).

Each takes its typed request (`protocol.models`) and the `Caller`, and answers with a value of
`server.results` or raises an A2A error (`errors`): who may see a task and how it is shown,
when a stream opens and closes, what a follow-up to a handed-off task is told. Nothing here
knows HTTP — no request, no response, no envelope: the faces parse what arrives into these
types and encode what they are given (`server.routes`).

`SendMessage` blocks until the task ends or waits for input, unless `returnImmediately`; it
comes in two steps (`sending`, then `Sent.result()`), so that a face can hold its answer's
head while the task runs. `ListHandoffs` (ours) is the handoff ledger's
(`server._handoff_ledger`); the push config operations are `push`'s, when push is on.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC
from typing import Any

from a2a_handoff.errors import (
    ExtendedCardNotConfiguredError,
    InternalError,
    InvalidParamsError,
    PushNotificationNotSupportedError,
    TaskNotCancelableError,
    UnsupportedOperationError,
)
from a2a_handoff.protocol.extension import HANDOFF_EXTENSION_URI, ext_metadata
from a2a_handoff.protocol.models import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    Message,
    SendMessageRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    parse_time,
)
from a2a_handoff.protocol.states import TaskState
from a2a_handoff.protocol.steps import agent_message
from a2a_handoff.runtime.submission import Replied, Submission
from a2a_handoff.runtime.tasks import TaskManager
from a2a_handoff.server._handoff_ledger import HandoffLedger, ListHandoffsRequest
from a2a_handoff.server._push import PushConfigs, given_config
from a2a_handoff.server._streams import StreamSlots, one_item, task_stream
from a2a_handoff.server.results import Caller, EventStream, Sent, TaskPage, TaskView
from a2a_handoff.stores.base import Store, TaskQuery

LIST_QUERIES_PER_CALLER = 4
"""ListTasks calls of one principal served at once; past them, -32603 at once (a store's
connections and time are shared: one caller's queries must leave room for everyone's work)."""


class A2AOperations:
    """The A2A operations of one agent's task manager (`AgentService` adds its lifecycle)."""

    def __init__(
        self,
        manager: TaskManager,
        *,
        max_streams: int = 1000,
        extended_card: Callable[[], str] | None = None,
        extended_declared: bool = False,
        push: PushConfigs | None = None,
    ) -> None:
        self.manager = manager
        self.store: Store = manager.store
        self.streams = StreamSlots(max_streams)  # the open-stream cap of this process
        self.extended_card = extended_card  # the extended card's JSON, as served
        self.extended_declared = extended_declared or extended_card is not None
        self.push = push  # the push config operations, when push notifications are on
        self.ledger = HandoffLedger(manager)
        self._listing: dict[str, int] = {}  # principal → its ListTasks calls being served, in
        # every tenant: naming more tenants buys a caller no more queries

    async def sending(self, request: SendMessageRequest, caller: Caller) -> Sent:
        """SendMessage's first step: the message taken (the task created, continued or
        received); the answer is the `Sent`'s."""
        config = request.configuration
        # Push off and no configuration (most messages): nothing to check or attach.
        pushes = self.push is not None or config is not None
        cursor = await self._push_cursor(request, caller) if pushes else 0
        immediately = config is not None and bool(config.return_immediately)
        try:
            submission = await self.manager.send(
                request.message, caller.owner, answer="task" if immediately else "outcome"
            )
        except UnsupportedOperationError as refused:
            return Sent.replied(await self._moved_on(caller, request.message, refused), caller)
        if self.push is not None:
            await self.push.attach_given(request, submission, cursor)
        history_length = config.history_length if config is not None else None
        return Sent(submission, caller, immediately=immediately, history_length=history_length)

    async def send_message(self, request: SendMessageRequest, caller: Caller) -> TaskView | Message:
        """SendMessage: the task once it ended or waits for input (at once with
        `returnImmediately`), or the handler's direct Message."""
        return await (await self.sending(request, caller)).result()

    async def send_streaming_message(
        self, request: SendMessageRequest, caller: Caller
    ) -> EventStream:
        """SendStreamingMessage: the task's events (a new task's Task first), until it ends
        or waits for input; a direct Message is the stream's one item. -32106 past the
        open-stream cap, before anything is done."""
        cursor = await self._push_cursor(request, caller)
        self.streams.take()  # refused before the task is created
        visible = caller.transfers_visible
        try:
            try:
                submission = await self.manager.send(request.message, caller.owner, answer="stream")
            except UnsupportedOperationError as refused:
                raise Replied(await self._moved_on(caller, request.message, refused)) from None
            await asyncio.shield(submission.streams_from)
            await self._attach_push(request, submission, cursor)
        except Replied as replied:
            reply = one_item(StreamResponse(message=replied.message))
            return EventStream(reply, visible, self.streams.give)
        except BaseException:
            self.streams.give()
            raise
        items = task_stream(
            self.store, submission.task_id, submission.head, submission.after, submission.first
        )
        return EventStream(items, visible, self.streams.give)

    async def _push_cursor(self, request: SendMessageRequest, caller: Caller) -> int:
        """Where the deliveries of a config given with the message start (-32003 when one is
        given and push is off; see `PushConfigs.given`)."""
        if self.push is not None:
            return await self.push.given(request, caller.owner)
        if given_config(request) is not None:
            raise PushNotificationNotSupportedError()
        return 0

    async def _attach_push(
        self, request: SendMessageRequest, submission: Submission, cursor: int
    ) -> None:
        if self.push is not None:
            await self.push.attach_given(request, submission, cursor)

    async def _moved_on(
        self, caller: Caller, message: Message, refused: UnsupportedOperationError
    ) -> Message:
        """The answer to a follow-up sent to a task that cannot take it, for a client shown
        TRANSFERRED as COMPLETED: the task is complete, and where the conversation went (a
        Message naming the successor, the pointer in its metadata). Else `refused` is raised."""
        if caller.transfers_visible or not message.task_id:
            raise refused
        record = await self.manager.owned(message.task_id, caller.owner)
        pointer = ext_metadata(record.task).get("transfer")
        if record.state is not TaskState.TRANSFERRED or not isinstance(pointer, dict):
            raise refused
        text = (
            f"Task {record.id} is complete: the conversation continues at"
            f" {pointer.get('agentName')} ({pointer.get('agentUrl')}), task"
            f" {pointer.get('taskId')}. Send your message there."
        )
        reply = agent_message(
            text, None, **{HANDOFF_EXTENSION_URI: {"state": "TRANSFERRED", "transfer": pointer}}
        )
        return reply.model_copy(
            update={"context_id": record.task.context_id, "reference_task_ids": [record.id]}
        )

    async def get_task(self, request: GetTaskRequest, caller: Caller) -> TaskView:
        """GetTask: the task, if the caller may see it (-32001 exactly as if absent else)."""
        record = await self.manager.owned(request.id, caller.owner)
        return TaskView(record.task, caller.transfers_visible, request.history_length)

    async def list_tasks(self, request: ListTasksRequest, caller: Caller) -> TaskPage:
        """ListTasks: a page of the tasks the caller may see (an operator: every task of the
        tenant it calls in), without their history unless `historyLength`, without artifacts
        unless asked."""
        page_size = request.page_size or 50
        operator = self.manager.sees_all(caller.owner)
        query = TaskQuery(
            owner=None if operator else caller.owner,
            tenant=caller.tenant if operator else None,
            context_id=request.context_id,
            state=request.status,
            page_size=page_size,
            page_token=request.page_token or None,
            status_after=_status_after(request.status_timestamp_after),
            transfers_as_completed=not caller.transfers_visible,
        )
        running = self._listing.get(caller.principal, 0)
        if running >= LIST_QUERIES_PER_CALLER:
            raise InternalError(
                f"too many concurrent list queries: at most {LIST_QUERIES_PER_CALLER} ListTasks"
                " calls of one caller are served at once; retry when one has answered"
            )
        self._listing[caller.principal] = running + 1
        try:
            page = await self.store.list_tasks(query)
        finally:
            left = self._listing.pop(caller.principal) - 1
            if left:
                self._listing[caller.principal] = left
        history_length = request.history_length or 0
        tasks = []
        for record in page.records:
            task = record.task
            if not request.include_artifacts:
                task = task.model_copy(update={"artifacts": None})
            tasks.append(TaskView(task, caller.transfers_visible, history_length))
        return TaskPage(tasks, page.next_page_token, page_size, page.total_size)

    async def cancel_task(self, request: CancelTaskRequest, caller: Caller) -> TaskView:
        """CancelTask: the task canceled (with the sub-tasks it delegated that are open)."""
        try:
            record = await self.manager.cancel(request.id, caller.owner)
        except TaskNotCancelableError as refused:
            if caller.transfers_visible or "TRANSFERRED" not in refused.message:
                raise
            raise TaskNotCancelableError(
                f"task {request.id} is {_shown(caller, TaskState.TRANSFERRED)}, a terminal state",
                metadata={"taskId": request.id},
            ) from None
        return TaskView(record.task, caller.transfers_visible)

    async def subscribe_to_task(
        self, request: SubscribeToTaskRequest, caller: Caller, after: int | None = None
    ) -> EventStream:
        """SubscribeToTask: the task, then its events until it ends (open while it waits
        for input). `after`: a stream resumed after a drop (`Last-Event-ID`) gets the events
        after that one, even if the task ended meanwhile, and no Task first."""
        record = await self.manager.owned(request.id, caller.owner)
        # A new subscription to an ended task has nothing to wait for.
        if record.state.terminal and (after is None or after >= record.version):
            raise UnsupportedOperationError(
                f"task {record.id} is {_shown(caller, record.state)}: a terminal task has no"
                " updates",
                metadata={"taskId": record.id},
            )
        self.streams.take()
        if after is not None:
            items = task_stream(self.store, record.id, None, after, until_terminal=True)
        else:
            items = task_stream(
                self.store, record.id, record.task, record.version, until_terminal=True
            )
        return EventStream(items, caller.transfers_visible, self.streams.give)

    def get_extended_card(self) -> str:
        """The authenticated extended card's JSON, as served: to a caller its face
        authenticated (under API-key auth no call gets here without a valid key; without auth
        the public card declares no scheme to authenticate with, and every caller gets it)."""
        if self.extended_card is not None:
            return self.extended_card()
        if self.extended_declared:
            raise ExtendedCardNotConfiguredError()
        raise UnsupportedOperationError(
            "this agent offers no extended card (its card does not declare"
            " capabilities.extendedAgentCard)"
        )

    async def list_handoffs(self, request: ListHandoffsRequest, caller: Caller) -> dict[str, Any]:
        """ListHandoffs (ours): a page of the handoffs sent and received that the caller may
        see, and the next page's token (`server._handoff_ledger`)."""
        return await self.ledger.list_handoffs(request, caller.owner)


def _status_after(raw: str | None) -> str | None:
    """`statusTimestampAfter` as a stored timestamp's format (UTC, milliseconds), so that
    comparing the strings compares the moments."""
    if raw is None:
        return None
    try:
        moment = parse_time(raw).astimezone(UTC)
    except ValueError:
        raise InvalidParamsError("statusTimestampAfter: not an ISO-8601 timestamp") from None
    return f"{moment:%Y-%m-%dT%H:%M:%S}.{moment.microsecond // 1000:03d}Z"


def _shown(caller: Caller, state: TaskState) -> str:
    """The name of `state` as this caller is shown it (TRANSFERRED is COMPLETED without the
    handoff extension)."""
    if state is TaskState.TRANSFERRED and not caller.transfers_visible:
        return TaskState.COMPLETED.name
    return state.name
