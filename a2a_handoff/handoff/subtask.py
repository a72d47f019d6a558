"""A delegation's wire side: create the sub-task at the delegate, wait for its outcome.

The request is the handoff's: the same signed envelope (`kind: "delegation"`) in the same
`SendMessage`, retried with the same key — the delegate creates at most one task per key and
answers a replay with that task — and classified as a handoff's tries are (`classify`). Then
the delegating side follows the sub-task until it ends or asks for input: its stream, and
after a dropped stream (the delegate restarting) its state, read again at the delivery's
pace. Answers to the delegate's questions are follow-up messages with ids derived from the
delegation's key, so a replay is recognised by the delegate (one message id, one step).
Nothing here bounds time: the caller does (`asyncio.timeout`).
"""

from __future__ import annotations

import asyncio
import logging
from typing import cast

import httpx
from pydantic import ValidationError

from a2a_handoff.client.client import AgentClient
from a2a_handoff.errors import (
    CircuitOpenError,
    RemoteError,
    TaskNotCancelableError,
    UnavailableError,
)
from a2a_handoff.failpoints import failpoint
from a2a_handoff.handoff.classify import Done, Outcome, Refused, Retry, Rules, Tries, classify
from a2a_handoff.handoff.envelope import HandoffEnvelope
from a2a_handoff.handoff.wire import create_params
from a2a_handoff.protocol.extension import HANDOFF_EXTENSION_URI as URI
from a2a_handoff.protocol.models import Task
from a2a_handoff.protocol.states import TaskState
from a2a_handoff.trust.agent_trust import AgentTrust

log = logging.getLogger("a2a_handoff.handoff")

TRIES = (RemoteError, UnavailableError, CircuitOpenError, ValidationError, httpx.HTTPError)


def settled(state: TaskState) -> bool:
    """Whether a sub-task in `state` has an outcome for its delegator (ended, or asks)."""
    return state.terminal or state.interrupted


class SubTasks:
    """Creates, follows, answers and cancels this agent's sub-tasks at their delegates."""

    def __init__(self, client: AgentClient, trust: AgentTrust, pace: float) -> None:
        self.client = client
        self.trust = trust
        self.pace = pace

    async def create(self, envelope: HandoffEnvelope, envelope_json: str) -> Task | str:
        """Create the sub-task (retried until it is taken or refused): the task the delegate
        answered — possibly REJECTED by it (its trust list, contract, loop guard) — or the
        reason the request was refused before a task was made."""
        params = create_params(
            envelope, envelope_json, self.trust.sign_envelope(envelope_json.encode())
        )
        rules, tries = Rules(envelope.target.agent), Tries()
        while True:
            try:
                result = await self.client.call_json(
                    envelope.target.url, "SendMessage", params, extensions=[URI], idempotent=True
                )
                answer: Outcome = Task.model_validate(
                    result.get("task") if isinstance(result, dict) else None
                )
            except TRIES as exc:
                answer = exc
            verdict = classify(answer, tries, rules)
            if isinstance(verdict, Done):
                failpoint("delegate.after_send")
                return cast(Task, verdict.created)  # the answer, read whole
            if isinstance(verdict, Refused) and isinstance(answer, Task):
                return answer  # REJECTED by the delegate: its reason is the outcome
            if not isinstance(verdict, Retry):
                return verdict.reason
            tries = verdict.tries
            log.info("delegation %s: %s; retrying", envelope.handoff_id, verdict.error)
            await asyncio.sleep(self.pace)

    async def outcome(self, url: str, task: Task) -> Task:
        """Follow the sub-task until it ends or asks for input; the task as it then is.

        Its stream first; once that says the task settled (or the task ended before it
        opened: -32004), one read for the task whole (artifacts too). A delegate that does
        not answer is tried again with backoff, one call a try — its breaker is not run down
        while it restarts."""
        failures = 0
        while True:
            if settled(task.status.state):
                return task
            try:
                try:
                    async for _, item in self.client.subscribe(url, task.id, resumes=0):
                        update = item.status_update
                        state = update.status.state if update is not None else None
                        if item.task is not None:
                            state = item.task.status.state
                        if state is not None and settled(state):
                            break
                except RemoteError:
                    pass  # ended before the stream opened (or gone): the read says which
                result = await self.client.call(  # with the extension: TRANSFERRED as such
                    url, "GetTask", {"id": task.id, "historyLength": 0}, extensions=[URI]
                )
                task = Task.model_validate(result)
                failures = 0
                continue
            except TRIES as exc:  # the delegate restarting
                failures += 1
                log.info("sub-task %s at %s: %s; reading it again", task.id, url, exc)
            await asyncio.sleep(min(2.0, self.pace * 2 ** min(failures - 1, 8)))

    async def answer(
        self, url: str, task_id: str, context_id: str, message_id: str, text: str
    ) -> Task | str:
        """Send the answer to the delegate's question (a follow-up with a derived id, so a
        replay is the same message); the sub-task as it then is, or why it was refused."""
        params = {
            "message": {
                "messageId": message_id,
                "role": "ROLE_USER",
                "parts": [{"text": text}],
                "taskId": task_id,
                "contextId": context_id,
            },
            "configuration": {"returnImmediately": True, "historyLength": 0},
        }
        while True:
            try:
                result = await self.client.call(url, "SendMessage", params, idempotent=True)
                return Task.model_validate(result.get("task") if isinstance(result, dict) else None)
            except RemoteError as exc:
                return f"the answer was refused: {exc.message}"
            except TRIES as exc:
                log.info("answer to sub-task %s at %s: %s; retrying", task_id, url, exc)
            await asyncio.sleep(self.pace)

    async def stop(self, url: str, task_id: str, within: float) -> Task | None:
        """Cancel the sub-task, tried again while the delegate does not answer (for `within`
        seconds): the task as it ended — CANCELED, or the outcome it reached before the
        cancel (a task that ended cannot be canceled: it is read) — or None when the
        delegate gave no such answer in time (the sub-task's state is unknown)."""
        loop = asyncio.get_running_loop()
        deadline, failures = loop.time() + within, 0
        while True:
            try:
                try:
                    return await self.client.cancel(url, task_id)
                except RemoteError as exc:
                    if exc.code != TaskNotCancelableError.code:
                        log.info("cancel of sub-task %s at %s: %s", task_id, url, exc)
                        return None
                result = await self.client.call(
                    url, "GetTask", {"id": task_id, "historyLength": 0}, extensions=[URI]
                )
                task = Task.model_validate(result)
                if task.status.state.terminal:
                    return task
            except TRIES as exc:
                log.info("cancel of sub-task %s at %s: %s; trying again", task_id, url, exc)
            failures += 1
            wait = min(1.0, self.pace * 2 ** min(failures - 1, 8))
            if loop.time() + wait > deadline:
                return None
            await asyncio.sleep(wait)

    async def cancel(self, url: str, task_id: str, within: float = 5.0) -> None:
        """Cancel the sub-task (best effort, bounded: the delegate may have ended it)."""
        try:
            async with asyncio.timeout(within):
                await self.client.cancel(url, task_id)
        except (*TRIES, TimeoutError) as exc:
            log.info("cancel of sub-task %s at %s: %s", task_id, url, exc)
