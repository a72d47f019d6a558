"""A blocking answer that keeps its caller's read timeout from firing while the task runs.

A blocking `SendMessage` answers once the task ends or waits for its caller, which may be
minutes (an operator deciding a refund). The stock SDKs' clients give up after 5 s without a
byte. So an answer not ready within `ping` seconds goes out as a 200 head at once, then one
space every `ping` seconds, then the answer's own body: leading whitespace is insignificant
in JSON (RFC 8259 §2), so the body a client parses — and what is committed, and when — is
the same as if it had come at once. An answer ready within `ping` seconds (most, and every
`returnImmediately`) is sent as it is.

Once the head has gone its status cannot change: an error after that is still the binding's
error object in the body (JSON-RPC's as ever; HTTP+JSON's AIP-193 body, with status 200).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Coroutine
from typing import Any

from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from a2a_handoff.errors import InternalError, RpcError, StoreError, StoreUnavailableError
from a2a_handoff.server._call import Call
from a2a_handoff.server._compat03 import V03Binding
from a2a_handoff.server._jsonrpc import raw_protocol_headers

log = logging.getLogger("a2a_handoff.server")

KEEP_ALIVE = b" "
"""What a waiting answer's body gets every `ping` seconds: JSON-insignificant whitespace."""

_KEEP_ALIVE = {"type": "http.response.body", "body": KEEP_ALIVE, "more_body": True}

Answer = Coroutine[Any, Any, Response]


async def patiently(
    call: Call, settled: asyncio.Future[Any], answer: Callable[[], Answer], ping: float
) -> Response:
    """`answer()`'s response when `settled` (what it waits for) is done within `ping`
    seconds (its error raised as ever); else one that sends its head now and the answer's
    body when it comes (`HeldAnswer`).

    Waiting costs one future and one timer, no task: most answers are ready in time, and
    this is every blocking SendMessage's path (which calls the two steps itself)."""
    if await done_within(settled, ping):
        return await answer()
    return held(call, answer(), ping)


def held(call: Call, answer: Answer, ping: float) -> HeldAnswer:
    """The `HeldAnswer` whose body is what the coroutine `answer` makes (run from now)."""
    return HeldAnswer(call, asyncio.ensure_future(answer), ping)


async def done_within(future: asyncio.Future[Any], seconds: float) -> bool:
    """Whether `future` is done within `seconds`; it is never cancelled (others await it)."""
    if future.done():
        return True
    loop = asyncio.get_running_loop()
    woken: asyncio.Future[None] = loop.create_future()

    def wake(_: object = None) -> None:
        if not woken.done():
            woken.set_result(None)

    timer = loop.call_later(seconds, wake)
    future.add_done_callback(wake)
    try:
        await woken
    finally:
        timer.cancel()
        future.remove_done_callback(wake)
    return future.done()


class HeldAnswer(Response):
    """A 200 `application/json` head at once, a space every `ping` seconds while the answer is
    made, then its body. A client gone meanwhile cancels the answer, never the task (the
    answer only waits for it)."""

    def __init__(self, call: Call, answer: asyncio.Task[Response], ping: float) -> None:
        self.status_code = 200
        self.background = None
        self.call = call
        self.answer = answer
        self.ping = ping
        self.raw_headers = [(b"content-type", b"application/json"), *_protocol_headers(call)]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        gone = asyncio.ensure_future(_disconnect(receive))
        try:
            await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
            while not self.answer.done():
                await asyncio.wait((self.answer, gone), timeout=self.ping)
                if gone.done():
                    return
                if not self.answer.done():
                    await send(
                        {"type": "http.response.body", "body": KEEP_ALIVE, "more_body": True}
                    )
            body = self._body()
            await send({"type": "http.response.body", "body": body, "more_body": False})
        finally:
            gone.cancel()
            self.answer.cancel()  # done already, unless the client went away or we are stopped
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self.answer

    def _body(self) -> bytes:
        """The answer's body, or its error's (as the endpoint would have framed it)."""
        try:
            response = self.answer.result()
        except RpcError as error:
            return self._error(error)
        except StoreError as exc:
            return self._error(StoreUnavailableError(str(exc)))
        except Exception:
            log.exception("internal error serving a blocking SendMessage")
            return self._error(InternalError())
        return bytes(response.body)

    def _error(self, error: RpcError) -> bytes:
        # The binding's stream error is an SSE event whose one `data:` line is the error's
        # JSON: the same object an error answer carries.
        event = self.call.binding.stream_error(self.call, error)
        data = next(line for line in event.split(b"\n") if line.startswith(b"data: "))
        return data[len(b"data: ") :]


def _protocol_headers(call: Call) -> list[tuple[bytes, bytes]]:
    """The A2A headers the binding's own answer carries (none for an A2A 0.3 call)."""
    if isinstance(call.binding, V03Binding):
        return []
    return raw_protocol_headers(call.caller.extensions)


async def _disconnect(receive: Receive) -> None:
    """Returns when the client has gone."""
    while (await receive())["type"] != "http.disconnect":
        pass
