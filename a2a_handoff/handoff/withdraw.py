"""Canceling a task while its handoff is under way: the handoff withdrawn — or, taken
already, the cancel refused, saying where the task went.

The target may be creating the successor at that very moment, so a cancel asks it: the
sender's withdrawal — the same signed envelope, marked (`protocol.extension.WITHDRAW_KEY`)
— is answered with the successor when the target took the handoff, and otherwise refuses
its key for good (a REJECTED task, `withdrawn`): no try still on its way is taken after it.
Then one transaction: the source CANCELED and its outbox entry closed `withdrawn` — or the
source TRANSFERRED, and the cancel refused. A target that cannot be reached is not asked:
when no try ever reached it (`handoff.reach`) nothing was delivered, and the task is
canceled; when one may have, the cancel is refused and the handoff goes on — only the
target can say.
"""

from __future__ import annotations

from pydantic import ValidationError

from a2a_handoff.client.client import AgentClient
from a2a_handoff.errors import (
    CircuitOpenError,
    ConflictError,
    HandoffError,
    RemoteError,
    TaskNotCancelableError,
    UnavailableError,
)
from a2a_handoff.handoff.classify import refused
from a2a_handoff.handoff.envelope import HandoffEnvelope
from a2a_handoff.handoff.job import DeliveryJob
from a2a_handoff.handoff.reach import said_of
from a2a_handoff.handoff.sender import FAILED, PENDING
from a2a_handoff.handoff.terminate import close_once, transferred
from a2a_handoff.handoff.wire import create_params
from a2a_handoff.observe import events
from a2a_handoff.protocol.extension import HANDING_OFF, ext_metadata
from a2a_handoff.protocol.extension import HANDOFF_EXTENSION_URI as URI
from a2a_handoff.protocol.models import Task
from a2a_handoff.protocol.states import TaskState
from a2a_handoff.stores.base import OutboxEntry, Store, TaskRecord
from a2a_handoff.trust.agent_trust import AgentTrust


def handing_off(record: TaskRecord) -> bool:
    """Whether the task is being handed off (its outbox entry pending)."""
    return not record.state.terminal and ext_metadata(record.task).get("state") == HANDING_OFF


class Withdrawal:
    """Withdraws this agent's handoffs, for a cancel of their tasks."""

    def __init__(self, store: Store, client: AgentClient, trust: AgentTrust) -> None:
        self.store = store
        self.client = client
        self.trust = trust

    async def cancel(self, record: TaskRecord) -> TaskRecord:
        """Cancel the task `record` hands off: its CANCELED record, or
        TaskNotCancelableError saying why not (taken already: where it went)."""
        for _ in range(3):
            entry = await self._entry(record)
            envelope, body = DeliveryJob(entry).opened()
            answer = await self._withdraw(entry, envelope, body, record)
            try:
                if answer is None or refused(answer):  # nothing was, or will be, taken
                    return await self._canceled(entry, envelope, record)
                await transferred(self.store, entry, envelope, answer, record)
            except ConflictError:  # it moved meanwhile (a try's answer came): look again
                fresh = await self.store.get(record.id)
                if fresh is None:
                    break
                record = fresh
                continue
            raise TaskNotCancelableError(
                f"task {record.id} was handed off to {entry.target_name} before the cancel"
                f" (its task {answer.id} there): it goes on at {entry.target_name}",
                metadata={"taskId": record.id},
            )
        raise TaskNotCancelableError(
            f"task {record.id} kept changing while its handoff was withdrawn; try again",
            metadata={"taskId": record.id},
        )

    async def _entry(self, record: TaskRecord) -> OutboxEntry:
        """The pending entry of the task's handoff; TaskNotCancelableError when there is none
        (the task ended, or its handoff did: it is no longer being handed off)."""
        if handing_off(record):
            handoff_id = ext_metadata(record.task).get("handoffId")
            for entry in await self.store.outbox(status=PENDING, context_id=record.task.context_id):
                if entry.handoff_id == handoff_id:
                    return entry
        current = await self.store.get(record.id)
        state = current.state.name if current is not None else "gone"
        raise TaskNotCancelableError(
            f"task {record.id} is {state}: its handoff is over", metadata={"taskId": record.id}
        )

    async def _withdraw(
        self, entry: OutboxEntry, envelope: HandoffEnvelope, body: str, record: TaskRecord
    ) -> Task | None:
        """Ask the target: the task it answers (REJECTED: withdrawn or refused; else the
        successor it made), or None — it cannot be reached, and no try ever reached it."""
        signature = self.trust.sign_envelope(body.encode())
        params = create_params(envelope, body, signature, withdraw=True)
        try:
            answer = await self.client.call_json(
                entry.target_url, "SendMessage", params, extensions=[URI], idempotent=True
            )
            return Task.model_validate(answer.get("task") if isinstance(answer, dict) else None)
        except (UnavailableError, CircuitOpenError) as exc:
            if said_of(record) is False:
                return None
            raise TaskNotCancelableError(
                f"{entry.target_name} cannot be reached to withdraw the handoff ({exc}), and"
                f" it may have taken it: the handoff goes on; cancel again once"
                f" {entry.target_name} answers",
                metadata={"taskId": record.id},
            ) from None
        except (RemoteError, ValidationError, HandoffError) as exc:  # its card's too
            raise TaskNotCancelableError(
                f"{entry.target_name} did not take the withdrawal ({exc}): the handoff goes on",
                metadata={"taskId": record.id},
            ) from None

    async def _canceled(
        self, entry: OutboxEntry, envelope: HandoffEnvelope, record: TaskRecord
    ) -> TaskRecord:
        """ONE transaction from `record`: the task CANCELED, the entry closed `withdrawn`."""
        members = {**ext_metadata(record.task), "state": "CANCELED", "withdrawn": True}
        text = (
            f"Task canceled: its handoff to {entry.target_name} was withdrawn before it was taken"
        )
        canceled = await close_once(
            self.store,
            entry,
            record,
            TaskState.CANCELED,
            text,
            members,
            said=None,
            status=FAILED,
            detail="withdrawn",
        )
        events.handoff_sent(envelope, "withdrawn", text)
        events.transitions(record.id, record.task.context_id, [TaskState.CANCELED])
        return canceled
