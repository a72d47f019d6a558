"""In-memory store: the reference semantics in the fewest lines, for unit tests only.

Scans where the other backends use indexes: it never holds much.
"""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator
from dataclasses import replace

from a2a_handoff.errors import ConflictError
from a2a_handoff.stores._hub import EventHub, follow
from a2a_handoff.stores._pages import ledger_page, page_of
from a2a_handoff.stores.base import (
    Capabilities,
    Commit,
    HandoffStats,
    OutboxEntry,
    PushConfigRecord,
    ReceivedEntry,
    TaskEvent,
    TaskPage,
    TaskQuery,
    TaskRecord,
    check_ledger,
)
from a2a_handoff.stores.leasing import LocalLeases
from a2a_handoff.stores.records import owner_principal


class MemoryTaskStore(LocalLeases):
    """Tasks, event logs, outbox and ledger in dicts; nothing survives the process."""

    def __init__(self) -> None:
        super().__init__()
        self._outbox: dict[str, OutboxEntry] = {}
        self._received: list[ReceivedEntry] = []
        self._records: dict[str, TaskRecord] = {}
        self._events: dict[str, list[TaskEvent]] = {}
        self._dedupe: dict[str, tuple[str, float | None]] = {}  # key → (task, expiry)
        self._hub = EventHub()
        self._identities: dict[str, str] = {}
        self._push: dict[tuple[str, str], PushConfigRecord] = {}
        # Beyond the core (`stores.base`): everything, the agent's keys in memory too.
        self.capabilities = Capabilities(
            ledger=self, push=self, leases=self, identity=self, retention=self
        )

    async def commit(self, unit: Commit) -> TaskRecord:
        check_ledger(unit, self.capabilities.ledger)
        record = unit.record
        # Every check before any write: a refused commit leaves nothing behind.
        if unit.creates:
            if unit.dedupe_key is not None:
                existing = await self.find(unit.dedupe_key)
                if existing is not None:
                    return self._records[existing]
            if record.id in self._records:
                raise ConflictError(f"task {record.id} already exists")
        else:
            current = self._records.get(record.id)
            if current is None or current.version != unit.expected_version:
                raise ConflictError(
                    f"task {record.id} changed since version {unit.expected_version}"
                )
        if unit.outbox is not None and unit.outbox.handoff_id in self._outbox:
            raise ConflictError(f"handoff {unit.outbox.handoff_id} already checkpointed")
        closed = None
        if (close := unit.close) is not None:
            pending = self._outbox.get(close.handoff_id)
            if pending is None or pending.status != "pending":
                raise ConflictError(f"handoff {close.handoff_id} is not pending")
            closed = replace(
                pending, status=close.status, detail=close.detail, updated_at=record.updated_at
            )
        if closed is not None:
            self._outbox[closed.handoff_id] = closed
        if unit.outbox is not None:
            self._outbox[unit.outbox.handoff_id] = unit.outbox
        if unit.received is not None:
            self._received.append(unit.received)
        self._records[record.id] = record
        logged = [TaskEvent(seq, item) for seq, item in enumerate(unit.events, unit.first_seq)]
        self._events.setdefault(record.id, []).extend(logged)
        if unit.dedupe_key is not None:
            ttl = unit.dedupe_ttl
            expires = time.monotonic() + ttl if ttl is not None else None
            self._dedupe[unit.dedupe_key] = (record.id, expires)
        self._hub.publish(record.id, logged)
        return record

    async def get(self, task_id: str) -> TaskRecord | None:
        return self._records.get(task_id)

    async def find(self, dedupe_key: str) -> str | None:
        found = self._dedupe.get(dedupe_key)
        if found is None or (found[1] is not None and found[1] <= time.monotonic()):
            return None
        return found[0]

    async def list_tasks(self, query: TaskQuery) -> TaskPage:
        return page_of(self._records.values(), query)

    async def events(self, task_id: str, after: int = 0) -> list[TaskEvent]:
        return [e for e in self._events.get(task_id, ()) if e.seq > after]

    def follow(self, task_id: str, after: int = 0) -> AsyncGenerator[TaskEvent, None]:
        return follow(self._hub, task_id, after, self.events, self.get)

    async def outbox(
        self, *, status: str | None = None, context_id: str | None = None
    ) -> list[OutboxEntry]:
        return sorted(
            (
                e
                for e in self._outbox.values()
                if (status is None or e.status == status)
                and (context_id is None or e.context_id == context_id)
            ),
            key=lambda e: (e.created_at, e.handoff_id),
        )

    async def record_received(self, entry: ReceivedEntry) -> None:
        self._received.append(entry)

    async def received(self, context_id: str | None = None) -> list[ReceivedEntry]:
        return [e for e in self._received if context_id is None or e.context_id == context_id]

    async def sent_page(
        self, *, owner: str | None, context_id: str | None, after: str, limit: int
    ) -> tuple[list[OutboxEntry], str]:
        entries = [
            e for e in await self.outbox(context_id=context_id) if owner is None or e.owner == owner
        ]
        return ledger_page(entries, after, limit)

    async def received_page(
        self, *, context_id: str | None, after: str, limit: int
    ) -> tuple[list[ReceivedEntry], str]:
        return ledger_page(await self.received(context_id), after, limit)

    async def handoff_stats(self, stale_before: str) -> HandoffStats:
        pending = [e.created_at for e in self._outbox.values() if e.status == "pending"]
        done = [e.updated_at for e in self._outbox.values() if e.status == "done"]
        return HandoffStats(
            pending=len(pending),
            stale=sum(1 for created in pending if created < stale_before),
            oldest_pending=min(pending, default=None),
            last_done=max(done, default=None),
        )

    async def put_push_config(self, record: PushConfigRecord) -> PushConfigRecord:
        key = (record.task_id, record.config_id)
        current = self._push.get(key)
        if current is not None:
            record = replace(current, config=record.config, updated_at=record.updated_at)
        self._push[key] = record
        return record

    async def push_configs(
        self, task_id: str, config_id: str | None = None
    ) -> list[PushConfigRecord]:
        return [
            r
            for (task, config), r in self._push.items()
            if task == task_id and config_id in (None, config)
        ]

    async def delete_push_config(self, task_id: str, config_id: str) -> None:
        self._push.pop((task_id, config_id), None)

    async def save_push_progress(self, record: PushConfigRecord) -> bool:
        key = (record.task_id, record.config_id)
        current = self._push.get(key)
        if current is None:
            return False
        self._push[key] = replace(
            current,
            cursor=record.cursor,
            failing_since=record.failing_since,
            history=record.history,
            done=record.done,
            updated_at=record.updated_at,
        )
        return True

    async def active_push_configs(self) -> list[PushConfigRecord]:
        return [r for r in self._push.values() if not r.done]

    async def active_push_count(self, principal: str) -> int:
        records = self._records
        return sum(
            1
            for r in self._push.values()
            if not r.done
            and r.task_id in records
            and owner_principal(records[r.task_id].owner) == principal
        )

    async def purge_finished(self, before: str, limit: int) -> int:
        now = time.monotonic()
        kept = {task for task, expires in self._dedupe.values() if expires and expires > now}
        kept |= {e.task_id for e in self._outbox.values() if e.status == "pending"}
        kept |= {task for (task, _), r in self._push.items() if not r.done}
        doomed = [
            r.id
            for r in self._records.values()
            if r.state.terminal and r.updated_at < before and r.id not in kept
        ][:limit]
        gone = set(doomed)
        for task_id in doomed:
            del self._records[task_id]
            self._events.pop(task_id, None)
        self._push = {k: r for k, r in self._push.items() if k[0] not in gone}
        self._outbox = {h: e for h, e in self._outbox.items() if e.task_id not in gone}
        self._received = [e for e in self._received if e.task_id not in gone]
        self._dedupe = {k: v for k, v in self._dedupe.items() if v[0] not in gone}
        # Ledger rows of handoffs that made no task (refused), as old.
        orphans = [e for e in self._received if e.at < before and e.task_id not in self._records][
            : limit - len(doomed)
        ]
        dropped = {id(e) for e in orphans}
        self._received = [e for e in self._received if id(e) not in dropped]
        return len(doomed) + len(orphans)

    async def load_identity(self, agent: str) -> str | None:
        return self._identities.get(agent)

    async def save_identity(self, agent: str, document: str, expected: str | None) -> bool:
        if self._identities.get(agent) != expected:
            return False
        self._identities[agent] = document
        return True

    def claim(self, agent: str) -> None:
        """Nothing to record: this store is one process's own (SQLite's file lock refuses a
        second process, `stores._sqlite_owner`)."""

    async def open(self) -> MemoryTaskStore:
        return self

    async def ping(self) -> bool:
        return True

    async def problem(self) -> str | None:
        return None

    async def aclose(self) -> None:
        return None

    async def __aenter__(self) -> MemoryTaskStore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
