"""The ledger (`capabilities.ledger`): the outbox of handoffs sent and the ledger of those
received, read back. Its rows are written with their task's step (`commit_suite`), or alone
for a handoff that made no task (`record_received`)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from a2a_handoff.protocol.models import utc_now
from a2a_handoff.protocol.states import TaskState
from a2a_handoff.stores.base import LedgerStore, ReceivedEntry, TaskStore
from a2a_handoff.stores.conformance.samples import (
    Suite,
    create,
    declared,
    entry,
    moving,
)


class LedgerSuite(Suite):
    """`LedgerStore`, for every store that declares a ledger."""

    @pytest.fixture
    def ledger(self, store: TaskStore) -> LedgerStore:
        return declared(store.capabilities.ledger, "ledger")

    async def test_outbox_filters_by_context_and_the_ledger_keeps_received(
        self, store: TaskStore, ledger: LedgerStore
    ) -> None:
        one, two = await create(store, context_id="c1"), await create(store, context_id="c2")
        for record, handoff_id, context in ((one, "ha", "c1"), (two, "hb", "c2")):
            added = entry(record, handoff_id, context)
            await store.commit(moving(record, TaskState.WORKING, outbox=added)[1])
        assert [e.handoff_id for e in await ledger.outbox(context_id="c2")] == ["hb"]
        received = ReceivedEntry(
            "h", "k" * 16, "c1", "triage", "t0", one.id, "accepted", "", utc_now()
        )
        await ledger.record_received(received)
        await ledger.record_received(replace(received, context_id="c2", outcome="duplicate"))
        assert await ledger.received("c1") == [received]
        assert len(await ledger.received()) == 2
