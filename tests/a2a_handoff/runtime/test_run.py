"""A task's run at each of its phases: what its handler may emit, what a cancel does, when a
direct reply is still possible — on a real store, the handler driven step by step."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx
import pytest

from a2a_handoff.agent import TaskContext
from a2a_handoff.client.client import AgentClient
from a2a_handoff.errors import TaskNotCancelableError
from a2a_handoff.escalation import EscalationPolicy
from a2a_handoff.handoff.handoffs import Handoffs
from a2a_handoff.handoff.settings import HandoffSettings
from a2a_handoff.ids import new_id
from a2a_handoff.outcomes import Completed, Handoff, Outcome, Reply
from a2a_handoff.protocol.extension import ext_metadata
from a2a_handoff.protocol.models import (
    Message,
    Part,
    Role,
    StreamResponse,
    Task,
    TaskStatus,
    utc_now,
)
from a2a_handoff.protocol.states import TaskState
from a2a_handoff.protocol.steps import status_event, with_status
from a2a_handoff.runtime.phases import Phase, PhaseError
from a2a_handoff.runtime.run import TaskRun
from a2a_handoff.runtime.submission import Replied
from a2a_handoff.runtime.tasks import TaskManager
from a2a_handoff.stores import MemoryTaskStore
from a2a_handoff.stores.base import Commit, Store, TaskRecord
from a2a_handoff.trust.agent_trust import AgentTrust
from a2a_handoff.trust.trustlist import TrustList

pytestmark = pytest.mark.anyio

Script = Callable[[TaskContext], Awaitable[Outcome | None]]


class Scripted:
    """A handler that runs the test's script."""

    def __init__(self, script: Script) -> None:
        self.script = script

    async def handle(self, ctx: TaskContext) -> Outcome | None:
        return await self.script(ctx)


class Host:
    """The task manager's side of a run (`runtime.run.RunHost`) on a real store; this file's
    handlers never hand off."""

    def __init__(self, store: Store, script: Script) -> None:
        self.store = store
        self.agent = Scripted(script)
        self.policy = EscalationPolicy()
        self.forgotten: list[TaskRun] = []

    @property
    def handoffs(self) -> Handoffs:
        raise AssertionError("no handoffs here")

    def created(self, run: TaskRun) -> None:
        pass

    def forget(self, run: TaskRun) -> None:
        self.forgotten.append(run)

    def free_task(self, task_id: str) -> None:
        pass

    def strand(self, task_id: str) -> None:
        raise AssertionError("the store does not fail here")

    async def claim_task(self, task_id: str) -> bool:
        return True


@pytest.fixture
async def store() -> AsyncIterator[Store]:
    memory = await MemoryTaskStore().open()
    yield memory
    await memory.aclose()


def user_message(text: str) -> Message:
    return Message(message_id=new_id(), role=Role.USER, parts=[Part(text=text)])


def start(store: Store, script: Script, *, defer: bool = False, key: str | None = None) -> TaskRun:
    """A new task's run, as the task manager starts it."""
    message = user_message("hello")
    task = Task(
        id=new_id(),
        context_id=new_id(),
        status=TaskStatus(state=TaskState.SUBMITTED, timestamp=utc_now()),
        history=[message],
    )
    run = TaskRun(
        Host(store, script),
        task,
        "alice",
        committed=None,
        dedupe_key=key,
        first=StreamResponse(task=task),
    )
    run.run(message, answer="outcome" if defer else "task")
    return run


def phase_of(run: TaskRun) -> Phase:
    return run.phase  # (read anew: mypy keeps a narrowed attribute across a call)


def walk(run: TaskRun, *phases: Phase) -> None:
    for phase in phases:
        run.advance(phase)


async def test_a_handler_runs_quiet_then_speaks_and_its_outcome_ends_the_step(
    store: Store,
) -> None:
    seen: list[Phase] = []
    runs: list[TaskRun] = []

    async def script(ctx: TaskContext) -> Outcome:
        seen.append(runs[0].phase)
        await ctx.status("working on it")
        seen.append(runs[0].phase)
        return Completed("done")

    runs.append(start(store, script))
    record = await asyncio.wait_for(asyncio.shield(runs[0].settled), 5)
    assert seen == [Phase.RUNNING, Phase.SPEAKING]
    assert runs[0].phase is Phase.ENDING
    assert record.state is TaskState.COMPLETED
    assert [m.text for m in record.task.history or ()] == ["hello", "working on it", "done"]


