"""SendMessage over gRPC under a closed-loop load: wrk's counterpart for the gRPC binding.

    grpc_load.py HOST:PORT --conns N --duration S [--out FILE] [--run-id ID] [--text T]

N connections (a channel each, not shared), each sending one SendMessage after the other
with a never-repeated message id, for S seconds. A reply counts as good only when it is OK
and shows the task COMPLETED; anything else is counted, the first one kept. The summary is
the JSON line `bench/sendmessage.lua` writes for wrk (`good_rps`, `p50_ms`, `p99_ms`,
`errors`, `first_bad`), so `bench/report.py` shows it as one more server of its table.

The client is grpcio's (its C core does the HTTP/2 and the framing; Python builds and parses
each message): on one CPU it sends less than wrk does, so read the gRPC row with the client's
own cost in mind (`bench/README.md`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from pathlib import Path
from typing import Any

import grpc
import grpc.aio

from a2a_handoff.protocol.protobuf import proto

METHOD = f"/{proto.SERVICE}/SendMessage"
COMPLETED = 3  # TaskState.TASK_STATE_COMPLETED
SendMessageRequest = proto.message_class(f"{proto.PACKAGE}.SendMessageRequest")


class Tally:
    def __init__(self) -> None:
        self.good = 0
        self.errors = 0
        self.first_bad: str | None = None
        self.latencies: list[float] = []

    def bad(self, what: str) -> None:
        self.errors += 1
        if self.first_bad is None:
            self.first_bad = what[:240]


async def connection(
    target: str, conn: int, run_id: str, text: str, until: float, tally: Tally
) -> None:
    options = [("grpc.use_local_subchannel_pool", 1)]  # a connection of its own
    async with grpc.aio.insecure_channel(target, options=options) as channel:
        call = channel.unary_unary(
            METHOD,
            request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=proto.SendMessageResponse.FromString,
        )
        metadata = (("a2a-version", "1.0"),)
        seq = 0
        while time.monotonic() < until:
            seq += 1
            request = SendMessageRequest()
            message = request.message
            message.message_id = f"msg-{run_id}-{conn}-{seq}"
            message.role = 1  # ROLE_USER
            message.parts.add().text = text
            started = time.perf_counter()
            try:
                answer: Any = await call(request, metadata=metadata, timeout=5.0)
            except grpc.aio.AioRpcError as error:
                tally.bad(f"{error.code().name} {error.details()}")
                continue
            elapsed = time.perf_counter() - started
            if answer.task.status.state != COMPLETED:
                tally.bad(str(answer)[:240])
                continue
            tally.good += 1
            tally.latencies.append(elapsed)


async def load(target: str, conns: int, duration: float, run_id: str, text: str) -> Tally:
    tally = Tally()
    until = time.monotonic() + duration
    started = time.monotonic()
    await asyncio.gather(*(connection(target, c, run_id, text, until, tally) for c in range(conns)))
    tally.elapsed = time.monotonic() - started  # type: ignore[attr-defined]
    return tally


def summary(tally: Tally, duration: float) -> dict[str, Any]:
    cuts = statistics.quantiles(tally.latencies, n=100) if len(tally.latencies) > 1 else [0.0] * 99
    return {
        "good_rps": tally.good / duration,
        "p50_ms": cuts[49] * 1000,
        "p99_ms": cuts[98] * 1000,
        "errors": tally.errors,
        "first_bad": tally.first_bad,
        "requests": tally.good + tally.errors,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("target", help="HOST:PORT of the agent's gRPC interface")
    parser.add_argument("--conns", type=int, default=1)
    parser.add_argument("--duration", type=float, default=5.0)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--run-id", default=str(time.time_ns()))
    parser.add_argument("--text", default="hello")
    args = parser.parse_args()
    tally = asyncio.run(load(args.target, args.conns, args.duration, args.run_id, args.text))
    line = json.dumps(summary(tally, args.duration))
    if args.out is not None:
        args.out.write_text(line + "\n")
    print(line)


if __name__ == "__main__":
    main()
