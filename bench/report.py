"""Summarise a results directory written by `bench/run`.

    report.py RESULTS_DIR [--baseline sdk-memory] [--ours ours-sqlite]

Reads `wrk-<server>-c<conns>-r<round>.json` and `sse-<server>-{first,hold}.json`, prints
per server and connection count the median over rounds of requests/s, p50, p99 and the sum
of errors, the ratios ours/SDK, the SSE figures, and whether the targets are met:
  ours req/s at 32 connections >= 8 x the SDK in-memory server,
  ours p50 at 1 connection < 0.4 ms,
  ours memory per open SSE stream < 50 KiB.
Exit status 0 when every target is met and no errors were counted, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

RPS_RATIO_TARGET = 8.0
P50_TARGET_MS = 0.4
KIB_TARGET = 50.0

WRK_NAME = re.compile(r"wrk-(?P<server>.+)-c(?P<conns>\d+)-r(?P<round>\d+)\.json$")
SSE_NAME = re.compile(r"sse-(?P<server>.+)-(?P<mode>first|hold)\.json$")


def load(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path)
    parser.add_argument("--ours", default="ours-sqlite")
    parser.add_argument("--baseline", default="sdk-memory")
    args = parser.parse_args()

    runs: dict[tuple[str, int], list[dict[str, Any]]] = defaultdict(list)
    broken: list[str] = []
    for path in sorted(args.results.glob("wrk-*.json")):
        m = WRK_NAME.match(path.name)
        doc = load(path)
        if m is None:
            continue
        if doc is None:
            broken.append(path.name)
            continue
        runs[(m["server"], int(m["conns"]))].append(doc)
    sse: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    for path in sorted(args.results.glob("sse-*.json")):
        m = SSE_NAME.match(path.name)
        doc = load(path)
        if m is not None and doc is not None:
            sse[m["server"]][m["mode"]] = doc

    servers = sorted({s for s, _ in runs} | set(sse), key=lambda s: (s != args.ours, s))
    conns_seen = sorted({c for _, c in runs}, reverse=True)
    med: dict[tuple[str, int], dict[str, float]] = {}
    total_errors = 0

    print("SendMessage (wrk; median over rounds; errors summed)")
    print(
        f"{'server':<14}{'conns':>6}{'rounds':>7}{'req/s':>10}{'p50 ms':>10}{'p99 ms':>10}"
        f"{'errors':>8}  first error"
    )
    for server in servers:
        for conns in conns_seen:
            docs = runs.get((server, conns))
            if not docs:
                continue
            errors = sum(int(d["errors"]) for d in docs)
            total_errors += errors
            med[(server, conns)] = {
                # only good replies count as throughput
                "rps": statistics.median(float(d["good_rps"]) for d in docs),
                "p50": statistics.median(float(d["p50_ms"]) for d in docs),
                "p99": statistics.median(float(d["p99_ms"]) for d in docs),
            }
            first = next((d["first_bad"] for d in docs if d.get("first_bad")), None)
            row = med[(server, conns)]
            print(
                f"{server:<14}{conns:>6}{len(docs):>7}{row['rps']:>10.0f}{row['p50']:>10.3f}"
                f"{row['p99']:>10.3f}{errors:>8}  {(first or '')[:60]}"
            )
    if broken:
        print("unreadable result files (wrk failed?): " + ", ".join(broken))

    print()
    print(f"Ratios {args.ours} / other (req/s higher is better, latency lower is better)")
    for other in servers:
        if other == args.ours:
            continue
        for conns in conns_seen:
            a, b = med.get((args.ours, conns)), med.get((other, conns))
            if not a or not b or not b["rps"]:
                continue
            print(
                f"  vs {other:<12} c={conns:<3} req/s x{a['rps'] / b['rps']:.2f}"
                f"   p50 x{a['p50'] / b['p50']:.3f}   p99 x{a['p99'] / b['p99']:.3f}"
            )

    print()
    print("SSE (SendStreamingMessage)")
    print(
        f"{'server':<14}{'first p50':>10}{'first p99':>10}{'whole p50':>10}{'events':>7}"
        f"{'held':>6}{'KiB/stream':>11}{'RSS MiB':>16}{'errors':>8}"
    )
    for server in servers:
        first = sse[server].get("first", {})
        hold = sse[server].get("hold", {})
        if not first and not hold:
            continue
        errors = int(first.get("errors", 0)) + int(hold.get("errors", 0))
        total_errors += errors
        rss = f"{fmt(hold.get('rss_before_mib'), '.1f')}->{fmt(hold.get('rss_open_mib'), '.1f')}"
        print(
            f"{server:<14}{fmt(first.get('first_p50_ms'), '.3f'):>10}"
            f"{fmt(first.get('first_p99_ms'), '.3f'):>10}"
            f"{fmt(first.get('whole_p50_ms'), '.3f'):>10}"
            f"{fmt(first.get('events_per_stream'), 'g'):>7}{fmt(hold.get('streams'), 'd'):>6}"
            f"{fmt(hold.get('kib_per_stream'), '.1f'):>11}{rss:>16}{errors:>8}"
        )
        for doc in (first, hold):
            if doc.get("first_error"):
                print(f"    first error ({doc['mode']}): {doc['first_error'][:120]}")

    print()
    print("Targets")
    ok = True
    ours32, base32 = med.get((args.ours, 32)), med.get((args.baseline, 32))
    if ours32 and base32 and base32["rps"]:
        ratio = ours32["rps"] / base32["rps"]
        met = ratio >= RPS_RATIO_TARGET
        ok &= met
        print(
            f"  [{'MET' if met else 'MISSED'}] req/s at 32 conns: {args.ours} / {args.baseline}"
            f" = {ratio:.2f} (target >= {RPS_RATIO_TARGET:g})"
        )
    else:
        ok = False
        print("  [MISSING] req/s at 32 conns: no data for both servers")
    ours1 = med.get((args.ours, 1))
    if ours1:
        met = ours1["p50"] < P50_TARGET_MS
        ok &= met
        print(
            f"  [{'MET' if met else 'MISSED'}] p50 at 1 conn: {ours1['p50']:.3f} ms"
            f" (target < {P50_TARGET_MS} ms)"
        )
    else:
        ok = False
        print("  [MISSING] p50 at 1 conn: no data")
    kib = sse.get(args.ours, {}).get("hold", {}).get("kib_per_stream")
    if kib is not None:
        met = kib < KIB_TARGET
        ok &= met
        print(
            f"  [{'MET' if met else 'MISSED'}] memory per open SSE stream: {kib:.1f} KiB"
            f" (target well under {KIB_TARGET:g} KiB)"
        )
    else:
        ok = False
        print("  [MISSING] memory per open SSE stream: no data")
    if total_errors:
        ok = False
        print(f"  [ERRORS] {total_errors} errors counted: figures with errors are not valid")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