async def test_only_a_handler_that_emitted_nothing_replies_with_a_direct_message(
    store: Store,
) -> None:
    async def quiet(ctx: TaskContext) -> Outcome:
        return Reply("just this")

    async def spoke(ctx: TaskContext) -> Outcome:
        await ctx.status("looking")
        return Reply("just this")

    direct = start(store, quiet, defer=True)
    with pytest.raises(Replied) as replied:
        await asyncio.wait_for(asyncio.shield(direct.settled), 5)
    assert replied.value.message.text == "just this"
    assert replied.value.message.task_id is None  # a direct Message, bound to no task
    # The task written before the handler ran is the receipt: the reply settled it.
    receipt = await store.get(direct.task.id)
    assert receipt is not None
    assert receipt.state is TaskState.COMPLETED
    assert receipt.task.status.message is not None
    assert receipt.task.status.message.message_id == replied.value.message.message_id
    assert ext_metadata(receipt.task)["reply"] is True

    task = start(store, spoke, defer=True)
    record = await asyncio.wait_for(asyncio.shield(task.settled), 5)
    assert record.state is TaskState.COMPLETED
    assert record.task.status.message is not None
    assert record.task.status.message.task_id == task.task.id


class HeldStore(MemoryTaskStore):
    """A store whose task creation waits until the test lets it commit."""

    def __init__(self) -> None:
        super().__init__()
        self.release = asyncio.Event()

    async def commit(self, unit: Commit) -> TaskRecord:
        if unit.creates:
            await self.release.wait()
        return await super().commit(unit)


@pytest.mark.parametrize("defer", [False, True])
async def test_no_handler_starts_before_its_task_is_committed(defer: bool) -> None:
    held = await HeldStore().open()
    ran: list[TaskRecord | None] = []

    async def script(ctx: TaskContext) -> Outcome:
        ran.append(await held.get(ctx.task_id))
        return Completed()

    run = start(held, script, defer=defer)
    for _ in range(20):  # the event loop turns: the write is pending, the handler waits
        await asyncio.sleep(0)
    assert ran == []
    assert run.phase is Phase.STARTING
    held.release.set()
    record = await asyncio.wait_for(asyncio.shield(run.settled), 5)
    assert record.state is TaskState.COMPLETED
    assert len(ran) == 1
    assert ran[0] is not None
    assert ran[0].state is TaskState.WORKING
    await held.aclose()


async def test_a_cancel_while_the_handler_runs_stops_it_and_ends_the_task_canceled(
    store: Store,
) -> None:
    started, stopped = asyncio.Event(), asyncio.Event()

    async def script(ctx: TaskContext) -> Outcome:
        started.set()
        try:
            await asyncio.Event().wait()
        finally:
            stopped.set()
        return Completed()

    run = start(store, script)
    await asyncio.wait_for(started.wait(), 5)
    assert run.phase is Phase.RUNNING
    assert run.phase.cancelable
    run.cancel()
    assert phase_of(run) is Phase.CANCELING
    record = await asyncio.wait_for(asyncio.shield(run.settled), 5)
    assert stopped.is_set()
    assert record.state is TaskState.CANCELED


async def test_a_handler_that_swallows_its_cancellation_has_its_outcome_carried_out(
    store: Store,
) -> None:
    started = asyncio.Event()

    async def script(ctx: TaskContext) -> Outcome:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            return Completed("finished anyway")
        return Completed()

    run = start(store, script)
    await asyncio.wait_for(started.wait(), 5)
    run.cancel()
    record = await asyncio.wait_for(asyncio.shield(run.settled), 5)
    assert run.phase is Phase.ENDING  # CANCELING → ENDING: the step ends as it returned
    assert record.state is TaskState.COMPLETED


async def test_once_the_handler_returned_a_cancel_waits_and_emitting_is_refused(
    store: Store,
) -> None:
    contexts: list[TaskContext] = []
    after: list[Phase] = []
    runs: list[TaskRun] = []

    def cancel_after_return() -> None:  # runs once the driver yields: the handler returned
        after.append(runs[0].phase)
        runs[0].cancel()
        after.append(runs[0].phase)

    async def script(ctx: TaskContext) -> Outcome:
        contexts.append(ctx)
        asyncio.get_running_loop().call_soon(cancel_after_return)
        return Completed("done")

    runs.append(start(store, script))
    record = await asyncio.wait_for(asyncio.shield(runs[0].settled), 5)
    assert after == [Phase.ENDING, Phase.ENDING]  # the cancel changed nothing
    assert record.state is TaskState.COMPLETED
    with pytest.raises(PhaseError, match="ENDING"):
        await contexts[0].status("too late")
    stored = await store.get(record.id)
    assert stored is not None
    assert stored.version == record.version


