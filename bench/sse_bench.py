"""SSE measurements against any A2A 1.0 JSON-RPC server (SendStreamingMessage).

    sse_bench.py first URL [-n 200] [--warmup 20] [--deadline 120] [--out FILE]
        N sequential streams on one keep-alive connection, message text 'hello'. Per stream:
        time to the first complete `data:` event and to the end of the stream. Every event
        must be a JSON-RPC result; the stream must end with the task COMPLETED.

    sse_bench.py hold URL --pid PID [-c 300] [--text sleep:10] [--deadline 60] [--out FILE]
        Opens C streams at once (each on its own connection) and waits until every one has
        delivered its first event, i.e. all C are open at the same time; then reads the
        server's RSS (psutil). KiB per stream = (RSS with all open - RSS before) / C.
        Then waits for the streams to finish (bounded by --deadline) and reads RSS again.

Prints one line `BENCH_JSON {...}`; writes the same JSON to --out when given.
Only 127.0.0.1 URLs are accepted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import sys
import time
import uuid
from typing import Any
from urllib.parse import urlsplit

import httpx

HEADERS = {
    "Content-Type": "application/json",
    "Accept": "text/event-stream",
    "A2A-Version": "1.0",
}


def body(text: str) -> bytes:
    rid = uuid.uuid4().hex
    return json.dumps(
        {
            "jsonrpc": "2.0",
            "id": rid,
            "method": "SendStreamingMessage",
            "params": {
                "message": {
                    "messageId": f"sse-{rid}",
                    "role": "ROLE_USER",
                    "parts": [{"text": text}],
                }
            },
        }
    ).encode()


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    k = (len(ordered) - 1) * p / 100
    lo = int(k)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


class Checker:
    """Counts bad streams: non-200, unparsable or error events, no final COMPLETED."""

    def __init__(self) -> None:
        self.errors = 0
        self.first: str | None = None

    def bad(self, what: str) -> None:
        self.errors += 1
        if self.first is None:
            self.first = what[:240]

    def event(self, data: str) -> str | None:
        """The state the event reports (if any); records a bad event."""
        try:
            doc = json.loads(data)
        except ValueError:
            self.bad("not JSON: " + data)
            return None
        if not isinstance(doc, dict) or "error" in doc or "result" not in doc:
            self.bad(data)
            return None
        result = doc["result"]
        for key in ("task", "statusUpdate"):
            part = result.get(key) if isinstance(result, dict) else None
            if isinstance(part, dict):
                state = part.get("status", {}).get("state")
                return state if isinstance(state, str) else None
        return None


def run_first(args: argparse.Namespace) -> dict[str, Any]:
    check = Checker()
    first: list[float] = []
    whole: list[float] = []
    events: list[int] = []
    deadline = time.monotonic() + args.deadline
    with httpx.Client(timeout=10) as client:
        for i in range(args.warmup + args.n):
            if time.monotonic() > deadline:
                check.bad(f"deadline reached after {i} streams")
                break
            t0 = time.perf_counter()
            t_first = None
            count = 0
            last_state = None
            with client.stream("POST", args.url, content=body("hello"), headers=HEADERS) as r:
                if r.status_code != 200:
                    check.bad(f"HTTP {r.status_code}")
                for line in r.iter_lines():
                    if not line.startswith("data:"):
                        continue
                    if t_first is None:
                        t_first = time.perf_counter()
                    count += 1
                    last_state = check.event(line[5:].strip()) or last_state
            t_end = time.perf_counter()
            if last_state != "TASK_STATE_COMPLETED":
                check.bad(f"stream ended in state {last_state}")
            if i >= args.warmup:
                first.append((t_first or t_end) - t0)
                whole.append(t_end - t0)
                events.append(count)

    def ms(x: float) -> float:
        return round(x * 1000, 3)

    return {
        "mode": "first",
        "streams": len(first),
        "first_p50_ms": ms(percentile(first, 50)) if first else None,
        "first_p99_ms": ms(percentile(first, 99)) if first else None,
        "whole_p50_ms": ms(percentile(whole, 50)) if whole else None,
        "whole_p99_ms": ms(percentile(whole, 99)) if whole else None,
        "events_per_stream": statistics.median(events) if events else None,
        "errors": check.errors,
        "first_error": check.first,
    }


async def run_hold(args: argparse.Namespace) -> dict[str, Any]:
    import psutil

    server = psutil.Process(args.pid)
    check = Checker()
    opened = 0
    all_open = asyncio.Event()
    limits = httpx.Limits(max_connections=args.c + 8, max_keepalive_connections=args.c + 8)

    async def stream(client: httpx.AsyncClient) -> None:
        nonlocal opened
        got_first = False
        try:
            async with client.stream(
                "POST", args.url, content=body(args.text), headers=HEADERS
            ) as r:
                if r.status_code != 200:
                    check.bad(f"HTTP {r.status_code}")
                async for line in r.aiter_lines():
                    if not line.startswith("data:"):
                        continue
                    check.event(line[5:].strip())
                    if not got_first:
                        got_first = True
                        opened += 1
                        if opened == args.c:
                            all_open.set()
        except Exception as exc:
            check.bad(repr(exc))

    async with httpx.AsyncClient(timeout=args.deadline, limits=limits) as client:
        for _ in range(5):  # first-request paths, imports
            async with client.stream("POST", args.url, content=body("warm"), headers=HEADERS) as r:
                async for _line in r.aiter_lines():
                    pass
        await asyncio.sleep(1.0)
        rss_before = server.memory_info().rss
        t0 = time.perf_counter()
        jobs = [asyncio.create_task(stream(client)) for _ in range(args.c)]
        rss_open = None
        t_open = None
        try:
            await asyncio.wait_for(all_open.wait(), timeout=args.deadline)
            t_open = time.perf_counter() - t0
            await asyncio.sleep(0.3)  # let the server settle with all streams open
            rss_open = server.memory_info().rss
            if args.signal_when_open:  # e.g. USR1: bench/trace_ours.py takes a heap snapshot
                os.kill(args.pid, getattr(signal, "SIG" + args.signal_when_open))
        except TimeoutError:
            check.bad(f"only {opened} of {args.c} streams opened within {args.deadline} s")
        _, pending = await asyncio.wait(jobs, timeout=args.deadline)
        for job in pending:
            job.cancel()
        if pending:
            check.bad(f"{len(pending)} streams still open after {args.deadline} s")
        await asyncio.gather(*pending, return_exceptions=True)
        t_done = time.perf_counter() - t0
        await asyncio.sleep(0.5)
        rss_after = server.memory_info().rss

    def mib(b: int | None) -> float | None:
        return None if b is None else round(b / 2**20, 1)

    return {
        "mode": "hold",
        "streams": args.c,
        "text": args.text,
        "rss_before_mib": mib(rss_before),
        "rss_open_mib": mib(rss_open),
        "rss_after_mib": mib(rss_after),
        "kib_per_stream": None
        if rss_open is None
        else round((rss_open - rss_before) / 1024 / args.c, 1),
        "all_open_s": None if t_open is None else round(t_open, 3),
        "all_done_s": round(t_done, 3),
        "errors": check.errors,
        "first_error": check.first,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=["first", "hold"])
    parser.add_argument("url")
    parser.add_argument("-n", type=int, default=200, help="measured streams (first)")
    parser.add_argument("--warmup", type=int, default=20, help="unmeasured streams (first)")
    parser.add_argument("-c", type=int, default=300, help="streams held open (hold)")
    parser.add_argument("--text", default="sleep:10", help="message text (hold)")
    parser.add_argument("--pid", type=int, help="server process id (hold)")
    parser.add_argument("--deadline", type=float, default=60.0, help="bound in seconds")
    parser.add_argument("--out")
    parser.add_argument("--signal-when-open", metavar="NAME", help="hold: e.g. USR1")
    args = parser.parse_args()
    if urlsplit(args.url).hostname != "127.0.0.1":
        sys.exit("only http://127.0.0.1 URLs are benchmarked")
    if args.mode == "first":
        result = run_first(args)
    else:
        if args.pid is None:
            sys.exit("hold needs --pid PID of the server")
        result = asyncio.run(run_hold(args))
    line = json.dumps(result)
    print("BENCH_JSON " + line, flush=True)
    if args.out:
        with open(args.out, "w") as f:
            f.write(line + "\n")


if __name__ == "__main__":
    main()
