"""An Agents SDK run that goes on after a crash: its state kept after each tool's result (the
SDK's `RunState`, as the step's checkpoint), and a cut step's run started from it."""

from __future__ import annotations

import logging
from typing import Any

from agents import Agent as SdkAgent
from agents import RunConfig, RunContextWrapper, Runner
from agents.exceptions import AgentsException
from agents.result import RunResultStreaming
from agents.run_state import RunState

from a2a_handoff.agent import TaskContext

log = logging.getLogger("a2a_handoff.adapters")


async def started(
    agent: SdkAgent[Any],
    chat: list[dict[str, Any]],
    context: Any,
    saved: Any,
    max_turns: int,
    run_config: RunConfig,
) -> RunResultStreaming:
    """The step's run, with `context` as its run context: from `saved` — the step's
    checkpoint, kept before a crash cut it (the turns and tool results so far) — when there
    is one, else from the conversation `chat`."""
    if isinstance(saved, dict):
        wrapped = RunContextWrapper(context=context)
        state = await RunState.from_json(agent, saved, context_override=wrapped)
        return Runner.run_streamed(agent, state, max_turns=max_turns, run_config=run_config)
    return Runner.run_streamed(
        agent,
        chat,  # type: ignore[arg-type]  # easy input messages
        context=context,
        max_turns=max_turns,
        run_config=run_config,
    )


async def keep_state(ctx: TaskContext, run: RunResultStreaming) -> None:
    """The run's state after a tool's result, kept for the step to go on from should a
    crash cut it: the turns and tool calls so far are not made again. A state the SDK cannot
    serialize, or over the checkpoint's bound, is not kept (the step would start over)."""
    try:
        state = run.to_state().to_json(context_serializer=lambda _: {})
        await ctx.checkpoint(state)
    except (AgentsException, TypeError, ValueError) as exc:
        log.info("task %s: the run's state is not kept: %s", ctx.task_id, exc)
