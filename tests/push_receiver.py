"""Webhook receivers for push-notification tests.

A Starlette app on 127.0.0.1 that appends every request it gets to a JSON-lines file
(headers, body) and acknowledges it:

    python -m tests.push_receiver --port P --log FILE [--fail-first]

`--fail-first` answers 503 to the first request of each delivery id (recorded all the same):
the agent must deliver it again, which is what a receiver that crashed before acknowledging
would see — duplicates that the id lets it drop.

`SlowReceiver` (in the test's process, on threads): a receiver that takes every request and
answers it one byte every `interval` seconds — a connection held as long as it likes, unless
the agent bounds a delivery's whole time.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import json
import socket
import threading
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


class SlowReceiver:
    """A receiver answering one byte every `interval` seconds; counts its connections."""

    ANSWER = b"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n"

    def __init__(self, interval: float = 3.0) -> None:
        self.interval = interval
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.changed = threading.Condition()
        self.requests = 0  # requests whose headers arrived
        self.open = 0  # connections being answered now
        self.peak = 0  # the most open at once
        self.answered = 0  # requests answered to the last byte
        self.stopping = threading.Event()
        self.threads: list[threading.Thread] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/slow"

    def start(self) -> SlowReceiver:
        self._spawn(self._accept)
        return self

    def wait_requests(self, count: int, timeout: float) -> None:
        """Until `count` requests arrived (AssertionError after `timeout` seconds)."""
        with self.changed:
            if not self.changed.wait_for(lambda: self.requests >= count, timeout):
                raise AssertionError(f"{self.requests} requests arrived, not {count}")

    def close(self) -> None:
        self.stopping.set()
        with contextlib.suppress(OSError):
            self.server.shutdown(socket.SHUT_RDWR)  # wakes the thread waiting in accept()
        self.server.close()
        for thread in self.threads:
            thread.join(5)

    def _spawn(self, target: Any, *args: Any) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)
        self.threads.append(thread)
        thread.start()

    def _accept(self) -> None:
        while not self.stopping.is_set():
            try:
                conn, _ = self.server.accept()
            except OSError:  # closed
                return
            self._spawn(self._answer, conn)

    def _count(self, **delta: int) -> None:
        with self.changed:
            for name, change in delta.items():
                setattr(self, name, getattr(self, name) + change)
            self.peak = max(self.peak, self.open)
            self.changed.notify_all()

    def _answer(self, conn: socket.socket) -> None:
        with conn:
            self._count(open=1)
            try:
                received = b""
                while b"\r\n\r\n" not in received:
                    chunk = conn.recv(65536)
                    if not chunk:
                        return
                    received += chunk
                self._count(requests=1)
                for byte in self.ANSWER:
                    if self.stopping.wait(self.interval):
                        return
                    conn.sendall(bytes([byte]))
                self._count(answered=1)
            except OSError:  # the agent gave up on it
                return
            finally:
                self._count(open=-1)


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
