"""The payment provider billing refunds through: a stand-in for a payments API.

It keeps what it paid in a ledger — JSON lines in a file (`--payments FILE`; `servers all`
keeps `payments.jsonl` in its data directory), else in memory — and honours idempotency
keys as a payments API does: a refund asked again with a key it has seen is answered with
the payment made then, not paid again. Billing asks for each refund as a journaled step
(`ctx.step`), with the step's key: across any crash, an order is refunded once.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

from a2a_handoff.ids import new_id


class Payments:
    """Refunds, each paid once per idempotency key; the ledger in `ledger` (or memory)."""

    def __init__(self, ledger: Path | None = None) -> None:
        self.ledger = ledger
        self._memory: dict[str, dict[str, Any]] = {}  # key → its payment, oldest first
        self._lock = asyncio.Lock()

    async def refund(self, order_id: str, amount: float, key: str) -> dict[str, Any]:
        """Pay `amount` back on `order_id` (once per `key`); the payment."""
        if self.ledger is None:  # in memory: nothing to wait for, so no thread (and no lock)
            return self._in_memory(order_id, amount, key)
        async with self._lock:
            return await asyncio.to_thread(self._refund, order_id, amount, key)

    def payments(self) -> list[dict[str, Any]]:
        """Every payment made, oldest first."""
        if self.ledger is None:
            return list(self._memory.values())
        if not self.ledger.exists():
            return []
        return [json.loads(line) for line in self.ledger.read_text().splitlines() if line]

    def _in_memory(self, order_id: str, amount: float, key: str) -> dict[str, Any]:
        made = self._memory.get(key)
        if made is None:
            made = {"paymentId": new_id(), "key": key, "orderId": order_id, "amount": amount}
            self._memory[key] = made
        return made

    def _refund(self, order_id: str, amount: float, key: str) -> dict[str, Any]:
        assert self.ledger is not None
        made = next((p for p in self.payments() if p["key"] == key), None)
        if made is not None:
            return made
        payment = {"paymentId": new_id(), "key": key, "orderId": order_id, "amount": amount}
        fd = os.open(self.ledger, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        with open(fd, "a") as file:  # durable before it is answered, as a provider's is
            file.write(json.dumps(payment) + "\n")
            file.flush()
            os.fsync(file.fileno())
        return payment
