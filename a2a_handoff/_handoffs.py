"""The three-phase atomic handoff, both sides.

Sender (task tA on this agent): summarize into an envelope → gate
(`required ⊆ caps(target) ∩ scope(self)`, else tA FAILED naming what is missing, nothing
sent) → checkpoint (ONE transaction: outbox entry `pending` + tA marked handing off) →
create (SendMessage to the target with the envelope, retried: the target deduplicates on the
key) → terminate (ONE transaction: tA TRANSFERRED with the pointer + outbox entry `done`).
Create strictly before terminate, so a TRANSFERRED pointer always names a task that exists.
Pending entries are replayed at start-up and periodically, with the same key.

Receiver: a replay of a key already taken returns the same task (`duplicate: true`) whatever
its age — checked first, so a lost reply can never turn into a second task or a false
failure; then TTL (`envelope_expired`), size, address and loop guard, each refusal a
REJECTED task whose reason the sender reads; then the task is created once per key.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pydantic_core
from pydantic import ValidationError

from a2a_handoff.agent import Handoff, agent_message
from a2a_handoff.breaker import CircuitOpenError
from a2a_handoff.client import AgentClient, RemoteError, UnavailableError, never_arrived
from a2a_handoff.envelope import (
    DEFAULT_MAX_HOPS,
    DEFAULT_TTL_SECONDS,
    MAX_ENVELOPE_BYTES,
    HandoffEnvelope,
    SourceRef,
    TargetRef,
    derive_key,
    root_key_for,
)
from a2a_handoff.errors import ConflictError, HandoffError, HandoffProcessingError
from a2a_handoff.escalation import Escalation, Need, Trigger
from a2a_handoff.extension import HANDOFF_EXTENSION_URI as URI
from a2a_handoff.failpoints import failpoint
from a2a_handoff.ids import new_id
from a2a_handoff.models import (
    AgentCard,
    Role,
    StreamResponse,
    Task,
    TaskStatus,
    TaskStatusUpdateEvent,
    utc_now,
)
from a2a_handoff.states import TaskState, transition
from a2a_handoff.stores.base import OutboxEntry, Store, TaskRecord

if TYPE_CHECKING:
    from a2a_handoff._runtime import TaskManager
    from a2a_handoff.contracts.catalog import Catalog
    from a2a_handoff.contracts.model import Contract

from a2a_handoff.contracts.model import MISSING, lookup

log = logging.getLogger("a2a_handoff.handoff")

HANDING_OFF = "HANDING_OFF"
# The target's answers worth a replay: still being created, or its own passing failure.
TRANSIENT_CODES = frozenset({HandoffProcessingError.code, -32603})
PENDING, DONE, FAILED = "pending", "done", "failed"
MAX_RECOVERIES = 3  # recovery paths followed per task, so two fallbacks cannot ping-pong


class GateRefused(HandoffError):
    """The capability gate, or the envelope's own limits, refused the handoff."""


@dataclass(frozen=True, slots=True)
class HandoffSettings:
    """How one agent hands tasks off."""

    agent_name: str
    agent_url: str
    routes: Mapping[str, str] = field(default_factory=dict)
    scope: frozenset[str] | None = None  # None: this agent may delegate any capability
    max_hops: int = DEFAULT_MAX_HOPS
    ttl_seconds: int = DEFAULT_TTL_SECONDS
    recovery_interval: float = 2.0
    retry_interval: float = 0.5
    contracts: Catalog | None = None  # enforced when set (see a2a_handoff.contracts)


def ext_metadata(task: Task) -> dict[str, Any]:
    """The handoff extension's metadata on a task (empty when none)."""
    value = (task.metadata or {}).get(URI)
    return dict(value) if isinstance(value, dict) else {}


def with_ext_metadata(task: Task, **members: Any) -> Task:
    merged = {**ext_metadata(task), **members}
    return task.model_copy(update={"metadata": {**(task.metadata or {}), URI: merged}})


