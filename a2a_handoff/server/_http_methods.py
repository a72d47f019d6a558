"""The A2A methods as the HTTP faces serve them: JSON-RPC, HTTP+JSON and A2A 0.3 alike.

Each method takes a `Call` (params as the 1.0 request object, the caller), parses the params
into the operation's typed request (-32602 naming the first offending field), asks the
service (`server._operations`) and hands the domain result to the call's binding, which
encodes and frames it (`server._call.Binding`). A stream is answered as SSE
(`server._streams`); a blocking SendMessage not answered within the keep-alive interval has
its head sent at once (`server._patience`). The push config methods are here when push
notifications are on; `ListHandoffs` and `ListPushDeliveries` are ours.
"""

from __future__ import annotations

import json
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from a2a_handoff.errors import InvalidParamsError
from a2a_handoff.protocol.models import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    SendMessageRequest,
    SubscribeToTaskRequest,
)
from a2a_handoff.server._call import Call, Handler, validate
from a2a_handoff.server._handoff_ledger import ListHandoffsRequest
from a2a_handoff.server._operations import A2AOperations
from a2a_handoff.server._patience import done_within, held
from a2a_handoff.server._push import PUSH_METHODS, ConfigRef, PushConfigs, TaskRef
from a2a_handoff.server._streams import sse_answer
from a2a_handoff.server.results import Sent


class HttpMethods:
    """The methods the HTTP faces dispatch to, by A2A method name (`table()`)."""

    def __init__(self, service: A2AOperations, sse_ping: float) -> None:
        self.service = service
        self.sse_ping = sse_ping  # the keep-alive of a stream and of a held answer

    def table(self) -> dict[str, Handler]:
        """Method name → handler (the push config methods when push is on)."""
        table: dict[str, Handler] = {
            "SendMessage": self.send_message,
            "SendStreamingMessage": self.send_streaming_message,
            "GetTask": self.get_task,
            "ListTasks": self.list_tasks,
            "CancelTask": self.cancel_task,
            "SubscribeToTask": self.subscribe_to_task,
            "GetExtendedAgentCard": self.get_extended_card,
            "ListHandoffs": self.list_handoffs,
        }
        if self.service.push is not None:
            push = _PushMethods(self.service.push)
            handlers: list[Handler] = [push.create, push.get, push.list, push.delete]
            table |= dict(zip(PUSH_METHODS, handlers, strict=True))
            table["ListPushDeliveries"] = push.deliveries
        return table

    async def send_message(self, call: Call) -> Response:
        request = validate(SendMessageRequest, call.params)
        sent = await self.service.sending(request, call.caller)
        ready = sent.ready
        if ready is None:
            return await _sent_answer(call, sent)
        # A long wait (an operator deciding) keeps the caller's read timeout from firing.
        if not await done_within(ready, self.sse_ping):
            return held(call, _sent_answer(call, sent), self.sse_ping)
        return call.binding.sent(call, sent.settled_result())

    async def send_streaming_message(self, call: Call) -> Response:
        request = validate(SendMessageRequest, call.params)
        stream = await self.service.send_streaming_message(request, call.caller)
        return sse_answer(call, stream, self.sse_ping)

    async def get_task(self, call: Call) -> Response:
        request = validate(GetTaskRequest, call.params)
        return call.binding.task(call, await self.service.get_task(request, call.caller))

    async def list_tasks(self, call: Call) -> Response:
        request = validate(ListTasksRequest, call.params)
        page = await self.service.list_tasks(request, call.caller)
        tasks = ",".join([view.json() for view in page.tasks])
        result = (
            f'{{"tasks":[{tasks}],"nextPageToken":{json.dumps(page.next_page_token)},'
            f'"pageSize":{page.page_size},"totalSize":{page.total_size}}}'
        )
        return call.binding.answer(call, result)

    async def cancel_task(self, call: Call) -> Response:
        request = validate(CancelTaskRequest, call.params)
        return call.binding.task(call, await self.service.cancel_task(request, call.caller))

    async def subscribe_to_task(self, call: Call) -> Response:
        request = validate(SubscribeToTaskRequest, call.params)
        after = _last_event_id(call.request)
        stream = await self.service.subscribe_to_task(request, call.caller, after)
        return sse_answer(call, stream, self.sse_ping)

    async def get_extended_card(self, call: Call) -> Response:
        return call.binding.answer(call, self.service.get_extended_card())

    async def list_handoffs(self, call: Call) -> Response:
        request = validate(ListHandoffsRequest, call.params)
        return call.binding.answer(
            call, _json(await self.service.list_handoffs(request, call.caller))
        )


async def _sent_answer(call: Call, sent: Sent) -> Response:
    return call.binding.sent(call, await sent.result())


class _PushMethods:
    """The push config methods (`server._push`), for the 1.0 bindings."""

    def __init__(self, push: PushConfigs) -> None:
        self.push = push

    async def create(self, call: Call) -> Response:
        task_id = call.params.get("taskId", call.params.get("task_id"))
        if not isinstance(task_id, str) or not task_id:
            raise InvalidParamsError("taskId: Field required")
        config = await self.push.create(task_id, call.params, call.caller.owner)
        return call.binding.answer(call, _json(config))

    async def get(self, call: Call) -> Response:
        config = await self.push.get(validate(ConfigRef, call.params), call.caller.owner)
        return call.binding.answer(call, _json(config))

    async def list(self, call: Call) -> Response:
        configs = await self.push.list(validate(TaskRef, call.params), call.caller.owner)
        return call.binding.answer(call, _json({"configs": configs, "nextPageToken": ""}))

    async def delete(self, call: Call) -> Response:
        await self.push.delete(validate(ConfigRef, call.params), call.caller.owner)
        return call.binding.answer(call, "{}")

    async def deliveries(self, call: Call) -> Response:
        ref = validate(TaskRef, call.params)
        return call.binding.answer(call, _json(await self.push.deliveries(ref, call.caller.owner)))


def _last_event_id(request: Request) -> int | None:
    """Where a resumed stream goes on (`Last-Event-ID`), or None."""
    raw = request.headers.get("last-event-id")
    if raw is None:
        return None
    raw = raw.strip()
    if not raw.isdigit():
        raise InvalidParamsError("Last-Event-ID must be an event sequence number")
    return int(raw)


def _json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))
