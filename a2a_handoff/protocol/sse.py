"""Server-Sent Events framing, both ways: `frame()` writes one event, `read_events()` reads.

A stream's events carry `id: <seq>` (the task's event sequence number, for `Last-Event-ID`
resume) and one line of JSON as `data`, written together in one event. A lone comment line
(`: ping`, no blank line after it) keeps a quiet stream alive: it ends no event, so no parser
dispatches one for it. (A blank line after it would: parsers that keep the last `id:` for the
stream, as the SSE standard says, such as httpx-sse under the 0.3 SDK, then hand on an empty
event carrying that id, which a client reading every event as JSON fails on.)
"""

from __future__ import annotations

from collections.abc import AsyncIterator

PING = b": ping\n"
"""The keep-alive: a comment line alone; the next event's lines follow it (comments are skipped)."""


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
