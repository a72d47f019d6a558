"""Leases: taken by one holder at a time, renewed by it, free again when released or expired."""

from __future__ import annotations

import asyncio

import pytest

from a2a_handoff.stores import Store

pytestmark = pytest.mark.anyio


async def test_a_lease_has_one_holder_until_released(store: Store) -> None:
    assert await store.acquire("outbox:h1", "a", 30)
    assert not await store.acquire("outbox:h1", "b", 30)
    assert await store.holder("outbox:h1") == "a"
    assert await store.acquire("outbox:h1", "a", 30)  # the holder renews
    await store.release("outbox:h1", "b")  # not b's to release
    assert await store.holder("outbox:h1") == "a"
    await store.release("outbox:h1", "a")
    assert await store.holder("outbox:h1") is None
    assert await store.acquire("outbox:h1", "b", 30)


async def test_an_expired_lease_can_be_taken_over(store: Store) -> None:
    assert await store.acquire("replica:a", "a", 0.2)
    assert not await store.acquire("replica:a", "b", 0.2)
    await asyncio.sleep(0.3)
    assert await store.holder("replica:a") is None
    assert await store.acquire("replica:a", "b", 0.2)
    assert await store.holder("replica:a") == "b"


async def test_leases_are_independent_by_name(store: Store) -> None:
    assert await store.acquire("task:1", "a", 30)
    assert await store.acquire("task:2", "b", 30)
    assert (await store.holder("task:1"), await store.holder("task:2")) == ("a", "b")
