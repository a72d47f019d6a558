"""The sending side's delivery: create the successor on the target, then terminate.

Create: `SendMessage` to the target carrying the envelope (`returnImmediately`), retried —
the target creates at most one task per idempotency key — behind the client's breaker. The
target's answer decides: a task → terminate TRANSFERRED; a refusal (a REJECTED task marked
`rejected`) or persistent errors → the source FAILED, or, under a contract, its recovery path
(`on_reject`, `on_error`, `on_timeout`): a new handoff checkpointed in the same transaction
that closes the failed entry. `on_timeout` follows only while no attempt can have reached the
target, so a fallback never doubles the work. Only the target can tell whether it took an
envelope, so past its TTL a pending entry is still replayed: the target refuses an expired one
it never took (`envelope_expired`), and the source then fails `handoff_expired`.
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass
from typing import Any

import pydantic_core
from pydantic import ValidationError

from a2a_handoff.canonical import canonical
from a2a_handoff.client.client import AgentClient
from a2a_handoff.client.replicas import never_arrived, replicas
from a2a_handoff.contracts.model import Contract
from a2a_handoff.errors import (
    CircuitOpenError,
    ConflictError,
    GateRefused,
    HandoffError,
    HandoffProcessingError,
    RemoteError,
    UnavailableError,
)
from a2a_handoff.escalation import Escalation, Need, Trigger
from a2a_handoff.failpoints import failpoint
from a2a_handoff.handoff.envelope import HandoffEnvelope
from a2a_handoff.handoff.sender import FAILED, HandoffSender, missing_capabilities
from a2a_handoff.handoff.settings import HandoffSettings
from a2a_handoff.handoff.terminate import delayed, failed, reopened, transferred
from a2a_handoff.observe import events, tracing
from a2a_handoff.outcomes import Handoff
from a2a_handoff.protocol.events import status_text
from a2a_handoff.protocol.extension import HANDOFF_EXTENSION_URI as URI
from a2a_handoff.protocol.extension import SIGNATURE_KEY, ext_metadata, with_ext_metadata
from a2a_handoff.protocol.models import Role, Task, parse_time, utc_now
from a2a_handoff.protocol.states import TaskState
from a2a_handoff.stores.base import OutboxEntry, Store, TaskRecord
from a2a_handoff.trust.agent_trust import AgentTrust

log = logging.getLogger("a2a_handoff.handoff")

# The target's answers worth a replay: still being created, or its own passing failure.
TRANSIENT_CODES = frozenset({HandoffProcessingError.code, -32603})
MAX_RECOVERIES = 3  # recovery paths followed per task, so two fallbacks cannot ping-pong


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
        # handoff id → the job delivering it in this process (see recovery.Outbox)
        self.in_flight: dict[str, asyncio.Task[TaskRecord | None]] = {}
        self.returns_given_up = 0  # returns (decisions) this process gave up delivering
        self.last_given_up: dict[str, Any] | None = None

    async def deliver(
        self,
        entry: OutboxEntry,
        fresh: bool = False,
        *,
        envelope: HandoffEnvelope | None = None,
        source: TaskRecord | None = None,
        reopen: bool = False,
    ) -> TaskRecord | None:
        """`_deliver`, in the handoff's trace (its envelope's `traceId`): a replay (not
        `fresh`) is a recovery span."""
        if envelope is not None:
            trace_id = envelope.trace_id
        else:
            try:
                trace_id = str(json.loads(entry.envelope).get("traceId") or "")
            except (ValueError, AttributeError):
                trace_id = ""
        name = "a2a.deliver" if fresh else "a2a.recovery"
        with tracing.adopted(trace_id), tracing.span(name, "a2a.handoff_id", entry.handoff_id):
            return await self._deliver(
                entry, fresh, envelope=envelope, source=source, reopen=reopen
            )

    async def _deliver(
        self,
        entry: OutboxEntry,
        fresh: bool = False,
        *,
        envelope: HandoffEnvelope | None = None,
        source: TaskRecord | None = None,
        reopen: bool = False,
    ) -> TaskRecord | None:
        """Create the task on the target (retrying) and terminate; the source's final record.

        `reopen`: the handler waits for this delivery (`TaskContext.hand_off`): a refusal
        (the target's, or its card's at the gate) that would fail the task back to the
        source reopens it instead — WORKING again, the refusal said — for the handler to
        choose again. A replay after a crash has no handler waiting: it never reopens.

        `envelope`: the entry's envelope, when the caller holds it already; `source`: the
        source task's record as last written, tried first when terminating (check-and-set:
        a stale one costs a read, never a lost update).

        Under a contract, its recovery path takes over when the target rejects the handoff
        (`on_reject`), keeps failing (`on_error`, after `max_retries`), or stays unreachable
        past `timeout_ms` (`on_timeout`) — the last only while no attempt can have reached
        it (`fresh`: this process checkpointed the entry, and every failure so far was a
        refused connection or an open breaker), so a successor can never be orphaned.
        """
        body = entry.envelope
        if envelope is None:  # a replay: the entry as stored (by any version: canonicalize)
            envelope = HandoffEnvelope.model_validate_json(entry.envelope)
            body = canonical(json.loads(entry.envelope)).decode()
        url = entry.target_url
        signer = self.trust.signing_key
        params = _create_params(envelope, body, self.trust.sign_envelope(body.encode()))
        contract = self._contract_of(envelope)
        loop = asyncio.get_running_loop()
        started = loop.time()
        may_have_arrived = not fresh
        errors = 0
        tries = 0
        delay = _Delay()
        while True:
            if tries and envelope.kind == "return":
                given_up = await self._give_up_return(entry, envelope, tries)
                if given_up is not None:
                    return given_up
            tries += 1
            if self.trust.signing_key is not signer:  # keys rotated while it waited: re-sign
                signer = self.trust.signing_key
                params = _create_params(envelope, body, self.trust.sign_envelope(body.encode()))
            try:
                card = await self.client.card(url)
                problems = missing_capabilities(envelope.required_capabilities, card, None)
                if problems:
                    reason = "capability gate refused the handoff: " + "; ".join(problems)
                    if reopen:
                        events.handoff_sent(envelope, "gate_refused", reason)
                        return await reopened(self.store, entry, reason, source)
                    return await self._failed(entry, envelope, contract, reason, "gate_refused")
                with tracing.span("a2a.create", "a2a.target", entry.target_name):
                    result = await self.client.call_json(
                        url, "SendMessage", params, extensions=[URI], idempotent=True
                    )
                created = Task.model_validate(result["task"])
            except RemoteError as exc:
                may_have_arrived = True
                if exc.code not in TRANSIENT_CODES:
                    reason = f"{entry.target_name} refused: {exc.message}"
                    return await self._recover(
                        entry, envelope, contract, "on_error", reason, "refused"
                    )
                if exc.code != HandoffProcessingError.code and contract is not None:
                    errors += 1
                    # A non-idempotent edge is never retried, whatever the contract says.
                    retries = contract.recovery.max_retries if contract.idempotent else 0
                    if errors > retries:
                        reason = f"{entry.target_name} failed {errors} time(s): {exc.message}"
                        return await self._recover(
                            entry, envelope, contract, "on_error", reason, "failed"
                        )
                source = await self._delayed(entry, envelope, exc, delay, source)
                await asyncio.sleep(self.settings.retry_interval)
                continue
            except (
                UnavailableError,
                CircuitOpenError,
                ValidationError,
                KeyError,
                TypeError,
            ) as exc:
                # Even past the TTL, only the target can tell whether it took the envelope:
                # it looks the key up first, and refuses an expired one it never took
                # (`envelope_expired`, below). Failing here could orphan a successor.
                may_have_arrived = may_have_arrived or not never_arrived(exc)
                timeout = contract.recovery.timeout_ms if contract is not None else None
                if timeout and not may_have_arrived and loop.time() - started > timeout / 1000:
                    reason = f"{entry.target_name} unreachable for over {timeout} ms"
                    return await self._recover(
                        entry, envelope, contract, "on_timeout", reason, "timeout"
                    )
                source = await self._delayed(entry, envelope, exc, delay, source)
                await asyncio.sleep(self.settings.retry_interval)
                continue
            failpoint("handoff.after_create")
            if refused(created):
                code = str(ext_metadata(created).get("rejected", "rejected"))
                if code == "envelope_expired":
                    reason = "handoff_expired: the envelope expired"
                    return await self._failed(entry, envelope, contract, reason, "expired")
                reason = f"{entry.target_name} rejected the handoff: {status_text(created)}"
                path = contract.recovery.on_reject if contract is not None else None
                if reopen and path in (None, "", "source"):
                    events.handoff_sent(envelope, f"rejected:{code}", reason)
                    return await reopened(self.store, entry, reason, source)
                return await self._recover(
                    entry, envelope, contract, "on_reject", reason, f"rejected:{code}"
                )
            events.latency(envelope, "created")
            with tracing.span("a2a.terminate", "a2a.handoff_id", entry.handoff_id):
                record = await transferred(self.store, entry, envelope, created, source)
            after = f"after {delay.failures} failed tries" if delay.failures else ""
            self._closed(entry, envelope, contract, "accepted", after)
            return record

    async def _delayed(
        self,
        entry: OutboxEntry,
        envelope: HandoffEnvelope,
        exc: Exception,
        delay: _Delay,
        source: TaskRecord | None,
    ) -> TaskRecord | None:
        """A failed try, said only when what is wrong changes (the first failure, another
        reason, the target's breaker opened): one log line, and the source task's status,
        so whoever follows the task sees why it waits. The source record as now written."""
        delay.failures += 1
        words = trouble(entry.target_name, entry.target_url, exc, self.client)
        wait = self._next_try(entry.target_url)
        # Once the breaker opened, its cool-down paces the tries: that stays said.
        opened = wait > self.settings.retry_interval or bool(delay.said and delay.said[1])
        said = (words, opened)
        if said == delay.said:
            return source
        delay.said = said
        text = f"{words}; retrying, next try in {_seconds(wait)}"
        events.handoff_delayed(envelope, text, delay.failures)
        try:
            return await delayed(self.store, entry, text, source)
        except HandoffError:  # the store: the delivery goes on, the next change says it
            return None

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
        self._closed(entry, envelope, contract, outcome, reason)
        return record

    def _closed(
        self,
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

    async def _give_up_return(
        self, entry: OutboxEntry, envelope: HandoffEnvelope, tries: int
    ) -> TaskRecord | None:
        """A return is retried with backoff, and given up (FAILED) past its time."""
        limit = self.settings.return_give_up or float(envelope.ttl_seconds)
        age = (parse_time(utc_now()) - parse_time(entry.created_at)).total_seconds()
        if age >= limit:
            reason = (
                f"return to {entry.target_name} given up after {tries} tries over {age:.0f} s"
                f" (limit {limit:g} s): the decision did not reach it"
            )
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
            return await self._failed(entry, envelope, None, reason, "given_up")
        backoff = min(30.0, self.settings.retry_interval * 2 ** min(tries, 6))
        await asyncio.sleep(min(backoff, max(0.0, limit - age)))
        return None

    def given_up_report(self) -> dict[str, Any]:
        """The returns given up since this process started, for /health (their tasks ended
        FAILED with the reason, durably)."""
        return {"failedReturns": self.returns_given_up, "lastFailedReturn": self.last_given_up}

    def _contract_of(self, envelope: HandoffEnvelope) -> Contract | None:
        catalog = self.settings.contracts
        if catalog is None or not envelope.contract:
            return None
        return catalog.by_id(envelope.contract)

    async def _recover(
        self,
        entry: OutboxEntry,
        envelope: HandoffEnvelope,
        contract: Contract | None,
        which: str,
        reason: str,
        outcome: str,
    ) -> TaskRecord | None:
        """Follow the contract's recovery path `which` (on_reject / on_timeout / on_error);
        `outcome` is the failed handoff's, for its metrics.

        `source` (and no contract): the task comes back to this agent, FAILED with the
        reason. `human`: an escalation to route `human`. Any other name (`supervisor`, a
        fallback agent, `agent:NAME`): the task is handed to that route instead. The failed
        entry is closed and the new one checkpointed in ONE transaction.
        """
        path = getattr(contract.recovery, which, None) if contract is not None else None
        if not path or path == "source":
            suffix = f" ({contract.id}: {which} → source)" if contract is not None else ""
            return await self._failed(entry, envelope, contract, reason + suffix, outcome)
        record = await self.store.get(entry.task_id)
        if record is None or record.state.terminal:
            return record
        assert contract is not None
        recoveries = int(ext_metadata(record.task).get("recoveries", 0))
        if recoveries >= MAX_RECOVERIES:
            detail = f"{reason} (recovery given up after {recoveries})"
            return await self._failed(entry, envelope, contract, detail, outcome)
        target = path.removeprefix("agent:")
        decision = self._recovery_handoff(entry, envelope, contract, which, target, reason)
        try:
            new_envelope, new_json = await self.sender.prepare(
                record.task, decision, record.owner, key_salt=f"recovery:{entry.handoff_id}"
            )
        except GateRefused as exc:
            detail = f"{reason}; {which} → {target} refused: {exc}"
            return await self._failed(entry, envelope, contract, detail, outcome)
        task, event, new_entry = self.sender.handing_off(
            record.task, new_envelope, new_json, record.owner
        )
        task = with_ext_metadata(task, recoveries=recoveries + 1)
        updated = record.advanced(task, 1, utc_now())
        detail = f"{reason} ({contract.id}: {which} → {target})"
        try:
            await self.store.checkpoint(
                updated, [event], expected_version=record.version, entry=new_entry,
                close=(entry.handoff_id, FAILED, detail),
            )  # fmt: skip
        except ConflictError:
            return await self.store.get(entry.task_id)  # someone else moved it: theirs
        self._closed(entry, envelope, contract, outcome, detail)
        events.recovery(
            "contract_path", "handoff %s: %s", entry.handoff_id, detail,
            handoff_id=entry.handoff_id, task_id=entry.task_id, context_id=entry.context_id,
            trace_id=envelope.trace_id,
        )  # fmt: skip
        current = asyncio.current_task()
        if current is not None:  # the recovery loop must not start a second delivery of it
            self.in_flight[new_entry.handoff_id] = current
        try:
            return await self._deliver(new_entry, True, envelope=new_envelope, source=updated)
        finally:
            if self.in_flight.get(new_entry.handoff_id) is current:
                del self.in_flight[new_entry.handoff_id]

    def _recovery_handoff(
        self,
        entry: OutboxEntry,
        envelope: HandoffEnvelope,
        contract: Contract,
        which: str,
        target: str,
        reason: str,
    ) -> Handoff:
        if target != "human":
            return Handoff(
                target=target,
                reason=f"{contract.id} {which}: {reason}",
                context=dict(envelope.transfer_context),
                kind="handoff",
            )
        escalation = Escalation(
            f"The handoff to {entry.target_name} under contract {contract.id} failed: {reason}.",
            [f"Handed the task to {entry.target_name}: {envelope.reason}"],
            "a decision on who takes this task over, or how it goes on",
            Need.DECISION,
            Trigger.KNOWLEDGE_GAP,
            resume=dict(envelope.transfer_context),
        )
        return Handoff.to_human(escalation, reason=f"escalated ({contract.id} {which}): {reason}")

    async def notify(
        self, envelope: HandoffEnvelope, envelope_json: str, attempts_for: float = 30.0
    ) -> Task:
        """Deliver a message that does not end the task (a notice); the task it created.

        Retried with the same key for up to `attempts_for` seconds (the target deduplicates);
        raises HandoffError when the target refuses it or stays unreachable.
        """
        url = envelope.target.url
        signature = self.trust.sign_envelope(envelope_json.encode())
        params = _create_params(envelope, envelope_json, signature)
        deadline = asyncio.get_running_loop().time() + attempts_for
        while True:
            try:
                result = await self.client.call_json(
                    url, "SendMessage", params, extensions=[URI], idempotent=True
                )
                created = Task.model_validate(result["task"])
            except RemoteError as exc:
                if exc.code not in TRANSIENT_CODES:
                    raise HandoffError(f"{envelope.target.agent} refused: {exc.message}") from exc
                error: Exception = exc
            except (UnavailableError, CircuitOpenError, ValidationError, KeyError) as exc:
                error = exc
            else:
                if refused(created):
                    raise HandoffError(
                        f"{envelope.target.agent} rejected it: {status_text(created)}"
                    )
                return created
            if asyncio.get_running_loop().time() >= deadline:
                raise HandoffError(f"{envelope.target.agent} unreachable: {error}")
            await asyncio.sleep(self.settings.retry_interval)


@dataclass
class _Delay:
    """One delivery's failed tries, and what was last said about them."""

    failures: int = 0
    said: tuple[str, bool] | None = None


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


def refused(created: Task) -> bool:
    """Whether the target refused the envelope (not: took it, and its handler said no)."""
    return created.status.state is TaskState.REJECTED and bool(
        ext_metadata(created).get("rejected")
    )


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
        "role": Role.USER.value,
        "parts": [{"text": envelope.summary}, {"data": envelope.transfer_context}],
        "contextId": envelope.context_id,
        "extensions": [URI],
        "referenceTaskIds": [envelope.source.task_id],
    }
    # Encoded as pydantic encodes the envelope: a context may hold dates, UUIDs, decimals.
    head = pydantic_core.to_json(message).decode()[:-1]  # open: the metadata follows
    return (
        f'{{"message":{head},"metadata":{{{json.dumps(URI)}:{envelope_json},'
        f"{json.dumps(SIGNATURE_KEY)}:{json.dumps(signature)}}}}},"
        '"configuration":{"returnImmediately":true,"historyLength":0}}'
    )
