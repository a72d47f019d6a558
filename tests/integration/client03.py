"""Drives the official A2A 0.3 python client (a2a-sdk 0.3.x) against an agent; run by
`tests/integration/test_interop03.py` with the interpreter of `.venv-a2a03`, where that
client is installed (it cannot share a virtualenv with the 1.x SDK). Imports nothing of ours.

    python client03.py URL COMMANDS_JSON [connect]

With `connect` the clients are made by `ClientFactory.connect(URL)` with every default (the
card read from the SDK's default path, `/.well-known/agent-card.json`). `$CLIENT03_API_KEY`:
an API key sent with every request (`X-API-Key`).

COMMANDS_JSON is a list of [command, argument] pairs; each prints one line of JSON:
`$CLIENT03_DEFAULTS`: the HTTP client keeps httpx's default timeouts (5 s), as the SDK's own.

`card` (the card as the 0.3 resolver parses it, read from /.well-known/agent.json),
`send TEXT` (blocking), `send_nowait TEXT` (blocking false), `stream TEXT`, `get TASK_ID`,
`cancel TASK_ID`, `resubscribe TASK_ID`, `answer [TASK_ID, TEXT]` (a follow-up, blocking),
`send_resubscribe TEXT` (send with blocking false, then resubscribe to the task it made).
A client error prints {"error": type, "code": …, "message": …}.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import uuid
from typing import Any

import httpx
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.types import (
    AgentCard,
    Message,
    MessageSendConfiguration,
    Part,
    Role,
    TaskIdParams,
    TaskQueryParams,
    TextPart,
)


def dump(obj: Any) -> Any:
    if isinstance(obj, tuple):  # (Task, update event or None)
        return [dump(o) for o in obj]
    if hasattr(obj, "model_dump"):
        return {"type": type(obj).__name__, **obj.model_dump(mode="json", exclude_none=True)}
    return obj


def message(text: str, task_id: str | None = None, context_id: str | None = None) -> Message:
    return Message(
        role=Role.user,
        message_id=f"m-{uuid.uuid4()}",
        parts=[Part(root=TextPart(text=text))],
        task_id=task_id,
        context_id=context_id,
    )


async def run(url: str, commands: list[tuple[str, Any]], how: str) -> None:
    key = os.environ.get("CLIENT03_API_KEY")
    headers = {"X-API-Key": key} if key else None
    timeout = httpx.Timeout(5.0) if os.environ.get("CLIENT03_DEFAULTS") else httpx.Timeout(30.0)
    async with httpx.AsyncClient(timeout=timeout, headers=headers) as http:
        if how == "connect":  # all defaults: the card from the SDK's default path
            card: AgentCard = await A2ACardResolver(http, url).get_agent_card()
            blocking_config = ClientConfig(streaming=False, httpx_client=http)
            blocking = await ClientFactory.connect(url, client_config=blocking_config)
            streaming_config = ClientConfig(streaming=True, httpx_client=http)
            streaming = await ClientFactory.connect(url, client_config=streaming_config)
        else:
            resolver = A2ACardResolver(http, url, agent_card_path=".well-known/agent.json")
            card = await resolver.get_agent_card()
            blocking = ClientFactory(ClientConfig(streaming=False, httpx_client=http)).create(card)
            streaming = ClientFactory(ClientConfig(streaming=True, httpx_client=http)).create(card)
        for command, arg in commands:
            try:
                result: Any
                if command == "card":
                    result = dump(card)
                elif command == "send":
                    result = [dump(e) async for e in blocking.send_message(message(arg))]
                elif command == "send_nowait":
                    config = MessageSendConfiguration(blocking=False)
                    events = blocking.send_message(message(arg), configuration=config)
                    result = [dump(e) async for e in events]
                elif command == "answer":
                    task = await blocking.get_task(TaskQueryParams(id=arg[0]))
                    follow_up = message(arg[1], task.id, task.context_id)
                    result = [dump(e) async for e in blocking.send_message(follow_up)]
                elif command == "stream":
                    result = [dump(e) async for e in streaming.send_message(message(arg))]
                elif command == "send_resubscribe":
                    config = MessageSendConfiguration(blocking=False)
                    sent = [
                        e async for e in blocking.send_message(message(arg), configuration=config)
                    ]
                    task_id = sent[-1][0].id if isinstance(sent[-1], tuple) else sent[-1].id
                    events = streaming.resubscribe(TaskIdParams(id=task_id))
                    result = [dump(e) async for e in events]
                elif command == "get":
                    result = dump(await blocking.get_task(TaskQueryParams(id=arg)))
                elif command == "cancel":
                    result = dump(await blocking.cancel_task(TaskIdParams(id=arg)))
                elif command == "resubscribe":
                    result = [dump(e) async for e in streaming.resubscribe(TaskIdParams(id=arg))]
                else:
                    raise ValueError(f"unknown command {command!r}")
            except Exception as exc:
                error = getattr(exc, "error", None)
                result = {
                    "error": type(exc).__name__,
                    "code": getattr(error, "code", None),
                    "message": str(exc),
                }
            print(json.dumps(result), flush=True)


if __name__ == "__main__":
    asyncio.run(run(sys.argv[1], json.loads(sys.argv[2]), sys.argv[3] if len(sys.argv) > 3 else ""))
