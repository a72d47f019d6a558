"""Server-Sent Events framing, both ways: `frame()` writes one event, `read_events()` reads.

A stream's events carry `id: <seq>` (the task's event sequence number, for `Last-Event-ID`
resume) and one line of JSON as `data`. A comment line (`: ping`) keeps a quiet stream alive.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

PING = b": ping\n\n"


def frame(data: str, event_id: int | None = None) -> bytes:
    """One SSE event; `data` must be a single line (JSON is)."""
    head = f"id: {event_id}\n" if event_id is not None else ""
    return f"{head}data: {data}\n\n".encode()


async def read_events(lines: AsyncIterator[str]) -> AsyncIterator[tuple[int | None, str]]:
    """(id, data) of each event in a stream's lines; comments and pings are skipped."""
    data: list[str] = []
    event_id: int | None = None
    async for line in lines:
        if not line:
            if data:
                yield event_id, "\n".join(data)
            data, event_id = [], None
        elif line.startswith("data:"):
            data.append(line[5:].lstrip(" "))
        elif line.startswith("id:"):
            raw = line[3:].strip()
            event_id = int(raw) if raw.isdigit() else None
    if data:
        yield event_id, "\n".join(data)
