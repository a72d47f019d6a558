"""Delegation from a running handler: `await ctx.delegation.ask(...)`, the task staying WORKING.

Invariants:
- the request is checkpointed before anything is sent: ONE transaction writes its outbox
  entry (`kind: "delegation"`, pending) and the task's journal record of it
  (`metadata[URI].delegations[<id>]`); a refusal before that (gate, contract, route) sends
  and writes nothing;
- the delegate's outcome is recorded in the task before the handler sees it, in the same
  transaction that closes the outbox entry; each answer to a question is recorded alike;
- a delegation's id is derived from the step (the message the handler runs on) and its
  ordinal in the step, and its key from the id: a handler re-run after a restart (a task
  that delegated is resumed, not failed) meets the same ids in the same order, gets the
  recorded outcomes back without asking again — only for the same request (its digest is
  recorded; another request there is a new delegation) — and re-sends a pending request with
  the same key and envelope, to the same configured route: the delegate answers it with the
  task it made the first time;
- everything is bounded by the delegation's `within`; a canceled handler cancels the
  sub-task it waits on, and a task canceled while it waits for its own caller cancels its
  sub-tasks that still ask for input (`cancel_open`).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from typing import Any

from a2a_handoff.delegated import Delegated, timed_out
from a2a_handoff.errors import GateRefused
from a2a_handoff.failpoints import failpoint
from a2a_handoff.handoff.envelope import HandoffEnvelope
from a2a_handoff.outcomes import Handoff
from a2a_handoff.protocol.models import Task
from a2a_handoff.protocol.states import TaskState
from a2a_handoff.runtime.delegation_record import recorded, request_digest
from a2a_handoff.runtime.delegation_writes import DelegationWrites, Delegator
from a2a_handoff.runtime.phases import Phase

log = logging.getLogger("a2a_handoff.runtime")

LANDING = 10.0  # seconds a cancel waits for the answer to a request in flight, to cancel its task


class Delegations(DelegationWrites):
    """One run's delegations: the run's `task_port.DelegationPort` (its port holds one)."""

    def __init__(self, run: Delegator) -> None:
        super().__init__(run)
        self.count = 0  # delegations made in this step: the ordinal of the next one's id
        self.timeouts: dict[str, float] = {}

    async def delegate(self, step: str, request: Handoff, within: float) -> Delegated:
        """Ask `request.target` for a sub-result (see the module's invariants)."""
        run = self.run
        run.speak()
        self.step = step
        await self._drained()
        asked = request_digest(request)
        while True:  # a re-run that asks something else than the record: a new delegation
            self.count += 1
            ident = f"delegation:{step}:{self.count}"
            known = recorded(run.journal.task).get(ident)
            if known is None or known.get("request") == asked:
                break
        self.timeouts[ident] = within
        if known is not None and known.get("rounds"):  # answered before a restart: replayed
            return self._bound(ident, known, 0)
        if known is not None:  # checkpointed before a restart: the same envelope again
            envelope, envelope_json, url = await self._stored(known)
            try:  # still a route of this agent, at the same address: else nothing is sent
                routed = self.handoffs.sender.target_url(str(known["route"]))
                if routed != url:
                    raise GateRefused(f"the route {known['route']} changed since the request")
            except GateRefused as exc:
                gone = Delegated(envelope.target.agent, TaskState.REJECTED, str(exc), sent=False)
                await self._record(ident, gone, envelope.handoff_id)
                return self._bound(ident, recorded(run.journal.task)[ident], 0)
        else:
            try:
                envelope, envelope_json = await self.handoffs.sender.prepare(
                    run.journal.task, request, run.acting_for, key_salt=ident
                )
            except GateRefused as exc:
                return Delegated(request.target, TaskState.REJECTED, str(exc), sent=False)
            url = envelope.target.url
            await self._checkpoint(ident, request.target, asked, envelope, envelope_json)
            failpoint("delegate.after_checkpoint")
        outcome = await self._outcome(ident, envelope, envelope_json, url, within)
        failpoint("delegate.after_answer")
        await self._record(ident, outcome, envelope.handoff_id)
        failpoint("delegate.after_record")
        return self._bound(ident, recorded(run.journal.task)[ident], 0)

    async def _outcome(
        self, ident: str, envelope: HandoffEnvelope, envelope_json: str, url: str, within: float
    ) -> Delegated:
        """Send the request (again), then follow the sub-task to its outcome, within
        `within` seconds; a cancel of the task (or the bound) cancels the sub-task — also one
        the delegate makes while the request is still in flight, once it answers."""
        run = self.run
        agent = envelope.target.agent
        sub: list[Task] = []  # the sub-task, once the delegate made it
        sending = asyncio.ensure_future(self.handoffs.subtasks.create(envelope, envelope_json))
        try:
            async with asyncio.timeout(within):
                created = await asyncio.shield(sending)  # a cancel waits for it: `_landed`
                if isinstance(created, str):
                    outcome = Delegated(agent, TaskState.REJECTED, created, key=ident)
                else:
                    sub.append(created)
                    if recorded(run.journal.task)[ident].get("taskId") != created.id:
                        said = f"{agent} took it: task {created.id}"
                        await self._write(ident, {"taskId": created.id}, said)
                    done = await self.handoffs.subtasks.outcome(url, created)
                    outcome = Delegated.of_task(agent, ident, 0, done)
        except TimeoutError:
            made = sub[0] if sub else await self._landed(ident, agent, sending)
            if isinstance(made, Task):
                with contextlib.suppress(Exception):  # said, best effort: the cancel goes on
                    said = f"No answer from {agent} within {within:g} s: canceling its task"
                    await self._write(ident, {}, f"{said} {made.id}")
                final = await self.handoffs.subtasks.stop(url, made.id, LANDING)
                outcome = timed_out(agent, ident, 0, within, made.id, final)
            elif isinstance(made, str):  # refused, late: nothing was done
                outcome = Delegated(agent, TaskState.REJECTED, made, key=ident)
            else:
                said = (
                    f"no answer from {agent} within {within:g} s, nor to the request:"
                    " whether it took it is unknown"
                )
                outcome = Delegated(agent, TaskState.FAILED, said, key=ident)
        except asyncio.CancelledError:
            if run.phase is Phase.CANCELING:  # the task's cancel, not the agent stopping
                await asyncio.shield(self._canceled(ident, envelope, url, sub, sending))
            sending.cancel()
            raise
        return outcome

    async def _landed(
        self, ident: str, agent: str, sending: asyncio.Future[Any]
    ) -> Task | str | None:
        """What a request still in flight comes to, once the delegate answers (waited for
        `LANDING` seconds at most), for a cancel to reach its task: the task it made, the
        reason it was refused, or None: no answer (whether it took it is unknown)."""
        if not sending.done():
            with contextlib.suppress(Exception):
                said = f"Canceling: waiting for {agent} to answer the request, to cancel its task"
                await self._write(ident, {}, said)
        try:
            async with asyncio.timeout(LANDING):
                created: Task | str = await asyncio.shield(sending)
        except Exception:  # no answer in time
            sending.cancel()
            return None
        return created

    async def answer(self, asked: Delegated, text: str) -> Delegated:
        """Reply to the delegate's question: its next outcome, recorded before it is seen."""
        run = self.run
        run.speak()
        ident, rnd = asked.key, asked.round + 1
        await self._drained()
        known = recorded(run.journal.task)[ident]
        rounds = known.get("rounds") or []
        if len(rounds) > rnd:  # answered before a restart: replayed
            return self._bound(ident, known, rnd)
        url = self.handoffs.sender.target_url(str(known["route"]))
        assert asked.task_id is not None
        message_id = f"delegation-{str(known['key'])[:32]}-{rnd}"
        timeout = self.timeouts.get(ident, 60.0)
        subtasks = self.handoffs.subtasks
        try:
            async with asyncio.timeout(timeout):
                answered = await subtasks.answer(
                    url, asked.task_id, run.journal.task.context_id, message_id, text
                )
                if isinstance(answered, str):
                    outcome = Delegated(
                        asked.agent, TaskState.FAILED, answered, task_id=asked.task_id
                    )
                else:
                    done = await subtasks.outcome(url, answered)
                    outcome = Delegated.of_task(asked.agent, ident, rnd, done)
        except TimeoutError:
            final = await subtasks.stop(url, asked.task_id, LANDING)
            outcome = timed_out(asked.agent, ident, rnd, timeout, asked.task_id, final)
        await self._record(ident, outcome, None)
        failpoint("delegate.after_record")
        return self._bound(ident, recorded(run.journal.task)[ident], rnd)

    def earlier(self, step: str) -> list[Delegated]:
        """The delegations of earlier steps, each at the outcome it had when the step `step`
        began — the same list when the step's handler runs again after a restart, so that
        it answers the same question and is given the recorded answer back."""
        self.step = step
        found = []
        for ident, known in recorded(self.run.journal.task).items():
            rounds = known.get("rounds") or []
            before = next((i for i, r in enumerate(rounds) if r.get("step") == step), len(rounds))
            if before:
                found.append(self._bound(ident, known, before - 1))
        return found

    def _bound(self, ident: str, known: dict[str, Any], rnd: int) -> Delegated:
        stored = Delegated.from_stored(str(known["agent"]), ident, rnd, known["rounds"][rnd])
        return dataclasses.replace(stored, _answer=self.answer)

    async def _canceled(
        self,
        ident: str,
        envelope: HandoffEnvelope,
        url: str,
        sub: list[Task],
        sending: asyncio.Future[Any],
    ) -> None:
        """The handler was canceled while it waited: cancel the sub-task — made, or being
        made by the request in flight — and close the request (best effort: the task is
        being canceled, or its run aborted)."""
        agent = envelope.target.agent
        known = recorded(self.run.journal.task).get(ident) or {}
        task_id = sub[0].id if sub else known.get("taskId")
        if task_id is None:
            landed = await self._landed(ident, agent, sending)
            task_id = landed.id if isinstance(landed, Task) else None
        if task_id is not None:
            await self.handoffs.subtasks.cancel(url, task_id)
        outcome = Delegated(
            agent, TaskState.CANCELED, "canceled by the delegating task", task_id=task_id
        )
        with contextlib.suppress(Exception):
            await self._record(ident, outcome, envelope.handoff_id)
