"""Pages of tasks and of the ledger, for the backends: opaque tokens, and paging in memory.

SQLite and PostgreSQL page in SQL (by their indexes); memory and Redis narrow the candidates
by their own indexes and order and page them here, by their summaries (`Summary`: index fields
only): no body is read, let alone parsed, to decide what a page holds.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from a2a_handoff.errors import InvalidParamsError
from a2a_handoff.stores.base import TaskPage, TaskQuery, TaskRecord
from a2a_handoff.stores.records import owner_tenant

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


@dataclass(frozen=True, slots=True)
class Summary:
    """What a list query filters and orders a task by: its index fields, never its body."""

    id: str
    owner: str
    delegate: str
    context_id: str
    state: str
    updated_at: str
    status_at: str  # the status's timestamp ("" when it has none)

    @classmethod
    def of(cls, record: TaskRecord) -> Summary:
        task = record.task
        return cls(
            task.id,
            record.owner,
            record.delegate,
            task.context_id,
            record.state.value,
            record.updated_at,
            task.status.timestamp or "",
        )

    def matches(self, query: TaskQuery) -> bool:
        states = query.states
        after = query.status_after
        return (
            (query.owner is None or query.owner in (self.owner, self.delegate or None))
            and (query.tenant is None or owner_tenant(self.owner) == query.tenant)
            and (query.context_id is None or self.context_id == query.context_id)
            and (states is None or self.state in {s.value for s in states})
            and (after is None or (self.updated_at > after and self.status_at > after))
        )


def summary_page(summaries: Iterable[Summary], query: TaskQuery) -> tuple[list[str], str, int]:
    """`query` answered from candidates' summaries: the page's ids in order, the next page's
    token ("" when none) and the total. Only the page's bodies are then to be read."""
    matching = [s for s in summaries if s.matches(query)]
    matching.sort(key=lambda s: (s.updated_at, s.id), reverse=True)
    start = 0
    if query.page_token:
        cursor = decode_page_token(query.page_token)
        start = next(
            (i for i, s in enumerate(matching) if (s.updated_at, s.id) < cursor),
            len(matching),
        )
    page = matching[start : start + query.page_size]
    more = start + len(page) < len(matching)
    token = encode_page_token(page[-1].updated_at, page[-1].id) if more and page else ""
    return [s.id for s in page], token, len(matching)


def page_of(records: Iterable[TaskRecord], query: TaskQuery) -> TaskPage:
    """`query` answered from records in memory: filter, order, page (`summary_page`)."""
    by_id = {r.id: r for r in records}
    ids, token, total = summary_page(map(Summary.of, by_id.values()), query)
    return cut(
        [by_id[i] for i in ids], token, total, query, [len(by_id[i].task_json()) for i in ids]
    )


def cut(
    records: list[TaskRecord], token: str, total: int, query: TaskQuery, sizes: list[int]
) -> TaskPage:
    """The page of `records` (their JSON `sizes`) within `query.page_bytes`; the token then
    goes on after the last one kept."""
    kept = fitting(sizes, query.page_bytes)
    if kept < len(records):
        records = records[:kept]
        token = encode_page_token(records[-1].updated_at, records[-1].id)
    return TaskPage(records=records, next_page_token=token, total_size=total)


def fitting(sizes: Iterable[int], budget: int) -> int:
    """How many of a page's tasks, of these JSON sizes in order, fit in `budget` (one at
    least: a page always moves on)."""
    count = total = 0
    for size in sizes:
        total += size
        if count and total > budget:
            break
        count += 1
    return count


def ledger_page(rows: Sequence[T], after: str, limit: int) -> tuple[list[T], str]:
    """A page of an append-only list, by position: for backends that keep the ledger in order."""
    start = int(after) if after.isdigit() else 0
    page = list(rows[start : start + limit])
    more = start + limit < len(rows)
    return page, str(start + limit) if more else ""
