"""Who sees a task and who decides its escalation.

Invariants: a caller sees only its own tasks (another owner's task answers -32001, as if
absent); operators see every task of the tenant they call in; under API-key auth only
operators decide an escalation (without authentication, whoever reaches the agent does); a
task handed over for a user (its `delegate`) is answered and canceled by that user or an
operator, never by the agent that handed it over, which only reads it. An owner is a
principal within a tenant (`stores.records.tenant_owner`): nobody sees anything of another
tenant than the one it calls in — an operator neither (it is an operator in every tenant, of
that tenant's tasks).
"""

from __future__ import annotations

from a2a_handoff.errors import TaskNotFoundError, UnsupportedOperationError
from a2a_handoff.stores.base import Store, TaskRecord
from a2a_handoff.stores.records import owner_principal, owner_tenant


class TaskLookup:
    """Looks up one agent's committed tasks on behalf of a caller."""

    def __init__(self, store: Store, operators: frozenset[str] | None) -> None:
        self.store = store
        self.operators = operators  # None: no authentication, every caller is an operator

    async def owned(self, task_id: str, owner: str) -> TaskRecord:
        """The committed task if `owner` may see it; -32001 exactly as if absent otherwise."""
        record = await self.store.get(task_id)
        if record is None or not (
            record.visible_to(owner)
            or (self.sees_all(owner) and owner_tenant(record.owner) == owner_tenant(owner))
        ):
            raise TaskNotFoundError(f"task {task_id} not found", metadata={"taskId": task_id})
        return record

    async def answerable(self, task_id: str, principal: str) -> TaskRecord:
        """The committed task if `principal` may continue or cancel it (as `owned`); -32004
        for the agent that handed a user's task over: it reads and follows the task there,
        but the conversation is the user's — it neither speaks for the user nor ends it."""
        record = await self.owned(task_id, principal)
        if (
            record.delegate
            and principal == record.owner
            and principal != record.delegate
            and not self.decides(principal)
        ):
            raise UnsupportedOperationError(
                f"task {task_id} is {record.delegate}'s: {principal} handed it over and may"
                f" read it, but only {record.delegate} (or an operator) answers or cancels it",
                metadata={"taskId": task_id},
            )
        return record

    def sees_all(self, owner: str) -> bool:
        """Whether `owner`'s principal is an operator of this agent: it sees every task of
        the tenant it calls in (`owner`'s), and nothing of another."""
        return self.operators is not None and owner_principal(owner) in self.operators

    def decides(self, owner: str) -> bool:
        """Whether `owner`'s principal may decide an escalation here, within its tenant: an
        operator (without authentication, whoever reaches the agent)."""
        return self.operators is None or owner_principal(owner) in self.operators