def missing_capabilities(
    required: list[str], card: AgentCard | None, scope: frozenset[str] | None
) -> list[str]:
    """What `required ⊆ caps(target) ∩ scope(source)` lacks, described."""
    problems = []
    if scope is not None:
        outside = sorted(set(required) - scope)
        if outside:
            problems.append(f"outside this agent's scope: {', '.join(outside)}")
    if card is not None:
        offered: set[str] = set()
        for ext in card.capabilities.extensions or []:
            if ext.uri == URI and ext.params:
                offered |= {str(c) for c in ext.params.get("capabilities", [])}
        lacking = sorted(set(required) - offered)
        if lacking:
            problems.append(f"not offered by {card.name}: {', '.join(lacking)}")
    return problems


class Handoffs:
    """Sends and receives handoffs for one agent."""

    def __init__(
        self, manager: TaskManager, settings: HandoffSettings, client: AgentClient
    ) -> None:
        self.manager = manager
        self.settings = settings
        self.client = client
        self._delivering: dict[str, asyncio.Task[TaskRecord | None]] = {}
        self._waiters: dict[str, Callable[[TaskRecord], None]] = {}
        self._periodic: asyncio.Task[None] | None = None

    @property
    def store(self) -> Store:
        return self.manager.store

    # -- sender: summarize, gate, checkpoint ---------------------------------------------

    def _target_url(self, target: str) -> str:
        url = self.settings.routes.get(target)
        if url is None and target.startswith(("http://", "https://")):
            url = target
        if url is None:
            raise GateRefused(f"no route to agent {target!r}")
        return url

    async def prepare(
        self, task: Task, decision: Handoff, on_behalf_of: str = "", key_salt: str = ""
    ) -> tuple[HandoffEnvelope, str]:
        """Summarize and gate: the envelope and its JSON. Raises GateRefused with the reason
        the task fails with.

        `key_salt` sets apart keys of messages that do not end the task (notices).
        """
        url = self._target_url(decision.target)
        required = sorted(decision.required)
        card: AgentCard | None = None
        with contextlib.suppress(HandoffError, ValidationError):  # unreachable: gate later
            card = await self.client.card(url, retry=False)
        problems = missing_capabilities(required, card, self.settings.scope)
        if problems:
            raise GateRefused("capability gate refused the handoff: " + "; ".join(problems))
        target_name = card.name if card else decision.target
        contract_ref = self._contract_for(target_name, decision)
        incoming = ext_metadata(task).get("handoff") or {}
        hop = int(incoming.get("hop", 0)) + 1
        root = str(incoming.get("rootKey") or root_key_for(self.settings.agent_url, task.id))
        envelope = HandoffEnvelope(
            handoff_id=new_id(),
            idempotency_key=derive_key(root, hop, key_salt),
            root_key=root,
            context_id=task.context_id,
            source=SourceRef(agent=self.settings.agent_name, url=self.settings.agent_url,
                             task_id=task.id),
            target=TargetRef(agent=target_name, url=url),
            reason=decision.reason,
            transfer_context=dict(decision.context),
            required_capabilities=required,
            continuation_token=decision.continuation_token,
            next_skill_hint=decision.next_skill,
            hop=hop,
            visited=[*incoming.get("visited", []), self.settings.agent_name],
            trace_id=str(incoming.get("traceId") or uuid.uuid4().hex),
            created_at=utc_now(),
            ttl_seconds=self.settings.ttl_seconds,
            on_behalf_of=on_behalf_of or None,
            kind=decision.kind,
            contract=contract_ref,
        )  # fmt: skip
        envelope_json = envelope.dump_json()
        size = len(envelope_json.encode())
        if size > MAX_ENVELOPE_BYTES:
            raise GateRefused(
                f"transfer context too large: the envelope is {size} bytes,"
                f" the limit {MAX_ENVELOPE_BYTES}"
            )
        return envelope, envelope_json

    def handing_off(
        self, task: Task, envelope: HandoffEnvelope, envelope_json: str, owner: str
    ) -> tuple[Task, StreamResponse, OutboxEntry]:
        """The task marked as handing off, the event saying so, and its outbox entry."""
        target = envelope.target
        note = agent_message(f"Handing off to {target.agent}: {envelope.reason}", task)
        if task.status.state is not TaskState.WORKING:
            transition(task.status.state, TaskState.WORKING)
        task = task.model_copy(update={"history": [*(task.history or []), note]})
        task = with_ext_metadata(task, state=HANDING_OFF, handoffId=envelope.handoff_id)
        task = task.model_copy(
            update={"status": task.status.model_copy(
                update={"state": TaskState.WORKING, "message": note, "timestamp": utc_now()}
            )}
        )  # fmt: skip
        now = utc_now()
        entry = OutboxEntry(
            handoff_id=envelope.handoff_id,
            task_id=task.id,
            context_id=task.context_id,
            owner=owner,
            target_name=target.agent,
            target_url=target.url,
            envelope=envelope_json,
            status=PENDING,
            detail="",
            created_at=now,
            updated_at=now,
        )
        return task, _status_event(task, {URI: ext_metadata(task)}), entry

    def _contract_for(self, target: str, decision: Handoff) -> str | None:
        """The `id@version` of the edge's contract; GateRefused when contracts are on and
        there is none, or the transfer context breaks it (nothing is sent)."""
        catalog = self.settings.contracts
        if catalog is None:
            return None
        me = self.settings.agent_name
        contract = catalog.for_edge(me, target, decision.kind)
        if contract is None:
            raise GateRefused(f"no handoff contract for the edge {me} → {target}")
        problems = catalog.outbound(contract, decision.context, target)
        if problems:
            raise GateRefused(
                f"contract {contract.id} refused the transfer context: " + "; ".join(problems)
            )
        return f"{contract.id}@{contract.version or ''}"

    async def checkpoint(
        self, record: TaskRecord, envelope: HandoffEnvelope, envelope_json: str
    ) -> tuple[TaskRecord, OutboxEntry]:
        """ONE transaction: the outbox entry and the task marked as handing off."""
        task, event, entry = self.handing_off(record.task, envelope, envelope_json, record.owner)
        updated = record.advanced(task, 1, utc_now())
        await self.store.checkpoint(updated, [event], expected_version=record.version, entry=entry)
        failpoint("handoff.after_checkpoint")
        return updated, entry

    # -- sender: create, terminate --------------------------------------------------------

    def spawn(
        self,
        entry: OutboxEntry,
        on_done: Callable[[TaskRecord], None] | None = None,
        fresh: bool = False,
        *,
        envelope: HandoffEnvelope | None = None,
        source: TaskRecord | None = None,
    ) -> asyncio.Task[TaskRecord | None]:
        """Deliver an entry in the background, once per process.

        `on_done` is called with the source's final record by whichever delivery of this
        entry ends it — this one, or a later replay by the recovery loop if this one failed.
        `fresh`: this process just checkpointed the entry, whose `envelope` and `source`
        record it still holds (see `deliver`).
        """
        if on_done is not None:
            self._waiters[entry.handoff_id] = on_done
        running = self._delivering.get(entry.handoff_id)
        if running is not None:
            return running
        job = asyncio.create_task(
            self._deliver_held(entry, fresh, envelope, source), name=f"handoff-{entry.handoff_id}"
        )
        self._delivering[entry.handoff_id] = job

        def done(finished: asyncio.Task[TaskRecord | None]) -> None:
            self._delivering.pop(entry.handoff_id, None)
            if finished.cancelled():
                return
            error = finished.exception()
            if error is not None:  # left pending: the recovery loop replays it
                log.error("handoff %s: delivery failed: %r", entry.handoff_id, error)
                return
            record = finished.result()
            if record is not None and record.state.terminal:
                waiter = self._waiters.pop(entry.handoff_id, None)
                if waiter is not None:
                    waiter(record)

        job.add_done_callback(done)
        return job

    async def _deliver_held(
        self,
        entry: OutboxEntry,
        fresh: bool,
        envelope: HandoffEnvelope | None,
        source: TaskRecord | None,
    ) -> TaskRecord | None:
        """Deliver under the entry's lease when replicas share the store: one delivers it
        while its lease runs; when that replica dies, another takes it over (same key)."""
        if not self.store.shared:
            return await self.deliver(entry, fresh, envelope=envelope, source=source)
        async with self.manager.leases.hold(f"outbox:{entry.handoff_id}") as held:
            if not held:
                return None
            return await self.deliver(entry, fresh, envelope=envelope, source=source)

    async def deliver(
        self,
        entry: OutboxEntry,
        fresh: bool = False,
        *,
        envelope: HandoffEnvelope | None = None,
        source: TaskRecord | None = None,
    ) -> TaskRecord | None:
        """Create the task on the target (retrying) and terminate; the source's final record.

        `envelope`: the entry's envelope, when the caller holds it already; `source`: the
        source task's record as last written, tried first when terminating (check-and-set:
        a stale one costs a read, never a lost update).

        Under a contract, its recovery path takes over when the target rejects the handoff
        (`on_reject`), keeps failing (`on_error`, after `max_retries`), or stays unreachable
        past `timeout_ms` (`on_timeout`) — the last only while no attempt can have reached
        it (`fresh`: this process checkpointed the entry, and every failure so far was a
        refused connection or an open breaker), so a successor can never be orphaned.
        """
        if envelope is None:
            envelope = HandoffEnvelope.model_validate_json(entry.envelope)
        url = entry.target_url
        params = _create_params(envelope, entry.envelope)
        contract = self._contract_of(envelope)
        loop = asyncio.get_running_loop()
        started = loop.time()
        may_have_arrived = not fresh
        errors = 0
        while True:
            try:
                card = await self.client.card(url)
                problems = missing_capabilities(envelope.required_capabilities, card, None)
                if problems:
                    reason = "capability gate refused the handoff: " + "; ".join(problems)
                    return await self._fail(entry, reason)
                result = await self.client.call_json(
                    url, "SendMessage", params, extensions=[URI], idempotent=True
                )
                created = Task.model_validate(result["task"])
            except RemoteError as exc:
                may_have_arrived = True
                if exc.code not in TRANSIENT_CODES:
                    reason = f"{entry.target_name} refused: {exc.message}"
                    return await self._recover(entry, envelope, contract, "on_error", reason)
                if exc.code != HandoffProcessingError.code and contract is not None:
                    errors += 1
                    # A non-idempotent edge is never retried, whatever the contract says.
                    retries = contract.recovery.max_retries if contract.idempotent else 0
                    if errors > retries:
                        reason = f"{entry.target_name} failed {errors} time(s): {exc.message}"
                        return await self._recover(entry, envelope, contract, "on_error", reason)
                log.info("handoff %s: %s; retrying", entry.handoff_id, exc)
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
                    return await self._recover(entry, envelope, contract, "on_timeout", reason)
                log.info("handoff %s: %s; retrying", entry.handoff_id, exc)
                await asyncio.sleep(self.settings.retry_interval)
                continue
            failpoint("handoff.after_create")
            if refused(created):
                code = str(ext_metadata(created).get("rejected", "rejected"))
                if code == "envelope_expired":
                    return await self._fail(entry, "handoff_expired: the envelope expired")
                reason = f"{entry.target_name} rejected the handoff: {status_text(created)}"
                return await self._recover(entry, envelope, contract, "on_reject", reason)
            return await self._transferred(entry, envelope, created, source)

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
    ) -> TaskRecord | None:
        """Follow the contract's recovery path `which` (on_reject / on_timeout / on_error).

        `source` (and no contract): the task comes back to this agent, FAILED with the
        reason. `human`: an escalation to route `human`. Any other name (`supervisor`, a
        fallback agent, `agent:NAME`): the task is handed to that route instead. The failed
        entry is closed and the new one checkpointed in ONE transaction.
        """
        path = getattr(contract.recovery, which, None) if contract is not None else None
        if not path or path == "source":
            suffix = f" ({contract.id}: {which} → source)" if contract is not None else ""
            return await self._fail(entry, reason + suffix)
        record = await self.store.get(entry.task_id)
        if record is None or record.state.terminal:
            return record
        assert contract is not None
        recoveries = int(ext_metadata(record.task).get("recoveries", 0))
        if recoveries >= MAX_RECOVERIES:
            return await self._fail(entry, f"{reason} (recovery given up after {recoveries})")
        target = path.removeprefix("agent:")
        decision = self._recovery_handoff(entry, envelope, contract, which, target, reason)
        try:
            new_envelope, new_json = await self.prepare(
                record.task, decision, record.owner, key_salt=f"recovery:{entry.handoff_id}"
            )
        except GateRefused as exc:
            return await self._fail(entry, f"{reason}; {which} → {target} refused: {exc}")
        task, event, new_entry = self.handing_off(record.task, new_envelope, new_json, record.owner)
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
        log.warning("handoff %s: %s", entry.handoff_id, detail)
        current = asyncio.current_task()
        if current is not None:  # the recovery loop must not start a second delivery of it
            self._delivering[new_entry.handoff_id] = current
        try:
            return await self.deliver(new_entry, True, envelope=new_envelope, source=updated)
        finally:
            if self._delivering.get(new_entry.handoff_id) is current:
                del self._delivering[new_entry.handoff_id]

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
        )
        return Handoff(
            target="human",
            reason=f"escalated ({contract.id} {which}): {reason}",
            context={
                "escalation": escalation.to_json("blocking"),
                "resume": dict(envelope.transfer_context),
                "summary": escalation.what_happened,
            },
            kind="escalation",
        )

    async def notify(
        self, envelope: HandoffEnvelope, envelope_json: str, attempts_for: float = 30.0
    ) -> Task:
        """Deliver a message that does not end the task (a notice); the task it created.

        Retried with the same key for up to `attempts_for` seconds (the target deduplicates);
        raises HandoffError when the target refuses it or stays unreachable.
        """
        url = envelope.target.url
        params = _create_params(envelope, envelope_json)
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

    async def _transferred(
        self,
        entry: OutboxEntry,
        envelope: HandoffEnvelope,
        created: Task,
        source: TaskRecord | None = None,
    ) -> TaskRecord | None:
        pointer = {
            "agentUrl": entry.target_url,
            "agentName": entry.target_name,
            "taskId": created.id,
            "contextId": created.context_id,
            "reason": envelope.reason,
            "handoffId": entry.handoff_id,
        }
        text = f"Transferred to {entry.target_name} (task {created.id}): {envelope.reason}"
        return await self._terminate(
            entry, TaskState.TRANSFERRED, text, {"state": "TRANSFERRED", "transfer": pointer},
            DONE, json.dumps(pointer), source,
        )  # fmt: skip

    async def _fail(self, entry: OutboxEntry, reason: str) -> TaskRecord | None:
        return await self._terminate(
            entry, TaskState.FAILED, reason, {"state": "FAILED", "reason": reason}, FAILED, reason
        )

    async def _terminate(
        self,
        entry: OutboxEntry,
        state: TaskState,
        text: str,
        members: dict[str, Any],
        status: str,
        detail: str,
        source: TaskRecord | None = None,
    ) -> TaskRecord | None:
        """ONE transaction: the source task's final state and the outbox entry closed.

        `source`: the record to start from (else read); a stale one fails the check-and-set
        and the task is read again.
        """
        record = source
        for _ in range(5):
            if record is None:
                record = await self.store.get(entry.task_id)
            if record is None or record.state.terminal:
                return record
            transition(record.state, state)
            message = agent_message(text, record.task)
            ext = {**ext_metadata(record.task), **members, "handoffId": entry.handoff_id}
            now = utc_now()
            task = record.task.model_copy(
                update={
                    "metadata": {**(record.task.metadata or {}), URI: ext},
                    "history": [*(record.task.history or []), message],
                    "status": TaskStatus(state=state, message=message, timestamp=now),
                }
            )
            updated = record.advanced(task, 1, now)
            try:
                await self.store.terminate(
                    updated, [_status_event(task, {URI: dict(ext)})],
                    expected_version=record.version, handoff_id=entry.handoff_id,
                    status=status, detail=detail,
                )  # fmt: skip
            except ConflictError:
                record = None
                continue
            failpoint("handoff.after_terminate")
            return updated
        log.error("handoff %s: could not terminate task %s", entry.handoff_id, entry.task_id)
        return None

    # -- recovery -------------------------------------------------------------------------

    async def recover(self, wait_seconds: float | None = None) -> int:
        """Replay pending entries not being delivered; wait up to `wait_seconds` for them."""
        entries = await self.store.outbox(status=PENDING)
        jobs = [self.spawn(e) for e in entries if e.handoff_id not in self._delivering]
        if jobs and wait_seconds:
            await asyncio.wait(jobs, timeout=wait_seconds)
        return len(jobs)

    def start(self) -> None:
        self._periodic = asyncio.create_task(self._recover_forever(), name="handoff-recovery")

    async def _recover_forever(self) -> None:
        while True:
            await asyncio.sleep(self.settings.recovery_interval)
            try:
                await self.recover()
            except Exception:
                log.exception("handoff recovery failed")

    async def aclose(self) -> None:
        jobs = [j for j in (self._periodic, *self._delivering.values()) if j is not None]
        for job in jobs:
            job.cancel()
        for job in jobs:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await job

    # -- receiver -------------------------------------------------------------------------

    def dedupe_for(self, envelope: HandoffEnvelope) -> tuple[str, float | None]:
        """The key a received handoff deduplicates on, and for how long (None: ever).

        The envelope's idempotency key, unless the edge's contract names another
        `dedupe_key` (a payload field, say `payload.entities.orderId`): then two handoffs
        with the same value within `replay_window_ms` make one task.
        """
        default = "\x1f".join(("handoff", envelope.idempotency_key)), None
        catalog = self.settings.contracts
        if catalog is None:
            return default
        contract = (
            catalog.by_id(envelope.contract)
            if envelope.contract
            else catalog.for_edge(envelope.source.agent, self.settings.agent_name, envelope.kind)
        )
        rules = contract.idempotency if contract is not None else None
        if contract is None or rules is None or not rules.dedupe_key:
            return default
        window = rules.replay_window_ms / 1000 if rules.replay_window_ms else None
        path = rules.dedupe_key
        if path in ("envelope.idempotencyKey", "envelope.idempotency_key"):
            return default[0], window
        namespace = {"payload": envelope.transfer_context, "envelope": envelope.dump()}
        value = lookup(namespace, path)
        if value is MISSING or value is None:
            return default[0], window
        encoded = json.dumps(value, sort_keys=True, separators=(",", ":"))
        return "\x1f".join(("contract", contract.id, path, encoded)), window

    def refusal(self, envelope: HandoffEnvelope, size: int) -> tuple[str, str] | None:
        """(code, reason) when this agent must refuse the envelope, else None."""
        me = self.settings.agent_name
        if envelope.expired():
            return "envelope_expired", f"envelope expired after {envelope.ttl_seconds} s"
        if size > MAX_ENVELOPE_BYTES:
            return "envelope_too_large", f"envelope of {size} bytes over {MAX_ENVELOPE_BYTES}"
        if envelope.target.agent != me:
            return "misaddressed", f"envelope addressed to {envelope.target.agent}, not {me}"
        if me in envelope.visited and envelope.kind == "handoff":
            # Escalations and their returns come back by design; the hop limit bounds them.
            return "loop_detected", f"{me} already handled this chain ({envelope.visited})"
        if envelope.hop > self.settings.max_hops:
            return "loop_detected", f"hop {envelope.hop} over the maximum {self.settings.max_hops}"
        catalog = self.settings.contracts
        if catalog is not None:
            contract = (
                catalog.by_id(envelope.contract)
                if envelope.contract
                else catalog.for_edge(envelope.source.agent, me, envelope.kind)
            )
            if contract is None:
                edge = envelope.contract or f"{envelope.source.agent} → {me}"
                return "no_contract", f"{me} accepts no handoff contract for {edge}"
            failed = catalog.acceptance(contract, envelope.transfer_context, me, envelope.dump())
            if failed is not None:
                return "contract_rejected", f"contract {contract.id}: {failed}"
        return None


