"""Pages of tasks and of the ledger, for the backends: opaque tokens, and paging in memory.

SQLite pages in SQL (by its indexes); memory and Redis narrow the candidates by their own
indexes and order and page them here.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Sequence
from typing import TypeVar

from a2a_handoff.errors import InvalidParamsError
from a2a_handoff.stores.base import TaskPage, TaskQuery, TaskRecord

T = TypeVar("T")


def encode_page_token(updated_at: str, task_id: str) -> str:
    raw = json.dumps([updated_at, task_id], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_page_token(token: str) -> tuple[str, str]:
    """The (updated_at, task_id) a page token names; -32602 when it is not one of ours."""
    try:
        padded = token + "=" * (-len(token) % 4)
        value = json.loads(base64.urlsafe_b64decode(padded.encode()))
        updated_at, task_id = value
        if isinstance(updated_at, str) and isinstance(task_id, str):
            return updated_at, task_id
    except (ValueError, TypeError):
        pass
    raise InvalidParamsError("pageToken: not a token this server issued")


def page_of(records: Iterable[TaskRecord], query: TaskQuery) -> TaskPage:
    """`query` answered from candidate records in memory: filter, order, page.

    For backends without a query engine (memory, Redis); SQLite does the same in SQL.
    """
    matching = [
        r
        for r in records
        if (query.owner is None or r.visible_to(query.owner))
        and (query.context_id is None or r.task.context_id == query.context_id)
        and (query.states is None or r.state in query.states)
        and (query.status_after is None or _status_after(r, query.status_after))
    ]
    matching.sort(key=lambda r: (r.updated_at, r.id), reverse=True)
    start = 0
    if query.page_token:
        cursor = decode_page_token(query.page_token)
        start = next(
            (i for i, r in enumerate(matching) if (r.updated_at, r.id) < cursor),
            len(matching),
        )
    page = matching[start : start + query.page_size]
    more = start + query.page_size < len(matching)
    token = encode_page_token(page[-1].updated_at, page[-1].id) if more and page else ""
    return TaskPage(records=page, next_page_token=token, total_size=len(matching))


def ledger_page(rows: Sequence[T], after: str, limit: int) -> tuple[list[T], str]:
    """A page of an append-only list, by position: for backends that keep the ledger in order."""
    start = int(after) if after.isdigit() else 0
    page = list(rows[start : start + limit])
    more = start + limit < len(rows)
    return page, str(start + limit) if more else ""


def _status_after(record: TaskRecord, stamp: str) -> bool:
    return record.updated_at > stamp and (record.task.status.timestamp or "") > stamp
