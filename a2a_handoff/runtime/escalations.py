"""The runtime's side of escalation: which outcomes become handoffs to the human agent, and
what a running handler asks of a human (`RunEscalation`, the run's `task_port.EscalationPort`).

A blocking escalation (`Escalate`) is a handoff of kind `escalation`; a non-blocking one
(`ctx.escalation.inform`) a message of kind `notice` that does not end the task
(`Handoff.to_human`); the same class of
failure `repeated_failures` times in one context escalates on its own, listing the failures
as what was tried. (What an escalation must say, and the policy, are `a2a_handoff.escalation`.)

On the human agent's side, a message to an escalation from someone who is not an operator is
a note (`add_note`): kept in the task's history and shown, never a decision.
"""

from __future__ import annotations

import logging
from typing import Protocol

from a2a_handoff.agent import TaskContext
from a2a_handoff.errors import IncompleteEscalationError
from a2a_handoff.escalation import Escalate, Escalation, EscalationPolicy, Need, Trigger
from a2a_handoff.handoff.handoffs import Handoffs
from a2a_handoff.outcomes import Failed, Handoff
from a2a_handoff.protocol.extension import HANDOFF_EXTENSION_URI, ext_metadata, with_ext_metadata
from a2a_handoff.protocol.models import Message, StreamResponse, Task, utc_now
from a2a_handoff.protocol.states import TaskState
from a2a_handoff.protocol.steps import agent_message, status_event, status_text
from a2a_handoff.runtime.journal import Journal
from a2a_handoff.runtime.replay import Replay
from a2a_handoff.stores.base import Commit, Store, TaskQuery, TaskRecord

log = logging.getLogger("a2a_handoff.runtime")


class Asking(Protocol):
    """What asking a human needs from the run (`runtime.run.TaskRun`)."""

    journal: Journal
    replay: Replay | None

    @property
    def handoffs(self) -> Handoffs: ...

    @property
    def acting_for(self) -> str: ...

    def speak(self) -> None: ...

    def emit(self, task: Task, item: StreamResponse) -> None: ...

    def emit_state(self, state: TaskState, message: Message | None = None) -> None: ...


class RunEscalation:
    """A run's approvals and notices, as its handler asks for them (`ctx.escalation`)."""

    def __init__(self, run: Asking) -> None:
        self.run = run
        self.notices = 0  # non-blocking escalations sent, each with a key of its own

    def use_approval(self, decision_id: str) -> bool:
        """Record that an operator's approval was used (False: it was, already). Kept in the
        task's metadata, written with the step's events — the receiver makes sure no other
        task ever holds the same decision (it deduplicates returns on the decision's id)."""
        run = self.run
        run.speak()
        used = ext_metadata(run.journal.task).get("approvalsUsed") or []
        if decision_id in used:  # used — by this very step, when it is run again: replayed
            return run.replay is not None and run.replay.reuse(decision_id)
        task = with_ext_metadata(run.journal.task, approvalsUsed=[*used, decision_id])
        run.emit(task, status_event(task, {HANDOFF_EXTENSION_URI: {"approvalUsed": decision_id}}))
        return True

    async def inform(self, escalation: Escalation) -> str:
        """A non-blocking escalation: delivered (durably taken by the human agent) first."""
        run = self.run
        run.speak()
        self.notices += 1
        handoffs = run.handoffs
        envelope, envelope_json = await handoffs.sender.prepare(
            run.journal.task,
            Handoff.to_human(escalation, blocking=False),
            run.acting_for,
            key_salt=f"notice:{self.notices}",
        )
        created = await handoffs.notices.send(envelope, envelope_json)
        said = f"Informed {envelope.target.agent} (task {created.id}): {escalation.what_is_needed}"
        run.emit_state(TaskState.WORKING, agent_message(said, run.journal.task))
        return created.id


def escalation_handoff(outcome: Escalate, policy: EscalationPolicy) -> Handoff | Failed:
    """A blocking escalation is a handoff to the human agent, as durable as any."""
    escalation = outcome.escalation
    declared = (Trigger.VALUE_UNCERTAINTY, Trigger.KNOWLEDGE_GAP)
    if escalation.trigger in declared and not policy.declarations:
        return Failed(f"escalation on {escalation.trigger} is turned off for this agent")
    return Handoff.to_human(escalation)


async def repeated_failure(
    store: Store, ctx: TaskContext, failure: Failed, policy: EscalationPolicy
) -> Escalate | None:
    """The same class of failure `repeated_failures` times in `ctx`'s context escalates
    (the context's tasks in `ctx`'s tenant: a caller naming another tenant's context id
    neither adds to its count nor reads its failures)."""
    limit = policy.repeated_failures
    if not limit:
        return None
    task = ctx.task
    earlier: list[TaskRecord] = []
    token: str | None = None
    while token != "":
        page = await store.list_tasks(
            TaskQuery(
                owner=None,
                tenant=ctx.tenant,
                context_id=task.context_id,
                state=TaskState.FAILED,
                page_size=100,
                page_token=token,
            )
        )
        earlier += [r for r in page.records if failure_kind(r.task) == failure.kind]
        token = page.next_page_token
    if len(earlier) + 1 < limit:
        return None
    earlier.sort(key=lambda r: r.updated_at)
    tried = [f"task {r.id}: {status_text(r.task)}" for r in earlier[-(limit - 1) :]]
    tried.append(f"task {task.id} (this one): {failure.reason}")
    try:
        escalation = Escalation(
            f"The same failure ({failure.kind}) happened {len(tried)} times in this"
            " conversation; retrying again is unlikely to help.",
            tried,
            "a decision on how to go on, or the information that is missing",
            Need.DECISION,
            Trigger.REPEATED_FAILURE,
            resume=ctx.transfer_context,
            target=policy.target,
        )
    except IncompleteEscalationError:
        return None
    return Escalate(escalation)


def failure_kind(task: Task) -> str | None:
    """The class of failure a FAILED task recorded (see `Failed.kind`)."""
    message = task.status.message
    ext = (message.metadata or {}).get(HANDOFF_EXTENSION_URI) if message else None
    failure = ext.get("failure") if isinstance(ext, dict) else None
    kind = failure.get("kind") if isinstance(failure, dict) else None
    return kind if isinstance(kind, str) else None


async def add_note(store: Store, record: TaskRecord, message: Message, by: str) -> TaskRecord:
    """A note on an escalation from `by`, who may see it but not decide it: the message is
    kept in the history (whatever it claimed in its metadata dropped: a note is never a
    verdict) and the status says so; the task still waits for an operator. One write, with
    check-and-set (ConflictError if the task moved meanwhile)."""
    task = record.task
    note = message.model_copy(update={"metadata": {HANDOFF_EXTENSION_URI: {"note": {"by": by}}}})
    said = message.text.strip()[:500]
    shown = agent_message(
        f"Note from {by or 'a user'} (not a decision: only an operator decides): {said}",
        task,
        **{HANDOFF_EXTENSION_URI: {"note": {"by": by}}},
    )
    status = task.status.model_copy(update={"message": shown, "timestamp": utc_now()})
    noted = task.model_copy(update={"history": [*(task.history or []), note], "status": status})
    updated = record.advanced(noted, 1, utc_now())
    await store.commit(Commit(updated, [status_event(noted)], expected_version=record.version))
    log.info("a note on escalation %s from %r (not an operator)", task.id, by)
    return updated
