"""The peer to beat: an echo agent built only from the official `a2a-sdk` (1.x) pieces.

    python bench/sdk_echo.py --port P [--store memory|sqlite] [--db FILE]

Request handling is the SDK's own: `DefaultRequestHandler`, `create_jsonrpc_routes` and
`create_agent_card_routes` on Starlette, served by uvicorn exactly like our server. The task
store is the SDK's `InMemoryTaskStore` (default) or its SQLAlchemy `DatabaseTaskStore` on an
aiosqlite file (`--store sqlite`; the file is created fresh).

Behaviour mirrors `servers/echo.py` so both servers emit the same events per message:
Task (SUBMITTED) -> status WORKING -> artifact echoing the text -> status COMPLETED.
`sleep:N` stays WORKING for N seconds, one status update a second (holds SSE streams open).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from pathlib import Path

import uvicorn
from a2a.helpers import new_task_from_user_message, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types.a2a_pb2 import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    TaskState,
)
from starlette.applications import Starlette

MAX_SLEEP = 600.0


class Echo(AgentExecutor):
    """Echo the user's text as an artifact; `sleep:N` works N seconds first."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        text = context.get_user_input()
        task = context.current_task
        if task is None:
            task = new_task_from_user_message(context.message)
            await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        await updater.start_work()
        if text.startswith("sleep:"):
            seconds = min(max(float(text[len("sleep:") :] or 0), 0.0), MAX_SLEEP)
            for second in range(1, int(seconds) + 1):
                await asyncio.sleep(1)
                note = updater.new_agent_message([new_text_part(f"slept {second} s")])
                await updater.update_status(TaskState.TASK_STATE_WORKING, note)
            await asyncio.sleep(seconds - int(seconds))
        await updater.add_artifact([new_text_part(text)], name="echo")
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()


def make_app(port: int, store: str, db: Path) -> Starlette:
    card = AgentCard(
        name="sdk-echo",
        description="a2a-sdk echo agent (benchmark peer)",
        version="1.0.0",
        supported_interfaces=[
            AgentInterface(
                url=f"http://127.0.0.1:{port}/", protocol_binding="JSONRPC", protocol_version="1.0"
            )
        ],
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id="echo", name="echo", description="echo text", tags=["echo"])],
    )
    if store == "sqlite":
        from a2a.server.tasks import DatabaseTaskStore
        from sqlalchemy.ext.asyncio import create_async_engine

        db.unlink(missing_ok=True)
        task_store = DatabaseTaskStore(create_async_engine(f"sqlite+aiosqlite:///{db}"))
    else:
        task_store = InMemoryTaskStore()
    handler = DefaultRequestHandler(agent_executor=Echo(), task_store=task_store, agent_card=card)

    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        if isinstance(task_store, InMemoryTaskStore):
            yield
            return
        await task_store.initialize()
        yield

    routes = create_agent_card_routes(card) + create_jsonrpc_routes(handler, rpc_url="/")
    return Starlette(routes=routes, lifespan=lifespan)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--store", choices=["memory", "sqlite"], default="memory")
    parser.add_argument("--db", type=Path, default=None, help="SQLite file (--store sqlite)")
    args = parser.parse_args()
    if args.store == "sqlite" and args.db is None:
        parser.error("--store sqlite needs --db FILE")
    logging.basicConfig(level=logging.WARNING)
    app = make_app(args.port, args.store, args.db or Path("unused.db"))
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