def refused(created: Task) -> bool:
    """Whether the target refused the envelope (not: took it, and its handler said no)."""
    return created.status.state is TaskState.REJECTED and bool(
        ext_metadata(created).get("rejected")
    )


def receive_metadata(envelope: HandoffEnvelope) -> dict[str, Any]:
    """What a received task records about the handoff that created it."""
    return {
        "handoff": {
            "handoffId": envelope.handoff_id,
            "idempotencyKey": envelope.idempotency_key,
            "rootKey": envelope.root_key,
            "hop": envelope.hop,
            "visited": envelope.visited,
            "traceId": envelope.trace_id,
            "source": envelope.source.dump(),
            "reason": envelope.reason,
            "kind": envelope.kind,
        },
        # A replay with this key must match (recorded, not derived when needed: replicas of
        # an earlier version sharing the store compare against this member).
        "envelopeDigest": envelope.digest(),
        **_escalation_of(envelope),
    }


def _escalation_of(envelope: HandoffEnvelope) -> dict[str, Any]:
    """An escalation's summary on the human agent's task, for inboxes and followers."""
    if envelope.kind not in ("escalation", "notice"):
        return {}
    escalation = envelope.transfer_context.get("escalation")
    if not isinstance(escalation, dict):
        return {}
    source = envelope.source
    return {"escalation": {**escalation, "source": source.dump()}}


