"""The A2A methods, bound to one agent's task manager and store.

Each takes a validated `Call` and answers with a JSON-RPC result (or an SSE stream for the
streaming methods); a failure is raised as an RpcError, which the binding turns into the
error object. `SendMessage` blocks until the task ends or waits for input, unless
`returnImmediately`. `ListHandoffs` is ours: the handoff ledger of a context.
"""

from __future__ import annotations

import asyncio
import json

from starlette.requests import Request
from starlette.responses import Response

from a2a_handoff.errors import (
    ExtendedCardNotConfiguredError,
    InvalidParamsError,
    PushNotificationNotSupportedError,
    UnsupportedOperationError,
)
from a2a_handoff.handoff.ledger import received_row, sent_row
from a2a_handoff.protocol.extension import render_task, with_ext_metadata
from a2a_handoff.protocol.models import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    SendMessageRequest,
    SubscribeToTaskRequest,
    Task,
    WireModel,
)
from a2a_handoff.protocol.states import TaskState
from a2a_handoff.runtime.tasks import TaskManager
from a2a_handoff.server.jsonrpc import Call, Handler, answer, validate
from a2a_handoff.server.streams import sse_answer, task_stream
from a2a_handoff.stores.base import Store, TaskQuery


class ListHandoffsRequest(WireModel):
    context_id: str | None = None


def trim_history(task: Task, history_length: int | None) -> Task:
    if history_length is None or task.history is None:
        return task
    history = task.history[-history_length:] if history_length else []
    return task.model_copy(update={"history": history or None})


class A2AMethods:
    """The methods `POST /` dispatches to."""

    def __init__(self, manager: TaskManager, sse_ping: float) -> None:
        self.manager = manager
        self.store: Store = manager.store
        self.sse_ping = sse_ping

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
            "ListHandoffs": self.list_handoffs,
        }

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
        return answer(call, '{"task":' + shown + "}" if wrap else shown)

    async def send_message(self, call: Call) -> Response:
        request = validate(SendMessageRequest, call.params)
        config = request.configuration
        if config is not None and config.task_push_notification_config is not None:
            raise PushNotificationNotSupportedError()
        submission = await self.manager.send(request.message, call.principal)
        waiting = submission.created if config and config.return_immediately else submission.settled
        record = await asyncio.shield(waiting)
        task = record.task
        if submission.duplicate:
            task = with_ext_metadata(task, duplicate=True)
        history_length = config.history_length if config else None
        as_is = "" if submission.duplicate else record.json
        return self._task_response(call, task, history_length, wrap=True, json_as_is=as_is)

    async def send_streaming_message(self, call: Call) -> Response:
        request = validate(SendMessageRequest, call.params)
        config = request.configuration
        if config is not None and config.task_push_notification_config is not None:
            raise PushNotificationNotSupportedError()
        submission = await self.manager.send(request.message, call.principal)
        await asyncio.shield(submission.created)
        stream = task_stream(self.store, submission.task_id, submission.head, submission.after)
        return sse_answer(call, stream, self.sse_ping)

    async def get_task(self, call: Call) -> Response:
        request = validate(GetTaskRequest, call.params)
        record = await self.manager.owned(request.id, call.principal)
        return self._task_response(call, record.task, request.history_length)

    async def list_tasks(self, call: Call) -> Response:
        request = validate(ListTasksRequest, call.params)
        page_size = request.page_size or 50
        page = await self.store.list_tasks(
            TaskQuery(
                owner=None if self.manager.sees_all(call.principal) else call.principal,
                context_id=request.context_id,
                state=request.status,
                page_size=page_size,
                page_token=request.page_token or None,
            )
        )
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
        return answer(call, result)

    async def cancel_task(self, call: Call) -> Response:
        request = validate(CancelTaskRequest, call.params)
        record = await self.manager.cancel(request.id, call.principal)
        return self._task_response(call, record.task, None)

    async def subscribe_to_task(self, call: Call) -> Response:
        request = validate(SubscribeToTaskRequest, call.params)
        record = await self.manager.owned(request.id, call.principal)
        if record.state.terminal:
            raise UnsupportedOperationError(
                f"task {record.id} is {record.state.name}: a terminal task has no updates"
            )
        resume = _last_event_id(call.request)
        if resume is not None:
            stream = task_stream(self.store, record.id, None, resume)
        else:
            stream = task_stream(self.store, record.id, record.task, record.version)
        return sse_answer(call, stream, self.sse_ping)

    async def get_extended_card(self, call: Call) -> Response:
        raise ExtendedCardNotConfiguredError()

    async def _visible(self, task_id: str, principal: str) -> bool:
        record = await self.store.get(task_id)
        return record is not None and record.visible_to(principal)

    async def list_handoffs(self, call: Call) -> Response:
        """Ours: the handoff ledger of a context — sent (the outbox) and received."""
        request = validate(ListHandoffsRequest, call.params)
        contracts = self.manager.handoffs.settings.contracts
        sent = [
            sent_row(e, contracts)
            for e in await self.store.outbox(context_id=request.context_id)
            if e.owner == call.principal
        ]
        received = [
            received_row(e)
            for e in await self.store.received(request.context_id)
            if await self._visible(e.task_id, call.principal)
        ]
        result = json.dumps({"sent": sent, "received": received}, separators=(",", ":"))
        return answer(call, result)


def _last_event_id(request: Request) -> int | None:
    raw = request.headers.get("last-event-id")
    if raw is None:
        return None
    raw = raw.strip()
    if not raw.isdigit():
        raise InvalidParamsError("Last-Event-ID must be an event sequence number")
    return int(raw)
