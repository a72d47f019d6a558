"""An example agent reachable over gRPC alone, as a Java or Go agent may be (run as a process).

python -m tests.integration.grpc_only_agent NAME --port P --grpc-port G [python -m servers' flags]

It is `python -m servers NAME …` with two changes (`GrpcAlone`, which other test agents wrap
their app in too) to its HTTP side: the card it serves lists
its gRPC interface alone (unsigned: the signature covered the interfaces it drops), and a
message, a cancel or a subscription over HTTP — JSON-RPC `SendMessage`,
`SendStreamingMessage`, `CancelTask`, `SubscribeToTask`, and their REST routes — is refused
(JSON-RPC -32601), so what it takes came over gRPC. Reads (GetTask, ListTasks,
ListHandoffs, the card, health) stay on HTTP for the tests.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import servers._run as run
from servers.__main__ import main

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]

CARD_PATH = "/.well-known/agent-card.json"
SENDING = {"SendMessage", "SendStreamingMessage", "SubscribeToTask", "CancelTask"}
REFUSED = {"code": -32601, "message": "this agent takes this call over gRPC alone"}


class GrpcAlone:
    """The agent's app, its card offering gRPC alone, messages over HTTP refused."""

    def __init__(self, app: App) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path, method = scope["path"], scope["method"]
        if method == "GET" and path == CARD_PATH:
            await self._card(scope, receive, send)
            return
        if (method == "POST" and path != "/") or path.endswith(":subscribe"):
            await _refuse(send, None)  # REST: messages, cancels, subscriptions
            return
        if method == "POST" and path == "/":
            body = await _body(receive)
            try:
                request = json.loads(body)
            except ValueError:
                request = None
            if isinstance(request, dict) and request.get("method") in SENDING:
                await _refuse(send, request.get("id"))
                return
            await self.app(scope, _replay(body, receive), send)
            return
        await self.app(scope, receive, send)

    async def _card(self, scope: Scope, receive: Receive, send: Send) -> None:
        start: Message = {}
        chunks: list[bytes] = []

        async def collect(message: Message) -> None:
            if message["type"] == "http.response.start":
                start.update(message)
            else:
                chunks.append(message.get("body", b""))

        await self.app(scope, receive, collect)
        body = b"".join(chunks)
        if start.get("status") == 200:
            card = json.loads(body)
            grpc = [i for i in card["supportedInterfaces"] if i["protocolBinding"] == "GRPC"]
            card["supportedInterfaces"] = grpc
            card.pop("signatures", None)
            body = json.dumps(card).encode()
        headers = [(k, v) for k, v in start.get("headers", []) if k.lower() != b"content-length"]
        headers.append((b"content-length", str(len(body)).encode()))
        await send({**start, "headers": headers})
        await send({"type": "http.response.body", "body": body})


async def _body(receive: Receive) -> bytes:
    chunks = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            return b"".join(chunks)


def _replay(body: bytes, then: Receive) -> Receive:
    """The request's body, read already, given again; then what the connection says."""
    sent = False

    async def receive() -> Message:
        nonlocal sent
        if sent:
            return await then()
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return receive


async def _refuse(send: Send, call_id: Any) -> None:
    body = json.dumps({"jsonrpc": "2.0", "id": call_id, "error": REFUSED}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def serve_grpc_alone(argv: list[str]) -> int:
    """`python -m servers` with its app wrapped in `GrpcAlone`."""
    made = run.create_app

    def create_app(*args: Any, **kwargs: Any) -> GrpcAlone:
        return GrpcAlone(made(*args, **kwargs))

    run.create_app = create_app  # type: ignore[assignment]
    return main(argv)


if __name__ == "__main__":
    sys.exit(serve_grpc_alone(sys.argv[1:]))
