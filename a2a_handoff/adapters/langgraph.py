"""A LangGraph graph served as an A2A agent: `create_app(from_langgraph(builder, …), …)`.

Needs the `langgraph` extra (`pip install 'a2a-handoff[langgraph]'`: `langgraph` and its
SQLite checkpointer).

Each task is one LangGraph thread (`thread_id` = `<contextId>/<taskId>`):

- **the first step** starts the graph from an initial state made of the task: the verified
  transfer context's keys that are fields of the state, the user's text in `text_field`, and
  — when the state has `messages` — the conversation (as the Agents SDK adapter makes it:
  after a handoff, with a user turn);
- **`interrupt(question)`** in a node leaves the task INPUT_REQUIRED with the question; the
  user's next message resumes the graph (`Command(resume=<text>)`) where it stopped;
- **`Command(goto=<route>)`** (from a node, or from a tool in a `ToolNode`: `handoff_tool`)
  to one of the agent's routes becomes the library's three-phase handoff, the state's
  `context_fields` (and a handoff tool's arguments) as the transfer context: a copy of the
  graph — a `StateGraph` or a compiled graph's builder, never the user's object — gets a node
  for each route it has none of (`_graph_routes`);
- `ask_tool(route)` is a tool delegating to the route's agent (`ctx.delegation.ask`);
- in a node, `task_context()` is the step's `TaskContext` (status, artifacts, `guard`, the
  operator's decision) and `end_step(outcome)` ends the step with any outcome — an `Escalate`
  from `guard`, a `Rejected`;
- the text of chat models called inside nodes streams as chunks of one artifact (`answer`);
  at the end, the state's `answer_field` — or else the last AI message of `messages` (a
  `MessagesState` graph, a prebuilt agent) — completes the task.

**Checkpoints.** The graph's checkpoints live where its checkpointer puts them: for
`checkpoints="sqlite:///PATH"` (a file beside the agent's store: two writers on one SQLite
file wait on each other's locks), LangGraph's `AsyncSqliteSaver` on it. We keep
LangGraph's saver, not a copy of it over our store: its format (channel versions, pending
writes, interrupts) is LangGraph's and changes with it. On the same file, one backup holds a
task and its graph, and the store's one-process rule covers both. LangGraph writes a
checkpoint before the graph yields an interrupt, and the task becomes INPUT_REQUIRED only
after: a waiting task always has its checkpoint, so a restarted agent resumes it. A step cut
by a crash resumes too (`resumes`): the checkpoint each step started from is recorded in the
task's journal, so the step run again goes on from the graph's last checkpoint — the nodes
that finished before the crash are not run again — or, when nothing of it was checkpointed,
starts again the same way.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Command

from a2a_handoff.adapters._conversation import conversation
from a2a_handoff.adapters._graph_routes import MESSAGES, REMOTE_KEY, with_routes
from a2a_handoff.adapters._graph_tools import (
    CURRENT,
    EndStep,
    ask_tool,
    end_step,
    handoff_tool,
    task_context,
)
from a2a_handoff.agent import ArtifactStream, TaskContext
from a2a_handoff.outcomes import Completed, Handoff, InputRequired, Outcome

__all__ = [
    "LangGraphAgent",
    "ask_tool",
    "end_step",
    "from_langgraph",
    "handoff_tool",
    "task_context",
]


@dataclass
class LangGraphAgent:
    """A LangGraph graph as a handler (see the module's docstring)."""

    graph: StateGraph[Any] | CompiledStateGraph[Any, Any, Any, Any]
    checkpoints: str | BaseCheckpointSaver[Any] | None = None
    context_fields: Sequence[str] | None = None
    required: Mapping[str, Sequence[str]] = field(default_factory=dict)
    text_field: str = "text"
    answer_field: str = "answer"
    _compiled: CompiledStateGraph[Any, Any, Any, Any] | None = field(default=None, repr=False)
    _saver: Any = field(default=None, repr=False)
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock, repr=False)

    resumes: ClassVar[bool] = True  # a step cut by a crash goes on from its checkpoint

    async def handle(self, ctx: TaskContext) -> Outcome | None:
        graph = await self._graph(ctx.handoffs.routes)
        config: Any = {"configurable": {"thread_id": f"{ctx.context_id}/{ctx.task_id}"}}
        start = await self._start(ctx, graph, config)
        answer: ArtifactStream | None = None
        token = CURRENT.set(ctx)
        try:
            steps: AsyncIterator[Any] = (
                _nothing()
                if start is _ALREADY
                else graph.astream(start, config, stream_mode=["messages"])
            )
            async for mode, chunk in steps:
                text = _token(chunk) if mode == "messages" else ""
                if text:
                    if answer is None:
                        answer = ArtifactStream(ctx, ctx.new_artifact_id(), "answer", None)
                    await answer.write(text)
        except EndStep as end:
            return end.outcome
        finally:
            CURRENT.reset(token)
            if answer is not None:
                await answer.close()
        state = await graph.aget_state(config)
        if state.interrupts:
            value = state.interrupts[0].value
            if isinstance(value, dict) and REMOTE_KEY in value:
                return self._handoff(value[REMOTE_KEY])
            if isinstance(value, Mapping) and isinstance(value.get("question"), str):
                return InputRequired(value["question"])
            return InputRequired(
                value if isinstance(value, str) else json.dumps(value, default=str)
            )
        said = state.values.get(self.answer_field) or _last_ai_text(state.values.get(MESSAGES))
        return Completed(str(said) if said else None)

    async def _start(
        self, ctx: TaskContext, graph: CompiledStateGraph[Any, Any, Any, Any], config: Any
    ) -> Any:
        """What the step runs the graph with. The checkpoint it starts from is recorded
        first (a journaled step): run again after a crash, a step that got past it goes on
        from the graph's last checkpoint (`None`) — or, paused or ended there already, runs
        nothing more (`_ALREADY`) —, one that did not starts again the same way."""
        snapshot = await graph.aget_state(config)
        here = (snapshot.config or {}).get("configurable", {}).get("checkpoint_id")
        name = "graph-start:" + hashlib.sha256(ctx.message.message_id.encode()).hexdigest()[:32]
        began = await ctx.step(name, lambda key: _recorded(here))
        if began == here:
            return Command(resume=ctx.text) if snapshot.interrupts else self._initial(ctx, graph)
        return _ALREADY if snapshot.interrupts or not snapshot.next else None

    def _initial(self, ctx: TaskContext, graph: CompiledStateGraph[Any, Any, Any, Any]) -> Any:
        fields = set(graph.stream_channels_list)
        state = {k: v for k, v in ctx.transfer_context.items() if k in fields}
        if self.text_field in fields:
            state[self.text_field] = ctx.text
        if MESSAGES in fields:
            state[MESSAGES] = conversation(ctx)
        return state

    def _handoff(self, asked: Mapping[str, Any]) -> Handoff:
        target = str(asked["target"])
        context = dict(asked.get("context") or {})
        reason = str(context.get("summary") or f"handed over to {target}")
        return Handoff(
            target=target,
            reason=reason[:500],
            context=context,
            required=tuple(self.required.get(target, ())),
        )

    async def _graph(self, routes: Sequence[str]) -> CompiledStateGraph[Any, Any, Any, Any]:
        async with self._lock:
            if self._compiled is None:
                self._compiled = await self._compile(routes)
            return self._compiled

    async def _compile(self, routes: Sequence[str]) -> CompiledStateGraph[Any, Any, Any, Any]:
        """The graph to run: a copy of the user's — theirs is never changed — with a node for
        each route it has none of, compiled with the checkpointer (and, for a compiled graph,
        the options it was compiled with)."""
        compiled = self.graph if isinstance(self.graph, CompiledStateGraph) else None
        if compiled is not None and compiled.checkpointer is None and self.checkpoints is None:
            raise ValueError(
                "the graph needs a checkpointer to wait for input: compile it with one,"
                " or pass checkpoints="
            )
        saver = compiled.checkpointer if compiled is not None else None
        if self.checkpoints is not None or saver is None:
            saver = await self._open_saver()
        excluded = (self.text_field, self.answer_field, MESSAGES)
        return with_routes(self.graph, routes, saver, self.context_fields, excluded)

    async def _open_saver(self) -> BaseCheckpointSaver[Any]:
        if isinstance(self.checkpoints, BaseCheckpointSaver):
            return self.checkpoints
        if self.checkpoints is None:
            raise ValueError("no checkpointer: pass checkpoints='sqlite:///PATH' or a saver")
        path = self.checkpoints.removeprefix("sqlite:///")
        if path == self.checkpoints:
            raise ValueError(f"checkpoints: a sqlite:/// URL or a saver, not {self.checkpoints!r}")
        import aiosqlite
        from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

        self._saver = AsyncSqliteSaver(await aiosqlite.connect(path))
        return self._saver  # type: ignore[no-any-return]

    async def aclose(self) -> None:
        if self._saver is not None:
            await self._saver.conn.close()
            self._saver = None


