"""Leases (`capabilities.leases`): taken by one holder at a time, renewed by it, free again
when released or expired."""

from __future__ import annotations

import asyncio

import pytest

from a2a_handoff.stores.base import TaskStore
from a2a_handoff.stores.conformance.samples import Suite, declared
from a2a_handoff.stores.leasing import LeaseStore


class LeaseSuite(Suite):
    """`LeaseStore`, for every store that declares leases."""

    @pytest.fixture
    def leases(self, store: TaskStore) -> LeaseStore:
        return declared(store.capabilities.leases, "leases")

    async def test_a_lease_has_one_holder_until_released(self, leases: LeaseStore) -> None:
        assert await leases.acquire("outbox:h1", "a", 30)
        assert not await leases.acquire("outbox:h1", "b", 30)
        assert await leases.holder("outbox:h1") == "a"
        assert await leases.acquire("outbox:h1", "a", 30)  # the holder renews
        await leases.release("outbox:h1", "b")  # not b's to release
        assert await leases.holder("outbox:h1") == "a"
        await leases.release("outbox:h1", "a")
        assert await leases.holder("outbox:h1") is None
        assert await leases.acquire("outbox:h1", "b", 30)

    async def test_an_expired_lease_can_be_taken_over(self, leases: LeaseStore) -> None:
        assert await leases.acquire("replica:a", "a", 0.2)
        assert not await leases.acquire("replica:a", "b", 0.2)
        await asyncio.sleep(0.3)
        assert await leases.holder("replica:a") is None
        assert await leases.acquire("replica:a", "b", 0.2)
        assert await leases.holder("replica:a") == "b"

    async def test_leases_are_independent_by_name(self, leases: LeaseStore) -> None:
        assert await leases.acquire("task:1", "a", 30)
        assert await leases.acquire("task:2", "b", 30)
        assert (await leases.holder("task:1"), await leases.holder("task:2")) == ("a", "b")
