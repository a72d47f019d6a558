"""The light stand-ins the server's protocol gives uvicorn for its per-connection state."""

from __future__ import annotations

import asyncio
from collections import deque

import pytest

from a2a_handoff.server.limits import _Flag, _Pipeline

pytestmark = pytest.mark.anyio


async def test_the_flag_behaves_as_an_asyncio_event() -> None:
    flag = _Flag()
    assert not flag.is_set()
    waiters = [asyncio.create_task(flag.wait()) for _ in range(3)]
    gone = asyncio.create_task(flag.wait())
    await asyncio.sleep(0)
    gone.cancel()  # a cancelled waiter leaves; the others are all woken by one set()
    await asyncio.sleep(0)
    flag.set()
    assert await asyncio.gather(*waiters) == [True, True, True]
    assert gone.cancelled()
    assert flag.is_set()
    assert await flag.wait()  # set: returns at once
    flag.clear()
    late = asyncio.create_task(flag.wait())
    await asyncio.sleep(0.01)
    assert not late.done()
    flag.set()
    assert await late
    assert flag._waiters is None  # nobody waits: no list kept


def test_the_pipeline_queues_as_uvicorn_s_deque() -> None:
    ours, theirs = _Pipeline(), deque[int]()
    for item in (1, 2, 3):
        ours.appendleft(item)
        theirs.appendleft(item)
    assert [ours.pop() for _ in range(3)] == [theirs.pop() for _ in range(3)] == [1, 2, 3]
    assert not ours
