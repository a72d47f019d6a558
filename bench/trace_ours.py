"""Our echo agent with diagnostics attached at run time (nothing in the package is edited).

    trace_ours.py --port P --db FILE --out DIR [--tracemalloc]

Serves exactly what `python -m servers echo --store sqlite:///FILE` serves, and measures:
- the SQLite group commit: batches, writes per batch, time in the writer thread per batch
  (all of `_sqlite_writer.run_batch`, and its `COMMIT` alone = the fsync), and the time a write
  waits from `_submit` to its result (queueing + thread hops + commit);
- reads (`find`, `get`): count and time from call to result (one thread hop each);
- `rpc` time per JSON-RPC call inside the app.
`kill -USR2 PID` writes `stats-N.json` to DIR and resets the counters (one file per phase).
With --tracemalloc, `kill -USR1 PID` writes `snap-N.tracemalloc` (compare two with
`trace_ours.py --diff A B`, listing the allocation sites that grew, by size).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sqlite3
import statistics
import sys
import time
import tracemalloc
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


class Stats:
    def __init__(self) -> None:
        self.samples: dict[str, list[float]] = defaultdict(list)
        self.t0 = time.perf_counter()

    def add(self, name: str, value: float) -> None:
        if len(self.samples[name]) < 200_000:
            self.samples[name].append(value)

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {"seconds": round(time.perf_counter() - self.t0, 3)}
        for name, xs in sorted(self.samples.items()):
            xs = sorted(xs)
            out[name] = {
                "n": len(xs),
                "mean": round(statistics.fmean(xs), 4),
                "p50": round(xs[len(xs) // 2], 4),
                "p99": round(xs[min(len(xs) - 1, int(len(xs) * 0.99))], 4),
                "sum": round(sum(xs), 3),
            }
        return out


STATS = Stats()


def instrument() -> None:
    from a2a_handoff.server import _jsonrpc as jsonrpc_mod
    from a2a_handoff.stores import _sqlite_writer as sqlite_writer
    from a2a_handoff.stores import sqlite as sqlite_mod

    original_batch = sqlite_writer.run_batch

    class TimedConn:
        """Wraps the writer's sqlite3 connection to time COMMIT (writer thread)."""

        def __init__(self, conn: sqlite3.Connection) -> None:
            self._conn = conn

        def execute(self, sql: str, *args: Any) -> Any:
            if sql == "COMMIT":
                t = time.perf_counter()
                try:
                    return self._conn.execute(sql, *args)
                finally:
                    STATS.add("commit_ms", (time.perf_counter() - t) * 1000)
            return self._conn.execute(sql, *args)

        def __getattr__(self, name: str) -> Any:
            return getattr(self._conn, name)

    def run_batch(conn: sqlite3.Connection, batch: list[Any]) -> Any:
        t = time.perf_counter()
        try:
            return original_batch(TimedConn(conn), batch)  # type: ignore[arg-type]
        finally:
            STATS.add("batch_thread_ms", (time.perf_counter() - t) * 1000)
            STATS.add("batch_size", len(batch))

    sqlite_writer.run_batch = run_batch

    store_cls = sqlite_mod.SqliteTaskStore
    original_submit = store_cls._submit

    async def submit(self: Any, *args: Any, **kwargs: Any) -> Any:
        t = time.perf_counter()
        try:
            return await original_submit(self, *args, **kwargs)
        finally:
            STATS.add("write_wait_ms", (time.perf_counter() - t) * 1000)

    store_cls._submit = submit

    def timed(name: str, fn: Any) -> Any:
        async def wrapper(*args: Any, **kwargs: Any) -> Any:
            t = time.perf_counter()
            try:
                return await fn(*args, **kwargs)
            finally:
                STATS.add(name, (time.perf_counter() - t) * 1000)

        return wrapper

    for name in ("find", "get"):
        if hasattr(store_cls, name):
            setattr(store_cls, name, timed(f"read_{name}_ms", getattr(store_cls, name)))
    jsonrpc_mod.JsonRpcEndpoint.rpc = timed("rpc_ms", jsonrpc_mod.JsonRpcEndpoint.rpc)


def sync_find(db: Path) -> None:
    from a2a_handoff.stores import sqlite as sqlite_mod

    conns: dict[str, sqlite3.Connection] = {}

    async def find(self: Any, dedupe_key: str) -> str | None:
        conn = conns.get("r")
        if conn is None:
            conn = conns["r"] = sqlite3.connect(db, isolation_level=None, check_same_thread=False)
            conn.execute("PRAGMA query_only=1")
        t = time.perf_counter()
        row = conn.execute("SELECT task_id FROM dedupe WHERE key = ?", (dedupe_key,)).fetchone()
        STATS.add("read_find_ms", (time.perf_counter() - t) * 1000)
        return None if row is None else str(row[0])

    sqlite_mod.SqliteTaskStore.find = find


LIBRARIES = ("sse_starlette", "starlette", "uvicorn", "anyio", "pydantic", "aiosqlite")


def _short(filename: str) -> str:
    for marker in ("site-packages/", "/python3.11/", "/python3.12/", "/python3.13/"):
        if marker in filename:
            return filename.split(marker)[-1]
    return (
        str(Path(filename).resolve().relative_to(ROOT))
        if filename.startswith(str(ROOT))
        else filename
    )


