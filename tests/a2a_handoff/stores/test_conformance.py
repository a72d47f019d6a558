"""The conformance kit (`a2a_handoff.stores.conformance`) on the project's four backends —
memory, SQLite, a real Redis and a real PostgreSQL: the `store` fixture of conftest.py — and
on a store that declares the core alone, whose capability tests are skipped."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from a2a_handoff.stores import Capabilities, MemoryTaskStore
from a2a_handoff.stores.conformance import StoreConformance


class TestConformance(StoreConformance):
    """Every suite, on each backend."""


class CoreOnlyStore(MemoryTaskStore):
    """A third party's store that declares nothing beyond the core."""

    def __init__(self) -> None:
        super().__init__()
        self.capabilities = Capabilities()


class TestACoreOnlyStore(StoreConformance):
    """The kit on a store given by one fixture, as a third party's tests give theirs."""

    @pytest.fixture
    async def store(self) -> AsyncIterator[CoreOnlyStore]:
        async with CoreOnlyStore() as store:
            yield store
