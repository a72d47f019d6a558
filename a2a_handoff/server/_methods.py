"""The A2A methods, bound to one agent's task manager and store.

Each takes a validated `Call` and answers with a JSON-RPC result (or an SSE stream for the
streaming methods); a failure is raised as an RpcError, which the binding turns into the
error object. `SendMessage` blocks until the task ends or waits for input, unless
`returnImmediately`. `ListHandoffs` is ours: the handoff ledger (`server._handoff_ledger`).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from datetime import UTC
from functools import partial

from starlette.requests import Request
from starlette.responses import Response

from a2a_handoff.errors import (
    ExtendedCardNotConfiguredError,
    InternalError,
    InvalidParamsError,
    PushNotificationNotSupportedError,
    TaskNotCancelableError,
    UnsupportedOperationError,
)
from a2a_handoff.protocol.extension import (
    HANDOFF_EXTENSION_URI,
    ext_metadata,
    render_task,
    with_ext_metadata,
)
from a2a_handoff.protocol.models import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    Message,
    SendMessageRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    Task,
    parse_time,
)
from a2a_handoff.protocol.states import TaskState
from a2a_handoff.protocol.steps import agent_message
from a2a_handoff.runtime.submission import Replied, Submission
from a2a_handoff.runtime.tasks import TaskManager
from a2a_handoff.server._call import Call, Handler, validate
from a2a_handoff.server._handoff_ledger import HandoffLedger
from a2a_handoff.server._patience import patiently
from a2a_handoff.server._push import PushMethods, given_config
from a2a_handoff.server._streams import StreamSlots, one_item, sse_answer, task_stream
from a2a_handoff.stores.base import Store, TaskQuery

LIST_QUERIES_PER_CALLER = 4
"""ListTasks calls of one principal served at once; past them, -32603 at once (a store's
connections and time are shared: one caller's queries must leave room for everyone's work)."""


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


def trim_history(task: Task, history_length: int | None) -> Task:
    if history_length is None or task.history is None:
        return task
    history = task.history[-history_length:] if history_length else []
    return task.model_copy(update={"history": history or None})


class A2AMethods:
    """The methods `POST /` dispatches to."""

    def __init__(
        self,
        manager: TaskManager,
        sse_ping: float,
        max_streams: int = 1000,
        *,
        extended_card: Callable[[], str] | None = None,
        extended_declared: bool = False,
    ) -> None:
        self.manager = manager
        self.store: Store = manager.store
        self.sse_ping = sse_ping
        self.streams = StreamSlots(max_streams)
        self.extended_card = extended_card  # the extended card's JSON, as served
        self.extended_declared = extended_declared or extended_card is not None
        self.push: PushMethods | None = None  # set when push notifications are on
        self.ledger = HandoffLedger(manager)
        self._listing: dict[str, int] = {}  # principal → its ListTasks calls being served

    def table(self) -> dict[str, Handler]:
        """Method name → handler."""
        return {
            "SendMessage": self.send_message,
            "SendStreamingMessage": self.send_streaming_message,
            "GetTask": self.get_task,
            "ListTasks": self.list_tasks,
            "CancelTask": self.cancel_task,
            "SubscribeToTask": self.subscribe_to_task,
            "GetExtendedAgentCard": self.get_extended_card,
        } | self.ledger.table()

    def _task_response(
        self,
        call: Call,
        task: Task,
        history_length: int | None,
        *,
        wrap: bool = False,
        json_as_is: str = "",
    ) -> Response:
        """A Task result; `wrap` makes it a SendMessageResponse (`{"task": …}`).

        `json_as_is`: the task's JSON, used when nothing about it is to be changed.
        """
        unchanged = history_length is None and (
            call.transfers_visible or task.status.state is not TaskState.TRANSFERRED
        )
        if json_as_is and unchanged:
            shown = json_as_is
        else:
            rendered = render_task(task, call.transfers_visible)
            shown = trim_history(rendered, history_length).dump_json()
        return call.binding.answer(call, '{"task":' + shown + "}" if wrap else shown)

    async def send_message(self, call: Call) -> Response:
        request = validate(SendMessageRequest, call.params)
        config = request.configuration
        cursor = await self._push_cursor(request, call.principal)
        immediately = bool(config and config.return_immediately)
        try:
            submission = await self.manager.send(
                request.message, call.principal, answer="task" if immediately else "outcome"
            )
        except UnsupportedOperationError as refused:
            reply = await self._moved_on(call, request.message, refused)
            return call.binding.answer(call, '{"message":' + reply.dump_json() + "}")
        await self._attach_push(request, submission, cursor)
        answer = partial(self._sent_answer, call, request, submission, immediately)
        if immediately:
            return await answer()
        # A long wait (an operator deciding) keeps the caller's read timeout from firing.
        return await patiently(call, submission.settled, answer, self.sse_ping)

    async def _sent_answer(
        self, call: Call, request: SendMessageRequest, submission: Submission, immediately: bool
    ) -> Response:
        """SendMessage's answer, once the task is created (`immediately`) or has settled."""
        config = request.configuration
        waiting = submission.created if immediately else submission.settled
        try:
            record = await asyncio.shield(waiting)
        except Replied as replied:
            return call.binding.answer(call, '{"message":' + replied.message.dump_json() + "}")
        task = record.task
        if submission.duplicate:
            task = with_ext_metadata(task, duplicate=True)
        history_length = config.history_length if config else None
        as_is = "" if submission.duplicate else record.json
        return self._task_response(call, task, history_length, wrap=True, json_as_is=as_is)

    async def send_streaming_message(self, call: Call) -> Response:
        request = validate(SendMessageRequest, call.params)
        cursor = await self._push_cursor(request, call.principal)
        self.streams.take()  # refused before the task is created
        try:
            try:
                submission = await self.manager.send(
                    request.message, call.principal, answer="stream"
                )
            except UnsupportedOperationError as refused:
                raise Replied(await self._moved_on(call, request.message, refused)) from None
            await asyncio.shield(submission.streams_from)
            await self._attach_push(request, submission, cursor)
        except Replied as replied:
            item = one_item(StreamResponse(message=replied.message))
            return sse_answer(call, item, self.sse_ping, self.streams)
        except BaseException:
            self.streams.give()
            raise
        stream = task_stream(
            self.store, submission.task_id, submission.head, submission.after, submission.first
        )
        return sse_answer(call, stream, self.sse_ping, self.streams)

    async def _push_cursor(self, request: SendMessageRequest, principal: str) -> int:
        """Where the deliveries of a config given with the message start (-32003 when one is
        given and push is off; see `PushMethods.given`)."""
        if self.push is not None:
            return await self.push.given(request, principal)
        if given_config(request) is not None:
            raise PushNotificationNotSupportedError()
        return 0

    async def _attach_push(
        self, request: SendMessageRequest, submission: Submission, cursor: int
    ) -> None:
        if self.push is not None:
            await self.push.attach_given(request, submission, cursor)

    async def _moved_on(
        self, call: Call, message: Message, refused: UnsupportedOperationError
    ) -> Message:
        """The answer to a follow-up sent to a task that cannot take it, for a client shown
        TRANSFERRED as COMPLETED: the task is complete, and where the conversation went (a
        Message naming the successor, the pointer in its metadata). Else `refused` is raised."""
        if call.transfers_visible or not message.task_id:
            raise refused
        record = await self.manager.owned(message.task_id, call.principal)
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

    async def get_task(self, call: Call) -> Response:
        request = validate(GetTaskRequest, call.params)
        record = await self.manager.owned(request.id, call.principal)
        return self._task_response(call, record.task, request.history_length)

    async def list_tasks(self, call: Call) -> Response:
        request = validate(ListTasksRequest, call.params)
        page_size = request.page_size or 50
        query = TaskQuery(
            owner=None if self.manager.sees_all(call.principal) else call.principal,
            context_id=request.context_id,
            state=request.status,
            page_size=page_size,
            page_token=request.page_token or None,
            status_after=_status_after(request.status_timestamp_after),
            transfers_as_completed=not call.transfers_visible,
        )
        running = self._listing.get(call.principal, 0)
        if running >= LIST_QUERIES_PER_CALLER:
            raise InternalError(
                f"too many concurrent list queries: at most {LIST_QUERIES_PER_CALLER} ListTasks"
                " calls of one caller are served at once; retry when one has answered"
            )
        self._listing[call.principal] = running + 1
        try:
            page = await self.store.list_tasks(query)
        finally:
            left = self._listing.pop(call.principal) - 1
            if left:
                self._listing[call.principal] = left
        tasks = []
        for record in page.records:
            task = trim_history(
                render_task(record.task, call.transfers_visible), request.history_length or 0
            )
            if not request.include_artifacts:
                task = task.model_copy(update={"artifacts": None})
            tasks.append(task.dump_json())
        result = (
            '{"tasks":['
            + ",".join(tasks)
            + '],"nextPageToken":'
            + json.dumps(page.next_page_token)
            + f',"pageSize":{page_size},"totalSize":{page.total_size}}}'
        )
        return call.binding.answer(call, result)

    async def cancel_task(self, call: Call) -> Response:
        request = validate(CancelTaskRequest, call.params)
        try:
            record = await self.manager.cancel(request.id, call.principal)
        except TaskNotCancelableError as refused:
            if call.transfers_visible or "TRANSFERRED" not in refused.message:
                raise
            raise TaskNotCancelableError(
                f"task {request.id} is {_shown(call, TaskState.TRANSFERRED)}, a terminal state",
                metadata={"taskId": request.id},
            ) from None
        return self._task_response(call, record.task, None)

    async def subscribe_to_task(self, call: Call) -> Response:
        request = validate(SubscribeToTaskRequest, call.params)
        record = await self.manager.owned(request.id, call.principal)
        resume = _last_event_id(call.request)
        # A stream resumed after a drop gets what it missed, even if the task ended meanwhile;
        # a new subscription to an ended task has nothing to wait for.
        if record.state.terminal and (resume is None or resume >= record.version):
            raise UnsupportedOperationError(
                f"task {record.id} is {_shown(call, record.state)}: a terminal task has no updates",
                metadata={"taskId": record.id},
            )
        self.streams.take()
        if resume is not None:
            stream = task_stream(self.store, record.id, None, resume, until_terminal=True)
        else:
            stream = task_stream(
                self.store, record.id, record.task, record.version, until_terminal=True
            )
        return sse_answer(call, stream, self.sse_ping, self.streams)

    async def get_extended_card(self, call: Call) -> Response:
        """The authenticated extended card: to a caller the binding authenticated (under
        API-key auth no call gets here without a valid key; without auth the public card
        declares no scheme to authenticate with, and every caller gets it)."""
        if self.extended_card is not None:
            return call.binding.answer(call, self.extended_card())
        if self.extended_declared:
            raise ExtendedCardNotConfiguredError()
        raise UnsupportedOperationError(
            "this agent offers no extended card (its card does not declare"
            " capabilities.extendedAgentCard)"
        )


def _shown(call: Call, state: TaskState) -> str:
    """The name of `state` as this client is shown it (TRANSFERRED is COMPLETED without the
    handoff extension)."""
    if state is TaskState.TRANSFERRED and not call.transfers_visible:
        return TaskState.COMPLETED.name
    return state.name


def _last_event_id(request: Request) -> int | None:
    raw = request.headers.get("last-event-id")
    if raw is None:
        return None
    raw = raw.strip()
    if not raw.isdigit():
        raise InvalidParamsError("Last-Event-ID must be an event sequence number")
    return int(raw)