def diff(a: str, b: str, per: int, top: int = 25) -> None:
    """What grew between two snapshots: by package of the allocating frame, by our frame
    nearest to the allocation (who is responsible), and the top allocation sites."""
    old = tracemalloc.Snapshot.load(a)
    new = tracemalloc.Snapshot.load(b)
    stats = [s for s in new.compare_to(old, "traceback") if s.size_diff > 0]
    grown = sum(s.size_diff for s in stats)
    unit = f"KiB per {'item' if per > 1 else 'total'}"
    print(
        f"grown: {grown / 1024:.0f} KiB in {sum(s.count_diff for s in stats)} blocks;"
        f" {grown / 1024 / per:.1f} KiB per item (per={per})"
    )
    by_package: dict[str, int] = defaultdict(int)
    by_ours: dict[str, int] = defaultdict(int)
    for s in stats:
        site = _short(s.traceback[-1].filename)  # most recent frame last (tracemalloc order)
        by_package[site.split("/")[0]] += s.size_diff
        ours = next(
            (
                f"{_short(f.filename)}:{f.lineno}"
                for f in reversed(s.traceback)
                if "a2a_handoff/" in f.filename or "/servers/" in f.filename
            ),
            None,
        )
        if ours is None:  # no frame of ours: name the library that owns it
            files = " ".join(f.filename for f in s.traceback)
            owner = next((lib for lib in LIBRARIES if f"/{lib}/" in files), site.split("/")[0])
            ours = f"(not ours) {owner}"
        by_ours[ours] += s.size_diff
    print(f"\nby package of the allocating frame ({unit})")
    for name, size in sorted(by_package.items(), key=lambda x: -x[1])[:12]:
        print(f"  {size / 1024 / per:8.2f}  {100 * size / grown:5.1f}%  {name}")
    print(f"\nby our nearest frame ({unit})")
    for name, size in sorted(by_ours.items(), key=lambda x: -x[1])[:top]:
        print(f"  {size / 1024 / per:8.2f}  {100 * size / grown:5.1f}%  {name}")
    print(f"\ntop allocation sites ({unit}), newest frame first")
    for s in sorted(stats, key=lambda s: -s.size_diff)[:top]:
        frames = [f"{_short(f.filename)}:{f.lineno}" for f in reversed(s.traceback)][:5]
        print(f"  {s.size_diff / 1024 / per:8.2f}  " + " <- ".join(frames))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int)
    parser.add_argument("--db", type=Path)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--tracemalloc", action="store_true")
    parser.add_argument("--diff", nargs=2, metavar=("OLD", "NEW"))
    parser.add_argument("--per", type=int, default=1, help="--diff: divide by (e.g. streams)")
    parser.add_argument(
        "--switch-interval",
        type=float,
        default=None,
        help="experiment: sys.setswitchinterval(S) (default 0.005: how long a thread back "
        "from SQLite may wait for the GIL held by the event loop)",
    )
    parser.add_argument(
        "--sync-find",
        action="store_true",
        help="experiment: answer store.find() on the event loop from a plain sqlite3 "
        "connection (a primary-key lookup) instead of a hop to a reader thread",
    )
    args = parser.parse_args()
    if args.diff:
        diff(*args.diff, per=args.per)
        return
    if args.port is None or args.db is None or args.out is None:
        parser.error("--port, --db and --out are required")
    args.out.mkdir(parents=True, exist_ok=True)
    if args.tracemalloc:
        tracemalloc.start(10)

    import uvicorn

    from a2a_handoff import create_app, open_store
    from a2a_handoff.server import ServerLimits
    from servers.echo import EchoAgent, echo_card

    instrument()
    if args.switch_interval is not None:
        sys.setswitchinterval(args.switch_interval)
    if args.sync_find:
        sync_find(args.db.resolve())
    url = f"http://127.0.0.1:{args.port}/"
    app = create_app(EchoAgent(), echo_card(url), open_store(f"sqlite:///{args.db.resolve()}"))
    counter = {"stats": 0, "snap": 0}

    def dump_stats(*_: Any) -> None:
        global STATS
        counter["stats"] += 1
        path = args.out / f"stats-{counter['stats']}.json"
        path.write_text(json.dumps(STATS.summary(), indent=1))
        STATS = Stats()

    def dump_snapshot(*_: Any) -> None:
        counter["snap"] += 1
        tracemalloc.take_snapshot().dump(str(args.out / f"snap-{counter['snap']}.tracemalloc"))

    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=args.port,
        log_level="warning",
        access_log=False,
        http=ServerLimits().fitted().protocol(),  # the connection state `python -m servers` has
    )
    server = uvicorn.Server(config)

    async def serve() -> None:
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGUSR2, dump_stats)
        if args.tracemalloc:
            loop.add_signal_handler(signal.SIGUSR1, dump_snapshot)
        await server.serve()

    # the same event loop uvicorn.run() would pick (uvloop when installed)
    factory = config.get_loop_factory()
    if factory is None:
        asyncio.run(serve())
    else:
        with asyncio.Runner(loop_factory=factory) as runner:
            runner.run(serve())


if __name__ == "__main__":
    main()
