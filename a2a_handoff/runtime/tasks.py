"""The task manager: one agent's front door to its tasks, and the host of their runs.

It holds what the runs share (`running.Runs`) and hands each operation to the collaborator
that owns it: creating a task (`creating`), receiving a handoff (`receiving`), continuing a
task (`continuing`), cancelling one (`cancelling`), looking tasks up (`lookup`), and the
recovery sweeps (`sweeps`). Their module docstrings state the invariants; in short:
- one task has at most one running handler in this process, and a message id creates at
  most one task — unless message-id deduplication is switched off (`dedupe_message_ids=False`,
  for clients that reuse ids, such as the conformance kit); handoffs deduplicate on their own
  keys either way;
- a caller sees only its own tasks; operators see every task and alone decide an escalation;
- follow-ups to one task are serialized, across replicas too; terminal tasks are immutable;
- every acknowledged task is run to its end or failed with the reason;
- a received handoff is proven before anything else is done with it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from a2a_handoff.agent import Agent
from a2a_handoff.client.client import AgentClient
from a2a_handoff.client.mcp_tools import McpTools
from a2a_handoff.errors import DrainingError, InvalidParamsError
from a2a_handoff.escalation import EscalationPolicy
from a2a_handoff.handoff.handoffs import Handoffs
from a2a_handoff.handoff.settings import HandoffSettings
from a2a_handoff.handoff.withdraw import handing_off
from a2a_handoff.protocol.extension import HANDOFF_EXTENSION_URI
from a2a_handoff.protocol.models import Message, Role
from a2a_handoff.runtime.cancelling import cancel_task
from a2a_handoff.runtime.continuing import FollowUps
from a2a_handoff.runtime.creating import TaskCreator, dedupe_key
from a2a_handoff.runtime.delegation_record import cancel_open
from a2a_handoff.runtime.draining import hand_over, settle
from a2a_handoff.runtime.leases import Leases
from a2a_handoff.runtime.local import LocalTasks
from a2a_handoff.runtime.lookup import TaskLookup
from a2a_handoff.runtime.receiving import HandoffIntake
from a2a_handoff.runtime.run import Answer, TaskRun
from a2a_handoff.runtime.running import Runs
from a2a_handoff.runtime.submission import Submission
from a2a_handoff.runtime.sweeps import Sweeps
from a2a_handoff.stores.base import Store, TaskRecord
from a2a_handoff.trust.agent_trust import AgentTrust

__all__ = ["TaskManager", "dedupe_key"]

log = logging.getLogger("a2a_handoff.runtime")

CLOSE_SECONDS = 2.0
"""How long closing waits for a cancelled run's last write before it stops it too."""


