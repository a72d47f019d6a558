"""Fair shares of the agent's connections: each receiver gets at most a few at once.

A receiver is a webhook URL's origin (`scheme://host:port`). Deliveries to one receiver wait
for one another, never for those of another receiver: a receiver that answers slowly (or
never) holds at most `limit` connections, its own, while every other receiver's deliveries go
on. What one receiver may hold in time is bounded too (`PushSettings.deadline`, in
`_webhook`). A receiver's gate lives while a delivery to it is under way or waiting.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import httpx

_DEFAULT_PORTS = {"http": 80, "https": 443}


def origin_of(url: str) -> str:
    """`scheme://host:port` of `url` (the port made explicit: one receiver, one name)."""
    parts = httpx.URL(url)
    port = parts.port or _DEFAULT_PORTS.get(parts.scheme, 0)
    return f"{parts.scheme}://{parts.host}:{port}"


@dataclass(slots=True)
class _Gate:
    seats: asyncio.Semaphore
    users: int = field(default=0)  # deliveries in it or waiting for it


class ReceiverGates:
    """At most `limit` deliveries under way at once to each receiver."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._gates: dict[str, _Gate] = {}

    def __len__(self) -> int:
        """How many receivers have a delivery under way or waiting."""
        return len(self._gates)

    @contextlib.asynccontextmanager
    async def seat(self, url: str) -> AsyncIterator[None]:
        """Hold one of the connections of `url`'s receiver (waiting for one if need be)."""
        origin = origin_of(url)
        gate = self._gates.get(origin)
        if gate is None:
            gate = self._gates[origin] = _Gate(asyncio.Semaphore(self.limit))
        gate.users += 1
        try:
            async with gate.seats:
                yield
        finally:
            gate.users -= 1
            if gate.users == 0:
                del self._gates[origin]
