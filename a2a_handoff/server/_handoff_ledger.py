"""`ListHandoffs` (ours): the handoff ledger of one agent, for every face.

Sent (the outbox) and received, oldest first, a page of each at a time (`pageSize`, default
50, at most 1000; `pageToken`). A caller sees the handoffs it sent, and those received into
tasks it may see; a page token is ours and names its context, so one made for another
context is refused (-32602).
"""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Any

from pydantic import Field

from a2a_handoff.errors import InvalidParamsError
from a2a_handoff.handoff.ledger import received_row, sent_row
from a2a_handoff.protocol.models import WireModel
from a2a_handoff.runtime.tasks import TaskManager


class ListHandoffsRequest(WireModel):
    context_id: str | None = None
    page_size: int | None = Field(default=None, ge=1, le=1000)
    page_token: str | None = None


class HandoffLedger:
    """The ledger method of one agent's task manager."""

    def __init__(self, manager: TaskManager) -> None:
        self.manager = manager
        self.store = manager.store

    async def _visible(self, task_id: str, principal: str) -> bool:
        record = await self.store.get(task_id)
        return record is not None and record.visible_to(principal)

    async def list_handoffs(self, request: ListHandoffsRequest, principal: str) -> dict[str, Any]:
        """A page of the sent and the received handoffs, and the next page's token."""
        limit = request.page_size or 50
        context_id = request.context_id
        sent_after, received_after = _ledger_cursors(request.page_token, context_id)
        contracts = self.manager.handoffs.settings.contracts
        sent: list[dict[str, object]] = []
        next_sent: str | None = None
        if sent_after is not None:
            entries, next_sent = await self.store.sent_page(
                owner=principal, context_id=context_id, after=sent_after, limit=limit
            )
            sent = [sent_row(e, contracts) for e in entries]
        received: list[dict[str, object]] = []
        next_received: str | None = None
        if received_after is not None:
            rows, next_received = await self.store.received_page(
                context_id=context_id, after=received_after, limit=limit
            )
            ids = sorted({e.task_id for e in rows})
            shown = await asyncio.gather(*(self._visible(i, principal) for i in ids))
            visible = {i for i, ok in zip(ids, shown, strict=True) if ok}
            received = [received_row(e) for e in rows if e.task_id in visible]
        token = _ledger_token(next_sent or None, next_received or None, context_id)
        return {"sent": sent, "received": received, "nextPageToken": token}


def _ledger_token(sent: str | None, received: str | None, context_id: str | None) -> str:
    """The next page's token: where each list goes on (None: that list is done)."""
    if sent is None and received is None:
        return ""
    raw = json.dumps([sent, received, context_id], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _ledger_cursors(token: str | None, context_id: str | None) -> tuple[str | None, str | None]:
    """(sent cursor, received cursor) a ListHandoffs token names ("" from the start, None:
    that list is done); -32602 when it is not one of ours, or was for another context."""
    if not token:
        return "", ""
    try:
        value = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        sent, received, context = value
        if context == context_id and all(c is None or isinstance(c, str) for c in value):
            return sent, received
    except (ValueError, TypeError):
        pass
    raise InvalidParamsError("pageToken: not a token this server issued for these params")