class TaskManager:
    """Starts, resumes, cancels and looks up tasks for one agent."""

    def __init__(
        self,
        agent: Agent,
        store: Store,
        settings: HandoffSettings,
        client: AgentClient,
        trust: AgentTrust,
        policy: EscalationPolicy | None = None,
        operators: frozenset[str] | None = None,
        *,
        dedupe_message_ids: bool = True,
        tools: McpTools | None = None,
    ) -> None:
        self.agent = agent
        self.tools = tools  # the MCP servers handlers may call (`ctx.tools.call`)
        self.dedupe_message_ids = dedupe_message_ids
        self.store = store
        self.policy = policy or EscalationPolicy()
        self.runs = Runs()
        self.lookup = TaskLookup(store, operators)
        self.leases = Leases(store, settings, self.sweep)
        self.handoffs = Handoffs.build(settings, store, client, self.leases.hold, trust)
        self.creator = TaskCreator(self, self.runs)
        self.intake = HandoffIntake(self.handoffs, self.creator)
        self.follow_ups = FollowUps(
            self, self.runs, self.lookup, dedupe_message_ids=dedupe_message_ids
        )
        self.sweeps = Sweeps(self, self.runs, self.leases)
        self.accepting = True  # False once draining: a message that would start a run is refused
        self._job: asyncio.Task[None] | None = None

    @property
    def operators(self) -> frozenset[str] | None:
        """This agent's operators (None: no authentication, every caller is an operator)."""
        return self.lookup.operators

    # -- what a run needs (runtime.run.RunHost) -------------------------------------------

    def created(self, run: TaskRun) -> None:
        self.runs.created(run)

    def forget(self, run: TaskRun) -> None:
        self.runs.forget(run)

    def free_task(self, task_id: str) -> None:
        self.leases.free_task(task_id)

    async def claim_task(self, task_id: str) -> bool:
        return await self.leases.claim_task(task_id)

    def strand(self, task_id: str) -> None:
        self.runs.stranded.add(task_id)

    # -- lifecycle ------------------------------------------------------------------------
    # start() → recover() → serve() → aclose(), in that order (`server.service` runs them).

    async def start(self) -> None:
        """This runner's heartbeat started (its leases renewed, stranded tasks swept): before
        `recover()`, so that the sweeps know this runner alive."""
        await self.leases.start()

    async def recover(self) -> int:
        """Fail (or resume) the tasks a previous process or a dead replica left running."""
        return await self.sweeps.recover()

    async def sweep(self, others: bool) -> int:
        """The heartbeat's sweep (see `runtime.sweeps`); how many tasks it failed. Draining,
        it leaves other replicas' orphans — and the tasks it handed over — to them."""
        return await self.sweeps.sweep(others and self.accepting)

    def serve(self) -> None:
        """Once recovered: the handoff outbox delivering (and replaying what a previous
        process left pending), and the agent's own background job running."""
        self.handoffs.outbox.start()
        self._start_background()

    def _start_background(self) -> None:
        """Run the agent's own background job (`agent.background(tasks)`), if it has one."""
        job = getattr(self.agent, "background", None)
        if job is None:
            return

        async def run() -> None:
            try:
                await job(LocalTasks(self.store, self._answer_as_operator))
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("the agent's background job failed")

        self._job = asyncio.create_task(run(), name="agent-background")

    async def drain(self, deadline: float) -> int:
        """Refuse what would start a run from now on, wait for the runs under way until
        `deadline` (the loop's clock), then hand over those left (`runtime.draining`); how
        many were handed over."""
        self.accepting = False
        await settle(self.runs, deadline)
        return await hand_over(self.runs, self.leases)

    async def aclose(self) -> None:
        """Stop running handlers; their tasks are failed by `recover()` at the next start."""
        await self.leases.aclose()
        if self._job is not None:
            self._job.cancel()
            await asyncio.wait([self._job], timeout=CLOSE_SECONDS)
            if self._job.done() and not self._job.cancelled():
                self._job.exception()  # retrieved: nothing left unread at exit
        await self.handoffs.aclose()
        runs = list(self.runs.by_task.values())
        for run in runs:
            if run.driver is not None:
                run.driver.cancel()
        jobs = {job for run in runs for job in (run.driver, run.journal.flusher) if job}
        if jobs:
            # A write still retried (the store out of reach) ends with the process: its task
            # is the next start's, or another replica's, to recover.
            _, stuck = await asyncio.wait(jobs, timeout=CLOSE_SECONDS)
            for job in stuck:
                job.cancel()
            for job in jobs:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await job
        if self.tools is not None:  # after the handlers: none is left calling
            await self.tools.aclose()

    # -- operations -----------------------------------------------------------------------

    async def send(self, message: Message, owner: str, *, answer: Answer = "task") -> Submission:
        """Start, continue or receive a task. `answer`: what the caller is given — the task
        as soon as it is stored ("task": returnImmediately), the outcome ("outcome": a
        blocking SendMessage) or a stream ("stream"); with the last two, a new task's handler
        may still answer with a direct Message (`Reply`)."""
        if message.role is not Role.USER:
            raise InvalidParamsError("message.role: a caller's message must be ROLE_USER")
        if not self.accepting:  # draining: nothing done with it, another replica takes it
            raise DrainingError()
        if message.task_id:
            return await self.follow_ups.follow_up(message, owner)
        if message.metadata and HANDOFF_EXTENSION_URI in message.metadata:
            return await self.intake.receive(message, owner)
        if not self.dedupe_message_ids:
            return self.creator.start(message, owner, None, answer=answer)
        key = dedupe_key(owner, message)
        return await self.creator.create(message, owner, key, answer=answer)

    async def _answer_as_operator(self, message: Message, owner: str) -> Submission:
        """This agent's own background job answers (the escalation fallback): an operator."""
        return await self.follow_ups.follow_up(message, owner, operator=True)

    async def owned(self, task_id: str, owner: str) -> TaskRecord:
        """The committed task if `owner` may see it; -32001 exactly as if absent otherwise."""
        return await self.lookup.owned(task_id, owner)

    def sees_all(self, principal: str) -> bool:
        """Whether `principal` is an operator of this agent: it sees every task."""
        return self.lookup.sees_all(principal)

    def decides(self, principal: str) -> bool:
        """Whether `principal` may decide an escalation here (see `runtime.lookup`)."""
        return self.lookup.decides(principal)

    async def cancel(self, task_id: str, owner: str) -> TaskRecord:
        """Cancel the task; with it the sub-tasks it delegated that are still open. A task
        being handed off is canceled by withdrawing its handoff (`handoff.withdraw`)."""
        record = await self.lookup.answerable(task_id, owner)
        if handing_off(record):
            return await self.handoffs.withdrawal.cancel(record)
        canceled = await cancel_task(self.lookup, self.runs, task_id, owner)
        await cancel_open(self.handoffs, canceled.task)
        return canceled