def from_langgraph(
    graph: StateGraph[Any] | CompiledStateGraph[Any, Any, Any, Any],
    *,
    checkpoints: str | BaseCheckpointSaver[Any] | None = None,
    context_fields: Sequence[str] | None = None,
    required: Mapping[str, Sequence[str]] | None = None,
    text_field: str = "text",
    answer_field: str = "answer",
) -> LangGraphAgent:
    """Serve `graph` (a `StateGraph` to compile, or a compiled graph with its checkpointer):
    `create_app(from_langgraph(builder, checkpoints="sqlite:///data/billing-graph.db"), …)`.
    `context_fields`: the state's fields a handoff carries (default: all but the text, the
    answer and the messages); `required`: the capabilities each route's target must offer."""
    return LangGraphAgent(
        graph, checkpoints, context_fields, dict(required or {}), text_field, answer_field
    )


_ALREADY = object()  # a resumed step whose graph paused or ended before the crash


async def _recorded(checkpoint: str | None) -> str | None:
    return checkpoint


async def _nothing() -> AsyncIterator[Any]:
    return
    yield


def _last_ai_text(messages: Any) -> str:
    """The text of the last AI message of a `messages` channel (a `MessagesState` graph's
    answer, a prebuilt agent's), or ""."""
    for message in reversed(messages if isinstance(messages, list) else []):
        if getattr(message, "type", None) == "ai":
            content = getattr(message, "content", "")
            if isinstance(content, str):
                return content
            return "".join(
                str(b.get("text", "")) if isinstance(b, dict) else str(b) for b in content
            )
    return ""


def _token(chunk: Any) -> str:
    message = chunk[0] if isinstance(chunk, tuple) else chunk
    content = getattr(message, "content", None)
    if type(message).__name__ != "AIMessageChunk" or not isinstance(content, str):
        return ""
    return content
