"""Paired latency: one request at a time to server A, then to server B, then B, then A, …

    python bench/pairs.py URL_A URL_B -n 2000 [--text TEXT] [--expect STATE] [--out FILE]

Each request is a SendMessage with a messageId never used before, on a keep-alive connection
per server, sent and read over a raw socket (a few µs of client per request, like wrk's, so
the server's share of the round trip is not diluted); the reply must be HTTP 200 with the
task in `--expect` (default TASK_STATE_COMPLETED; a transfer shows COMPLETED to a client
without the handoff extension), anything else is counted as an error. Because A and B take
turns request by request (ABBA), a drift in the machine's speed hits both alike: the figures
are the median latency of each, and the median of the ratios A/B of the paired requests.
127.0.0.1 only; bounded by -n and --deadline.
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import time
import uuid
from urllib.parse import urlsplit


class Connection:
    """A keep-alive HTTP/1.1 connection that posts JSON-RPC bodies and reads whole replies."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        if parts.hostname not in ("127.0.0.1", "::1", "localhost"):
            raise SystemExit(f"{url}: loopback only")
        self.address = (parts.hostname, parts.port or 80)
        self.head = (
            f"POST {parts.path or '/'} HTTP/1.1\r\nHost: {parts.netloc}\r\n"
            "Content-Type: application/json\r\nA2A-Version: 1.0\r\nContent-Length: "
        ).encode()
        self.sock = socket.create_connection(self.address, timeout=30)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buffer = b""

    def post(self, body: bytes) -> tuple[int, bytes]:
        self.sock.sendall(self.head + str(len(body)).encode() + b"\r\n\r\n" + body)
        while b"\r\n\r\n" not in self.buffer:
            self._read()
        header, _, self.buffer = self.buffer.partition(b"\r\n\r\n")
        status = int(header.split(b" ", 2)[1])
        length = 0
        for line in header.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        while len(self.buffer) < length:
            self._read()
        reply, self.buffer = self.buffer[:length], self.buffer[length:]
        return status, reply

    def _read(self) -> None:
        chunk = self.sock.recv(65536)
        if not chunk:
            raise ConnectionError("the server closed the connection")
        self.buffer += chunk


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("a")
    parser.add_argument("b")
    parser.add_argument("-n", type=int, default=2000, help="pairs measured")
    parser.add_argument("--warmup", type=int, default=100, help="pairs sent first, not counted")
    parser.add_argument("--text", default="hello")
    parser.add_argument("--expect", default="TASK_STATE_COMPLETED")
    parser.add_argument("--deadline", type=float, default=300.0, help="seconds at most")
    parser.add_argument("--out", help="write the summary as JSON here")
    args = parser.parse_args()

    servers = [Connection(args.a), Connection(args.b)]
    run = uuid.uuid4().hex[:12]
    expect = args.expect.encode()
    text = json.dumps(args.text)
    errors = [0, 0]
    latency: list[list[float]] = [[], []]
    count = 0

    def send(side: int) -> float | None:
        nonlocal count
        count += 1
        body = (
            f'{{"jsonrpc":"2.0","id":{count},"method":"SendMessage","params":{{"message":'
            f'{{"messageId":"pair-{run}-{count}","role":"ROLE_USER","parts":[{{"text":{text}}}]}}}}}}'
        ).encode()
        started = time.perf_counter()
        status, reply = servers[side].post(body)
        took = time.perf_counter() - started
        if status != 200 or b'"error"' in reply or expect not in reply:
            errors[side] += 1
            return None
        return took

    stop = time.monotonic() + args.deadline
    for i in range(args.warmup + args.n):
        if time.monotonic() > stop:
            break
        order = (0, 1) if i % 2 == 0 else (1, 0)
        took = {side: send(side) for side in order}
        if i < args.warmup or took[0] is None or took[1] is None:
            continue
        latency[0].append(took[0])
        latency[1].append(took[1])

    pairs = len(latency[0])
    if not pairs:
        raise SystemExit(f"no good pairs (errors: A {errors[0]}, B {errors[1]})")
    ratios = [a / b for a, b in zip(latency[0], latency[1], strict=True)]
    summary = {
        "pairs": pairs,
        "a_p50_ms": statistics.median(latency[0]) * 1000,
        "b_p50_ms": statistics.median(latency[1]) * 1000,
        "ratio_p50": statistics.median(ratios),
        "errors": errors[0] + errors[1],
    }
    if args.out:
        with open(args.out, "w") as out:
            json.dump(summary, out)
    print(
        f"pairs={pairs} A p50={summary['a_p50_ms']:.3f} ms B p50={summary['b_p50_ms']:.3f} ms "
        f"paired ratio A/B p50={summary['ratio_p50']:.3f} errors={summary['errors']}"
    )


if __name__ == "__main__":
    main()