def handoff_message_id(envelope: HandoffEnvelope) -> str:
    return f"handoff-{envelope.idempotency_key}"


def _create_params(envelope: HandoffEnvelope, envelope_json: str) -> str:
    """The SendMessage params that create the successor, as JSON.

    The message carries the envelope in its metadata (`envelope_json`: as the outbox holds
    it, so it is not encoded again) and points back at the source task. The source needs
    only the successor's id and status back: `historyLength: 0`.
    """
    summary = str(envelope.transfer_context.get("summary") or envelope.reason)
    message = {
        "messageId": handoff_message_id(envelope),
        "role": Role.USER.value,
        "parts": [{"text": summary}, {"data": envelope.transfer_context}],
        "contextId": envelope.context_id,
        "extensions": [URI],
        "referenceTaskIds": [envelope.source.task_id],
    }
    # Encoded as pydantic encodes the envelope: a context may hold dates, UUIDs, decimals.
    head = pydantic_core.to_json(message).decode()[:-1]  # open: the metadata follows
    return (
        f'{{"message":{head},"metadata":{{{json.dumps(URI)}:{envelope_json}}}}},'
        '"configuration":{"returnImmediately":true,"historyLength":0}}'
    )


def _status_event(task: Task, metadata: dict[str, Any] | None = None) -> StreamResponse:
    return StreamResponse(
        status_update=TaskStatusUpdateEvent(
            task_id=task.id, context_id=task.context_id, status=task.status, metadata=metadata
        )
    )


def status_text(task: Task) -> str:
    message = task.status.message
    return message.text if message is not None else task.status.state.name
