"""The sending side's delivery: create the successor on the target, then terminate.

Create: `SendMessage` to the target carrying the envelope (`returnImmediately`), retried —
the target creates at most one task per idempotency key — behind the client's breaker, at
the pace of the delivery's `RetryPolicy`. What each try means is `classify`'s (retry, done,
refused, give up); the delivery acts on it: a task → terminate TRANSFERRED; a refusal or
persistent errors → the source FAILED, or, under a contract, its recovery path (`on_reject`,
`on_error`, `on_timeout`): a new handoff checkpointed in the same transaction that closes
the failed entry, delivered next as a job of its own (`handoff.fallback`). `on_timeout`
follows only while no attempt can have reached the target, so a fallback never doubles the
work. Only the target can tell whether it took an envelope, so past its TTL a pending entry
is still replayed: the target refuses an expired one it never took (`envelope_expired`),
and the source then fails `handoff_expired`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from typing import Any, cast

import pydantic_core
from pydantic import ValidationError

from a2a_handoff.client.answers import Created, created_task
from a2a_handoff.client.client import AgentClient
from a2a_handoff.client.replicas import replicas
from a2a_handoff.client.retry import RetryPolicy
from a2a_handoff.contracts.contract import Contract
from a2a_handoff.errors import (
    CircuitOpenError,
    GateRefused,
    HandoffError,
    HandoffProcessingError,
    RemoteError,
    UnavailableError,
)
from a2a_handoff.failpoints import failpoint
from a2a_handoff.handoff.classify import (
    GIVEN_UP,
    Done,
    GiveUp,
    Outcome,
    Refused,
    Retry,
    Rules,
    Tries,
    Verdict,
    classify,
)
from a2a_handoff.handoff.envelope import HandoffEnvelope
from a2a_handoff.handoff.fallback import Rerouted, Unfollowed, path_of, reroute
from a2a_handoff.handoff.job import DeliveryJob
from a2a_handoff.handoff.sender import HandoffSender, missing_capabilities
from a2a_handoff.handoff.settings import HandoffSettings
from a2a_handoff.handoff.terminate import delayed, failed, reopened, transferred
from a2a_handoff.observe import events, tracing
from a2a_handoff.protocol.extension import HANDOFF_EXTENSION_URI as URI
from a2a_handoff.protocol.extension import SIGNATURE_KEY
from a2a_handoff.protocol.models import Role, Task, parse_time, utc_now
from a2a_handoff.stores.base import OutboxEntry, Store, TaskRecord
from a2a_handoff.trust.agent_trust import AgentTrust

log = logging.getLogger("a2a_handoff.handoff")

FOREVER = sys.maxsize  # a handoff is tried until it ends: the target decides, not a count


class Delivery:
    """Delivers checkpointed handoffs (and notices) for one agent."""

    def __init__(
        self,
        settings: HandoffSettings,
        store: Store,
        client: AgentClient,
        sender: HandoffSender,
        trust: AgentTrust,
    ) -> None:
        self.settings = settings
        self.store = store
        self.client = client
        self.sender = sender
        self.trust = trust
        pace = settings.retry_interval
        # A handoff is tried again every `retry_interval` (an open breaker fails fast meanwhile).
        self.policy = RetryPolicy(FOREVER, float("inf"), pace, pace)
        self.returns_given_up = 0  # returns (decisions) this process gave up delivering
        self.last_given_up: dict[str, Any] | None = None

    async def deliver(self, job: DeliveryJob) -> TaskRecord | DeliveryJob | None:
        """Create the task on the target (retrying) and terminate: the source's final record
        (a reopened task's, WORKING, for a handler that waits), or the job a contract's
        recovery path checkpointed to follow this one. In the handoff's trace; a replay
        (not `fresh`) is a recovery span."""
        entry = job.entry
        name = "a2a.deliver" if job.fresh else "a2a.recovery"
        with tracing.adopted(job.trace_id), tracing.span(name, "a2a.handoff_id", job.handoff_id):
            envelope, body = job.opened()
            contract = self._contract_of(envelope)
            returns = self._returns_policy(envelope)
            rules = Rules(entry.target_name, contract, job.reopen, returns)
            signer = self.trust.signing_key
            params = _create_params(envelope, body, self.trust.sign_envelope(body.encode()))
            started = asyncio.get_running_loop().time()
            tries = Tries(may_have_arrived=not job.fresh)
            source, said = job.source, None
            while True:
                if self.trust.signing_key is not signer:  # keys rotated while it waited
                    signer = self.trust.signing_key
                    params = _create_params(envelope, body, self.trust.sign_envelope(body.encode()))
                outcome = await self._try(entry, envelope, params)
                elapsed = asyncio.get_running_loop().time() - started
                age = _age(entry) if returns is not None else 0.0  # only a return's counts
                tries = Tries(tries.failed, tries.errors, tries.may_have_arrived, elapsed, age)
                verdict = classify(outcome, tries, rules)
                if not isinstance(verdict, Retry):
                    return await self._end(job, envelope, contract, verdict, source, tries)
                tries = verdict.tries
                source, said = await self._delayed(entry, envelope, verdict, source, said)
                wait = self.policy.backoff(tries.failed)
                if returns is not None:  # a return backs off, up to its give-up time
                    left = max(0.0, returns.total_seconds - _age(entry))
                    wait += min(returns.backoff(tries.failed), left)
                await asyncio.sleep(wait)

    def _returns_policy(self, envelope: HandoffEnvelope) -> RetryPolicy | None:
        """A return (a decision going back) is retried with backoff, and given up (FAILED)
        past `return_give_up` seconds (else its TTL) since it was checkpointed."""
        if envelope.kind != "return":
            return None
        limit = self.settings.return_give_up or float(envelope.ttl_seconds)
        pace = self.settings.retry_interval
        return RetryPolicy(FOREVER, limit, 2 * pace, min(30.0, 64 * pace))

    async def _try(self, entry: OutboxEntry, envelope: HandoffEnvelope, params: str) -> Outcome:
        """One try: the target's card gates the envelope, the call creates the task: its answer."""
        try:
            card = await self.client.card(entry.target_url)
            problems = missing_capabilities(envelope.required_capabilities, card, None)
            if problems:
                return GateRefused("; ".join(problems))
            with tracing.span("a2a.create", "a2a.target", entry.target_name):
                created: Task | Created = await self.client.call_json(
                    entry.target_url, "SendMessage", params, extensions=[URI], idempotent=True,
                    read=created_task,
                )  # fmt: skip
        except (RemoteError, UnavailableError, CircuitOpenError, ValidationError) as exc:
            return exc
        failpoint("handoff.after_create")
        return created

    async def _end(
        self,
        job: DeliveryJob,
        envelope: HandoffEnvelope,
        contract: Contract | None,
        verdict: Verdict,
        source: TaskRecord | None,
        tries: Tries,
    ) -> TaskRecord | DeliveryJob | None:
        """Act on a verdict that ends the delivery."""
        entry = job.entry
        if isinstance(verdict, Done):
            events.latency(envelope, "created")
            with tracing.span("a2a.terminate", "a2a.handoff_id", entry.handoff_id):
                record = await transferred(self.store, entry, envelope, verdict.created, source)
            after = f"after {tries.failed} failed tries" if tries.failed else ""
            closed(entry, envelope, contract, "accepted", after)
            return record
        assert isinstance(verdict, Refused | GiveUp)
        if isinstance(verdict, Refused) and verdict.reopen:
            events.handoff_sent(envelope, verdict.outcome, verdict.reason)
            return await reopened(self.store, entry, verdict.reason, source)
        if verdict.outcome == GIVEN_UP:
            self._gave_up(entry, verdict.reason)
            return await self._failed(entry, envelope, None, verdict.reason, verdict.outcome)
        if verdict.path is None:
            return await self._failed(entry, envelope, contract, verdict.reason, verdict.outcome)
        return await self._recover(entry, envelope, contract, verdict.path, verdict)

    async def _recover(
        self,
        entry: OutboxEntry,
        envelope: HandoffEnvelope,
        contract: Contract | None,
        which: str,
        verdict: Refused | GiveUp,
    ) -> TaskRecord | DeliveryJob | None:
        """Follow the contract's recovery path `which` (`handoff.fallback`): the source
        FAILED (no contract, or the path names the source), or the job to deliver next."""
        reason, outcome = verdict.reason, verdict.outcome
        if contract is None or path_of(contract, which) in ("", "source"):
            suffix = f" ({contract.id}: {which} → source)" if contract is not None else ""
            return await self._failed(entry, envelope, contract, reason + suffix, outcome)
        step = await reroute(self.store, self.sender, entry, envelope, contract, which, reason)
        if isinstance(step, Unfollowed):
            return await self._failed(entry, envelope, contract, step.detail, outcome)
        if not isinstance(step, Rerouted):
            return step
        closed(entry, envelope, contract, outcome, step.detail)
        events.recovery(
            "contract_path", "handoff %s: %s", entry.handoff_id, step.detail,
            handoff_id=entry.handoff_id, task_id=entry.task_id, context_id=entry.context_id,
            trace_id=envelope.trace_id,
        )  # fmt: skip
        return step.job

    async def _delayed(
        self,
        entry: OutboxEntry,
        envelope: HandoffEnvelope,
        retry: Retry,
        source: TaskRecord | None,
        said: tuple[str, bool] | None,
    ) -> tuple[TaskRecord | None, tuple[str, bool] | None]:
        """A failed try, said only when what is wrong changes (the first failure, another
        reason, the target's breaker opened): one log line, and the source task's status,
        so whoever follows the task sees why it waits. The source record as now written,
        and what is said now."""
        words = trouble(entry.target_name, entry.target_url, retry.error, self.client)
        wait = self._next_try(entry.target_url)
        # Once the breaker opened, its cool-down paces the tries: that stays said.
        opened = wait > self.settings.retry_interval or bool(said and said[1])
        if (words, opened) == said:
            return source, said
        text = f"{words}; retrying, next try in {_seconds(wait)}"
        events.handoff_delayed(envelope, text, retry.tries.failed)
        try:
            return await delayed(self.store, entry, text, source), (words, opened)
        except HandoffError:  # the store: the delivery goes on, the next change says it
            return None, (words, opened)

    def _next_try(self, address: str) -> float:
        """Seconds until the next try can reach the target: its breaker's cool-down left."""
        opens = min(self.client.breaker(url).retry_in() for url in replicas(address))
        return max(self.settings.retry_interval, opens)

    async def _failed(
        self,
        entry: OutboxEntry,
        envelope: HandoffEnvelope,
        contract: Contract | None,
        reason: str,
        outcome: str,
    ) -> TaskRecord | None:
        """The source FAILED, its entry closed (`terminate.failed`), and counted."""
        with tracing.span("a2a.terminate", "a2a.handoff_id", entry.handoff_id):
            record = await failed(self.store, entry, reason)
        closed(entry, envelope, contract, outcome, reason)
        return record

    def _gave_up(self, entry: OutboxEntry, reason: str) -> None:
        """A return given up: said, and counted for /health."""
        events.recovery(
            "return_given_up", "handoff %s: %s", entry.handoff_id, reason,
            handoff_id=entry.handoff_id, task_id=entry.task_id, context_id=entry.context_id,
        )  # fmt: skip
        self.returns_given_up += 1
        self.last_given_up = {
            "handoffId": entry.handoff_id,
            "taskId": entry.task_id,
            "target": entry.target_name,
            "reason": reason,
            "at": utc_now(),
        }

    def given_up_report(self) -> dict[str, Any]:
        """The returns given up since this process started, for /health (their tasks ended
        FAILED with the reason, durably)."""
        return {"failedReturns": self.returns_given_up, "lastFailedReturn": self.last_given_up}

    def _contract_of(self, envelope: HandoffEnvelope) -> Contract | None:
        catalog = self.settings.contracts
        if catalog is None or not envelope.contract:
            return None
        return catalog.by_id(envelope.contract)

    async def notify(
        self, envelope: HandoffEnvelope, envelope_json: str, attempts_for: float = 30.0
    ) -> Task:
        """Deliver a message that does not end the task (a notice); the task it created.

        Retried with the same key for up to `attempts_for` seconds (the target deduplicates);
        raises HandoffError when the target refuses it or stays unreachable.
        """
        target = envelope.target
        signature = self.trust.sign_envelope(envelope_json.encode())
        params = _create_params(envelope, envelope_json, signature)
        deadline = asyncio.get_running_loop().time() + attempts_for
        rules = Rules(target.agent)
        while True:
            try:
                result = await self.client.call_json(
                    target.url, "SendMessage", params, extensions=[URI], idempotent=True
                )
                answer: Outcome = Task.model_validate(
                    result.get("task") if isinstance(result, dict) else None
                )
            except (RemoteError, UnavailableError, CircuitOpenError, ValidationError) as exc:
                answer = exc
            verdict = classify(answer, Tries(), rules)
            if isinstance(verdict, Done):
                return cast(Task, verdict.created)  # the answer, read whole
            if not isinstance(verdict, Retry):
                raise HandoffError(verdict.reason)
            if asyncio.get_running_loop().time() >= deadline:
                raise HandoffError(f"{target.agent} unreachable: {verdict.error}")
            await asyncio.sleep(self.settings.retry_interval)


def closed(
    entry: OutboxEntry,
    envelope: HandoffEnvelope,
    contract: Contract | None,
    outcome: str,
    detail: str = "",
) -> None:
    """A sent handoff's ledger row closed: its metrics (the contract's too) and line."""
    events.handoff_sent(envelope, outcome, detail)
    if outcome == "accepted":
        events.latency(envelope, "terminated")
    if contract is None or contract.observability is None:
        return
    elapsed = parse_time(utc_now()) - parse_time(entry.created_at)
    names = [
        name
        for name in contract.observability.metrics
        if not (name.endswith("rejected") and not outcome.startswith("rejected"))
        and not (name.endswith("escalated") and not (
            envelope.kind == "escalation" and outcome == "accepted"))
    ]  # fmt: skip
    events.contract(names, contract.id, elapsed.total_seconds() * 1000)


def _age(entry: OutboxEntry) -> float:
    """Seconds since the entry was checkpointed."""
    return (parse_time(utc_now()) - parse_time(entry.created_at)).total_seconds()


def trouble(name: str, address: str, exc: Exception, client: AgentClient) -> str:
    """Why a try failed, in the words of someone waiting for the handoff: `cannot reach
    billing at http://… (connection refused)`."""
    where = f"{name} at {address}"
    if isinstance(exc, CircuitOpenError):
        reasons = [client.breaker(url).last_reason for url in replicas(address)]
        last = next((r for r in reasons if r), "")
        return f"cannot reach {where} ({last or 'it failed too often'})"
    if isinstance(exc, UnavailableError):
        text = str(exc)
        for url in replicas(address):
            if text.startswith(f"cannot reach {url} "):
                return f"cannot reach {where} " + text[len(f"cannot reach {url} ") :]
        return f"cannot deliver to {where}: {text}"
    if isinstance(exc, RemoteError):
        if exc.code == HandoffProcessingError.code:
            return f"{name} is still creating the task"
        return f"{name} failed to take it: {exc.message}"
    return f"{where} did not answer with a task"


def _seconds(value: float) -> str:
    return f"{value:.1f} s" if value < 2 else f"{round(value)} s"


def handoff_message_id(envelope: HandoffEnvelope) -> str:
    return f"handoff-{envelope.idempotency_key}"


def _create_params(envelope: HandoffEnvelope, envelope_json: str, signature: str) -> str:
    """The SendMessage params that create the successor, as JSON.

    The message carries the envelope in its metadata (`envelope_json`: the canonical JSON
    the outbox holds, so it is not encoded again) with its `signature` beside it, and points
    back at the source task. The source needs only the successor's id and status back:
    `historyLength: 0`.
    """
    message = {
        "messageId": handoff_message_id(envelope),
        "role": _USER,
        "parts": [{"text": envelope.summary}, {"data": envelope.transfer_context}],
        "contextId": envelope.context_id,
        "extensions": [URI],
        "referenceTaskIds": [envelope.source.task_id],
    }
    # Encoded as pydantic encodes the envelope: a context may hold dates, UUIDs, decimals.
    head = pydantic_core.to_json(message).decode()[:-1]  # open: the metadata follows
    return (
        f'{{"message":{head}{_ENVELOPE_MEMBER}{envelope_json}{_SIGNATURE_MEMBER}'
        f"{json.dumps(signature)}{_CONFIGURATION}"
    )


# The constant parts of `_create_params`, encoded once.
_USER = Role.USER.value
_ENVELOPE_MEMBER = f',"metadata":{{{json.dumps(URI)}:'
_SIGNATURE_MEMBER = f",{json.dumps(SIGNATURE_KEY)}:"
_CONFIGURATION = '}},"configuration":{"returnImmediately":true,"historyLength":0}}'