async def test_after_a_handoff_the_handler_s_emits_are_refused_and_its_outcome_ignored(
    store: Store,
) -> None:
    refused: list[Exception] = []
    runs: list[TaskRun] = []

    async def script(ctx: TaskContext) -> Outcome:
        await ctx.status("handing over")
        await asyncio.shield(runs[0].journal.created)
        # What `ctx.handoffs.hand_off` does when the target takes the task (its delivery is the
        # handoff room's): checkpointed, then handed over.
        walk(runs[0], Phase.HANDING_OFF)
        refused.extend(await _emits(ctx))
        walk(runs[0], Phase.HANDED_OVER)
        refused.extend(await _emits(ctx))
        with pytest.raises(RuntimeError, match="handed off already"):
            await ctx.handoffs.hand_off(Handoff("billing", "again"))
        return Completed("ignored")

    runs.append(start(store, script))
    await asyncio.wait_for(asyncio.shield(runs[0].driver), 5)  # type: ignore[arg-type]
    assert [type(e) for e in refused] == [PhaseError] * 4
    assert "HANDING_OFF" in str(refused[0])
    assert "HANDED_OVER" in str(refused[2])
    assert runs[0].phase is Phase.HANDED_OVER
    assert not runs[0].journal.pending
    assert not runs[0].settled.done()
    stored = await store.get(runs[0].task.id)
    assert stored is not None
    assert stored.state is TaskState.WORKING


async def _emits(ctx: TaskContext) -> list[Exception]:
    """Try a status and an artifact; the errors they raised."""
    errors: list[Exception] = []
    for emit in (ctx.status("more"), ctx.artifact(text="more")):
        try:
            await emit
        except PhaseError as exc:
            errors.append(exc)
    return errors


async def test_a_run_whose_task_exists_elsewhere_is_aborted_and_drops_what_follows(
    store: Store,
) -> None:
    first = start(store, _complete, key="k")
    existing = await asyncio.wait_for(asyncio.shield(first.settled), 5)
    started = asyncio.Event()

    async def script(ctx: TaskContext) -> Outcome:
        started.set()
        await asyncio.Event().wait()  # until the run is aborted: it cancels the handler
        return Completed()

    run = start(store, script, key="k")  # the same message again: created elsewhere first
    answer = await asyncio.wait_for(asyncio.shield(run.settled), 5)
    assert answer.id == existing.id  # answered with the task that exists
    assert run.phase is Phase.ABORTED
    await asyncio.wait_for(asyncio.gather(run.driver, return_exceptions=True), 5)  # type: ignore[arg-type]
    working = with_status(run.task, TaskState.WORKING)
    run.emit(working, status_event(working))  # dropped: its work cannot be stored
    assert not run.journal.pending
    with pytest.raises(PhaseError):
        run.advance(Phase.RUNNING)


async def _complete(ctx: TaskContext) -> Outcome:
    return Completed("first")


async def test_a_cancel_during_a_handoff_is_refused_and_taken_once_it_was_refused() -> None:
    started = asyncio.Event()

    async def script(ctx: TaskContext) -> Outcome:
        await ctx.status("about to hand off")
        started.set()
        await asyncio.Event().wait()
        return Completed()

    store = await MemoryTaskStore().open()
    settings = HandoffSettings(agent_name="solo", agent_url="http://127.0.0.1:1/")
    async with httpx.AsyncClient() as http:
        trust = AgentTrust("solo", store, TrustList())
        manager = TaskManager(Scripted(script), store, settings, AgentClient(http), trust)
        submission = await manager.send(user_message("hi"), "alice")
        await asyncio.wait_for(started.wait(), 5)
        await asyncio.wait_for(asyncio.shield(submission.created), 5)
        run = manager.runs.by_task[submission.task_id]
        walk(run, Phase.HANDING_OFF)  # as `ctx.handoffs.hand_off` does from its checkpoint on
        with pytest.raises(TaskNotCancelableError, match="being handed off"):
            await manager.cancel(submission.task_id, "alice")
        walk(run, Phase.SPEAKING)  # the target refused: the handler goes on
        canceled = await asyncio.wait_for(manager.cancel(submission.task_id, "alice"), 5)
        assert canceled.state is TaskState.CANCELED
        await manager.aclose()
    await store.aclose()


async def test_a_step_is_done_once_per_task_and_its_result_read_back_as_json(
    store: Store,
) -> None:
    calls: list[str] = []
    seen: list[Any] = []

    async def pay(key: str) -> tuple[str, int]:
        calls.append(key)
        return ("paid", 1)

    async def script(ctx: TaskContext) -> Outcome:
        seen.append(await ctx.step("refund", pay))
        seen.append(await ctx.step("refund", pay))  # recorded: not done again
        with pytest.raises(TypeError, match="must be JSON"):
            await ctx.step("odd", lambda key: asyncio.sleep(0, result={1, 2}))
        with pytest.raises(ValueError, match="over"):
            await ctx.checkpoint("x" * 300_000)
        return Completed()

    run = start(store, script)
    record = await asyncio.wait_for(asyncio.shield(run.settled), 5)
    assert record.state is TaskState.COMPLETED
    assert calls == [f"{record.id}/refund"]  # the step's key: the task and the name
    assert seen == [["paid", 1], ["paid", 1]]  # as a re-run reads it from the journal
    assert ext_metadata(record.task)["steps"]["refund"] == {"result": ["paid", 1]}
    assert "checkpoint" not in ext_metadata(record.task)
