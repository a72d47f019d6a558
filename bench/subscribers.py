"""Memory per open SubscribeToTask stream: C subscribers on one waiting task.

    subscribers.py URL --pid PID [-c 300] [--deadline 60] [--out FILE] [--signal USR1]

Makes one task wait (`ask: …` to the echo agent: INPUT_REQUIRED; SubscribeToTask keeps a
stream open while a task waits for input), warms the path with 5 subscribers, reads the
server's RSS (psutil), opens C streams at once (a connection each) and waits until every one
has delivered its first event (the task); RSS again: KiB per stream = the growth / C. Then
answers the task, which completes it: every stream must end with the task COMPLETED. Unlike
`sse_bench.py hold` (a running task per stream, whose history grows while it runs) this is
what a stream alone costs. Prints `BENCH_JSON {...}`. 127.0.0.1 only; bounded by --deadline.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
import uuid
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import httpx

HEADERS = {"Content-Type": "application/json", "A2A-Version": "1.0"}


def rpc(method: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": uuid.uuid4().hex, "method": method, "params": params}


def message(text: str, **ids: str) -> dict[str, Any]:
    return {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": [{"text": text}], **ids}


async def subscribe(
    client: httpx.AsyncClient, url: str, task_id: str, first: Callable[[], None]
) -> str | None:
    """One stream: `first()` at its first event; returns the last state it showed."""
    body = rpc("SubscribeToTask", {"id": task_id})
    headers = {**HEADERS, "Accept": "text/event-stream"}
    last = None
    async with client.stream("POST", url, json=body, headers=headers) as reply:
        async for line in reply.aiter_lines():
            if not line.startswith("data:"):
                continue
            result = json.loads(line[5:])["result"]
            item = result.get("task") or result.get("statusUpdate") or {}
            if last is None:
                first()
            last = item.get("status", {}).get("state", last)
    return last


async def run(args: argparse.Namespace) -> dict[str, Any]:
    import psutil

    server = psutil.Process(args.pid)

    def snap() -> None:  # e.g. USR1: bench/trace_ours.py --tracemalloc takes a heap snapshot
        if args.signal:
            os.kill(args.pid, getattr(signal, "SIG" + args.signal))

    limits = httpx.Limits(max_connections=args.c + 16, max_keepalive_connections=args.c + 16)
    async with httpx.AsyncClient(timeout=args.deadline, limits=limits) as client:
        ask = rpc("SendMessage", {"message": message("ask: hold on")})
        task = (await client.post(args.url, json=ask, headers=HEADERS)).json()["result"]["task"]
        assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", task["status"]

        async def wave(count: int) -> list[asyncio.Task[str | None]]:
            """`count` streams, returned once every one has delivered its first event."""
            all_open = asyncio.Event()
            opened = 0

            def first() -> None:
                nonlocal opened
                opened += 1
                if opened == count:
                    all_open.set()

            jobs = [
                asyncio.create_task(subscribe(client, args.url, task["id"], first))
                for _ in range(count)
            ]
            await asyncio.wait_for(all_open.wait(), args.deadline)
            return jobs

        warm = await wave(5)
        await asyncio.sleep(1.0)
        rss_before = server.memory_info().rss
        snap()
        jobs = await wave(args.c)
        await asyncio.sleep(0.3)
        rss_open = server.memory_info().rss
        snap()
        answer = message("done", taskId=task["id"], contextId=task["contextId"])
        await client.post(args.url, json=rpc("SendMessage", {"message": answer}), headers=HEADERS)
        ends = await asyncio.wait_for(asyncio.gather(*warm, *jobs), args.deadline)
    bad = [e for e in ends if e != "TASK_STATE_COMPLETED"]
    return {
        "mode": "subscribers",
        "streams": args.c,
        "rss_before_mib": round(rss_before / 2**20, 1),
        "rss_open_mib": round(rss_open / 2**20, 1),
        "kib_per_stream": round((rss_open - rss_before) / 1024 / args.c, 1),
        "errors": len(bad),
        "first_error": None if not bad else f"a stream ended in {bad[0]}",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url")
    parser.add_argument("--pid", type=int, required=True, help="server process id")
    parser.add_argument("-c", type=int, default=300, help="streams held open")
    parser.add_argument("--deadline", type=float, default=60.0, help="bound in seconds")
    parser.add_argument("--out")
    parser.add_argument("--signal", metavar="NAME", help="sent before and with all open: USR1")
    args = parser.parse_args()
    if urlsplit(args.url).hostname != "127.0.0.1":
        sys.exit("only http://127.0.0.1 URLs are benchmarked")
    result = asyncio.run(run(args))
    line = json.dumps(result)
    print("BENCH_JSON " + line, flush=True)
    if args.out:
        with open(args.out, "w") as f:
            f.write(line + "\n")


if __name__ == "__main__":
    main()
