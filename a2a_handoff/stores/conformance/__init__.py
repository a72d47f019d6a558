"""The store conformance kit: the behaviour every store backend must show, as pytest tests.

A backend's test module subclasses `StoreConformance` and gives it one fixture, `store`: the
backend's store, opened and empty for each test, closed after it:

    class TestMyStore(StoreConformance):
        @pytest.fixture
        async def store(self) -> AsyncIterator[MyStore]:
            async with MyStore(...) as store:
                yield store

The core (`TaskStore`) is tested on every store; a capability's tests run only on a store
that declares it in its `capabilities` (on another they are skipped, saying which part it
does not declare), and a declared part is checked against its protocol. The suites may also
be taken one by one: `TaskSuite`, `CommitSuite` (`TaskStore.commit` in each shape a step
takes, and that a refused one writes nothing), `ListingSuite`, `LedgerSuite`, `PushSuite`,
`LeaseSuite`, `IdentitySuite`, `RetentionSuite` (finished tasks purged past a cutoff, what
idempotency needs kept), `TenantSuite` (owners and dedupe keys kept apart per tenant).
The tests are async, run by anyio's pytest plugin (anyio comes with Starlette) on asyncio.

A test module, not a part of the library: it imports pytest, which the library does not
need, so only tests import it (`import a2a_handoff.stores` does not).
"""

from __future__ import annotations

import pytest

# Before the suites are imported: their asserts say what they compared when they fail.
pytest.register_assert_rewrite(
    *(
        f"a2a_handoff.stores.conformance.{name}"
        for name in (
            "samples",
            "task_suite",
            "commit_suite",
            "listing_suite",
            "ledger_suite",
            "push_suite",
            "lease_suite",
            "identity_suite",
            "retention_suite",
            "tenant_suite",
        )
    )
)

from a2a_handoff.stores.conformance.commit_suite import CommitSuite  # noqa: E402
from a2a_handoff.stores.conformance.identity_suite import IdentitySuite  # noqa: E402
from a2a_handoff.stores.conformance.lease_suite import LeaseSuite  # noqa: E402
from a2a_handoff.stores.conformance.ledger_suite import LedgerSuite  # noqa: E402
from a2a_handoff.stores.conformance.listing_suite import ListingSuite  # noqa: E402
from a2a_handoff.stores.conformance.push_suite import PushSuite  # noqa: E402
from a2a_handoff.stores.conformance.retention_suite import RetentionSuite  # noqa: E402
from a2a_handoff.stores.conformance.task_suite import TaskSuite  # noqa: E402
from a2a_handoff.stores.conformance.tenant_suite import TenantSuite  # noqa: E402

__all__ = [
    "CommitSuite",
    "IdentitySuite",
    "LeaseSuite",
    "LedgerSuite",
    "ListingSuite",
    "PushSuite",
    "RetentionSuite",
    "StoreConformance",
    "TaskSuite",
    "TenantSuite",
]


class StoreConformance(
    TaskSuite,
    CommitSuite,
    ListingSuite,
    LedgerSuite,
    PushSuite,
    LeaseSuite,
    IdentitySuite,
    RetentionSuite,
    TenantSuite,
):
    """Every suite: a backend's test class subclasses it and gives it a `store` fixture."""
