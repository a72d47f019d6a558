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
import logging
import sys
from typing import Any

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
from a2a_handoff.failpoints import failpoint, pausepoint
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
from a2a_handoff.handoff.reach import Reach, readdressed
from a2a_handoff.handoff.sender import HandoffSender, missing_capabilities
from a2a_handoff.handoff.settings import HandoffSettings
from a2a_handoff.handoff.terminate import failed, reopened, transferred
from a2a_handoff.handoff.wire import create_params
from a2a_handoff.observe import events, tracing
from a2a_handoff.protocol.extension import HANDOFF_EXTENSION_URI as URI
from a2a_handoff.protocol.models import Task, parse_time, utc_now
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
            reach = await Reach.of(self.store, job)
            if reach.unreached:  # no try reached its address: the route's may have changed
                moved = await readdressed(self.store, self.sender, entry, envelope)
                if moved is not None:
                    return moved
            contract = self._contract_of(envelope)
            returns = self._returns_policy(envelope)
            rules = Rules(entry.target_name, contract, job.reopen, returns)
            signer = self.trust.signing_key
            params = create_params(envelope, body, self.trust.sign_envelope(body.encode()))
            started = asyncio.get_running_loop().time()
            tries = Tries(may_have_arrived=not job.fresh and not reach.unreached)
            said = None
            while True:
                if self.trust.signing_key is not signer:  # keys rotated while it waited
                    signer = self.trust.signing_key
                    params = create_params(envelope, body, self.trust.sign_envelope(body.encode()))
                outcome, sent = await self._try(entry, envelope, params, reach)
                elapsed = asyncio.get_running_loop().time() - started
                age = _age(entry) if returns is not None else 0.0  # only a return's counts
                tries = Tries(
                    tries.failed,
                    tries.errors,
                    tries.may_have_arrived,
                    elapsed,
                    age,
                    envelope.expired(),
                )
                verdict = classify(outcome, tries, rules, sent)
                if not isinstance(verdict, Retry):
                    return await self._end(job, envelope, contract, verdict, reach.source, tries)
                tries = verdict.tries
                said = await self._delayed(envelope, verdict, reach, said)
                wait = self.policy.backoff(tries.failed)
                if returns is not None:  # a return backs off, up to its give-up time
                    left = max(0.0, returns.total_seconds - _age(entry))
                    wait += min(returns.backoff(tries.failed), left)
                await asyncio.sleep(wait)
                ended = await reach.superseded()
                if ended is not None:  # canceled, or replaced, while it waited: not ours now
                    return ended

    def _returns_policy(self, envelope: HandoffEnvelope) -> RetryPolicy | None:
        """A return (a decision going back) is retried with backoff, and given up (FAILED)
        past `return_give_up` seconds (else its TTL) since it was checkpointed."""
        if envelope.kind != "return":
            return None
        limit = self.settings.return_give_up or float(envelope.ttl_seconds)
        pace = self.settings.retry_interval
        return RetryPolicy(FOREVER, limit, 2 * pace, min(30.0, 64 * pace))

    async def _try(
        self, entry: OutboxEntry, envelope: HandoffEnvelope, params: str, reach: Reach
    ) -> tuple[Outcome, bool]:
        """One try: the target's card gates the envelope (read anew while no try reached
        the target), the call creates the task: its answer, and whether the envelope left."""
        try:
            card = await self.client.card(entry.target_url, fresh=reach.unreached)
            problems = missing_capabilities(envelope.required_capabilities, card, None)
            if problems:
                return GateRefused("; ".join(problems)), False
            await reach.before_send()
        except (UnavailableError, CircuitOpenError, ValidationError, HandoffError) as exc:
            return exc, False
        await pausepoint("handoff.before_send")
        try:
            with tracing.span("a2a.create", "a2a.target", entry.target_name):
                created: Task | Created = await self.client.call_json(
                    entry.target_url,
                    "SendMessage",
                    params,
                    extensions=[URI],
                    idempotent=True,
                    read=created_task,
                )
        except (RemoteError, UnavailableError, CircuitOpenError, ValidationError) as exc:
            return exc, True
        failpoint("handoff.after_create")
        await pausepoint("handoff.after_create")
        return created, True

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
            "contract_path",
            "handoff %s: %s",
            entry.handoff_id,
            step.detail,
            handoff_id=entry.handoff_id,
            task_id=entry.task_id,
            context_id=entry.context_id,
            trace_id=envelope.trace_id,
        )
        return step.job

    async def _delayed(
        self,
        envelope: HandoffEnvelope,
        retry: Retry,
        reach: Reach,
        said: tuple[str, bool, bool] | None,
    ) -> tuple[str, bool, bool] | None:
        """A failed try, said only when what is wrong changes (the first failure, another
        reason, the target's breaker opened, a try that may have reached it): one log line,
        and the source task's status — so whoever follows the task sees why it waits — with
        whether a try may have reached the target (`handoff.reach`). What is said now."""
        entry = reach.entry
        words = trouble(entry.target_name, entry.target_url, retry.error, self.client)
        wait = self._next_try(entry.target_url)
        # Once the breaker opened, its cool-down paces the tries: that stays said.
        opened = wait > self.settings.retry_interval or bool(said and said[1])
        now = (words, opened, retry.tries.may_have_arrived)
        if now == said:
            return said
        arrived = "; it may have taken it" if retry.tries.may_have_arrived else ""
        text = f"{words}{arrived}; retrying, next try in {_seconds(wait)}"
        events.handoff_delayed(envelope, text, retry.tries.failed)
        try:
            await reach.note(text, retry.tries.may_have_arrived)
        except HandoffError:  # the store, or the entry replaced: the next change says it
            return now
        return now

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
            "return_given_up",
            "handoff %s: %s",
            entry.handoff_id,
            reason,
            handoff_id=entry.handoff_id,
            task_id=entry.task_id,
            context_id=entry.context_id,
        )
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
        and not (
            name.endswith("escalated")
            and not (envelope.kind == "escalation" and outcome == "accepted")
        )
    ]
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
