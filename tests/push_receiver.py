"""A webhook receiver for push-notification tests: a Starlette app on 127.0.0.1 that appends
every request it gets to a JSON-lines file (headers, body) and acknowledges it.

    python -m tests.push_receiver --port P --log FILE [--fail-first]

`--fail-first` answers 503 to the first request of each delivery id (recorded all the same):
the agent must deliver it again, which is what a receiver that crashed before acknowledging
would see — duplicates that the id lets it drop.
"""

from __future__ import annotations

import argparse
import base64
import json
from pathlib import Path
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route


def receiver(log: Path, fail_first: bool = False) -> Starlette:
    seen: set[str] = set()

    async def hook(request: Request) -> Response:
        body = await request.body()
        entry = {
            "path": request.url.path,
            "headers": dict(request.headers),
            "body": base64.b64encode(body).decode(),
        }
        with log.open("a") as out:
            out.write(json.dumps(entry) + "\n")
        delivery = request.headers.get("x-a2a-delivery-id", "")
        if fail_first and delivery not in seen:
            seen.add(delivery)
            return Response(status_code=503)
        return Response(status_code=204)

    return Starlette(routes=[Route("/{path:path}", hook, methods=["POST"])])


def received(log: Path) -> list[dict[str, Any]]:
    """What the receiver logged: each request's headers and body (bytes)."""
    if not log.exists():
        return []
    entries = []
    for line in log.read_text().splitlines():
        entry = json.loads(line)
        entry["body"] = base64.b64decode(entry["body"])
        entries.append(entry)
    return entries


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--log", type=Path, required=True)
    parser.add_argument("--fail-first", action="store_true")
    args = parser.parse_args()
    app = receiver(args.log, args.fail_first)
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
