"""Summarise a results directory written by `bench/run`.

    report.py RESULTS_DIR [--baseline sdk-memory] [--ours ours-sqlite] [--probe probe-echo]
                          [--plain plain-sse]

Reads `wrk-<server>-c<conns>-r<round>.json`, `sse-<server>-first-r<round>.json` and
`sse-<server>-hold.json`, prints per server and connection count the median over rounds of
requests/s, p50, p99 and the sum of errors, the ratios ours/other, the SSE figures (first
event: medians over rounds), the handoffs `bench/compare` measured
(`handoff-{ours,probe}-c<conns>-r<round>.json`), and whether the issue's goals are met:
  ours req/s at 32 connections >= 10 x the SDK in memory and >= 1.0 x the durable probe,
  ours p50 at 1 connection <= 1.0 x the probe's,
  ours stream time to the first event p50 <= 1.1 x a plain Starlette SSE endpoint's,
  ours memory per open SSE stream <= 30 KiB, idle RSS <= the SDK's,
  ours handoff p50 at 1 connection <= 0.8 x the handoff probe's, and handoffs/s at 8
  connections >= 1.25 x its.
Exit status 0 when every goal is met and no errors were counted, 1 otherwise.
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

# The issue's goals
RPS_VS_SDK = 10.0  # ours / SDK (in memory), req/s at 32 connections: at least
RPS_VS_PROBE = 1.0  # ours / durable probe, req/s at 32 connections: at least
P50_VS_PROBE = 1.0  # ours / durable probe, p50 at 1 connection: at most
KIB_PER_STREAM = 30.0  # memory per open SSE stream: at most
FIRST_VS_PLAIN = 1.1  # ours / plain Starlette SSE endpoint, first event p50: at most
HANDOFF_P50_VS_PROBE = 0.8  # ours / handoff probe, p50 at 1 connection: at most
HANDOFF_RPS_VS_PROBE = 1.25  # ours / handoff probe, handoffs/s at 8 connections: at least

HANDOFF_NAME = re.compile(r"handoff-(?P<server>ours|probe)-c(?P<conns>\d+)-r(?P<round>\d+)\.json$")
WRK_NAME = re.compile(r"wrk-(?P<server>.+)-c(?P<conns>\d+)-r(?P<round>\d+)\.json$")
SSE_NAME = re.compile(r"sse-(?P<server>.+?)-(?P<mode>first|hold)(?:-r(?P<round>\d+))?\.json$")
SSE_MEDIANS = ("first_p50_ms", "first_p99_ms", "whole_p50_ms", "events_per_stream")


def load(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


class Goals:
    """Prints one line per goal; `ok` stays true while every goal is met."""

    def __init__(self) -> None:
        self.ok = True

    def line(self, label: str, value: float | None, text: str, met: bool) -> None:
        if value is None:
            self.ok = False
            print(f"  [MISSING] {label}: no data")
            return
        self.ok &= met
        print(f"  [{'MET' if met else 'MISSED'}] {label}: {text}")

    def ratio(self, label: str, a: Any, b: Any, key: str, goal: float, *, higher: bool) -> None:
        value = a[key] / b[key] if a and b and b[key] else None
        sign = ">=" if higher else "<="
        met = value is not None and (value >= goal if higher else value <= goal)
        self.line(label, value, f"x{value or 0:.2f} (goal {sign} {goal:g})", met)

    def value(self, label: str, value: float | None, goal: float) -> None:
        met = value is not None and value <= goal
        self.line(label, value, f"{value or 0:.1f} (goal <= {goal:g})", met)


def sse_results(results: Path) -> dict[str, dict[str, dict[str, Any]]]:
    """Per server: its hold run, and its first-event runs as one (medians over rounds of
    the figures, errors summed, the first error kept)."""
    sse: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    rounds: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for path in sorted(results.glob("sse-*.json")):
        m = SSE_NAME.match(path.name)
        doc = load(path)
        if m is None or doc is None:
            continue
        if m["mode"] == "first":
            rounds[m["server"]].append(doc)
        else:
            sse[m["server"]]["hold"] = doc
    for server, docs in rounds.items():
        first: dict[str, Any] = {"mode": "first", "rounds": len(docs)}
        for key in SSE_MEDIANS:
            values = [d[key] for d in docs if d.get(key) is not None]
            first[key] = statistics.median(values) if values else None
        first["errors"] = sum(int(d.get("errors", 0)) for d in docs)
        first["first_error"] = next((d["first_error"] for d in docs if d.get("first_error")), None)
        sse[server]["first"] = first
    return sse


def handoff_table(results: Path) -> tuple[dict[tuple[str, int], dict[str, float]], int]:
    """The handoff runs bench/compare wrote: medians per side and connection count."""
    runs: dict[tuple[str, int], list[dict[str, Any]]] = defaultdict(list)
    for path in sorted(results.glob("handoff-*.json")):
        m = HANDOFF_NAME.match(path.name)
        doc = load(path)
        if m is not None and doc is not None:
            runs[(m["server"], int(m["conns"]))].append(doc)
    med: dict[tuple[str, int], dict[str, float]] = {}
    errors = 0
    if not runs:
        return med, 0
    print()
    print("Handoffs (ours: triage -> billing; probe: handoff.py A -> B; median over rounds)")
    print(
        f"{'side':<8}{'conns':>6}{'rounds':>7}{'handoffs/s':>11}{'p50 ms':>10}{'p99 ms':>10}"
        f"{'errors':>8}"
    )
    for (side, conns), docs in sorted(runs.items()):
        errs = sum(int(d["errors"]) for d in docs)
        errors += errs
        row = med[(side, conns)] = {
            "rps": statistics.median(float(d["good_rps"]) for d in docs),
            "p50": statistics.median(float(d["p50_ms"]) for d in docs),
            "p99": statistics.median(float(d["p99_ms"]) for d in docs),
        }
        print(
            f"{side:<8}{conns:>6}{len(docs):>7}{row['rps']:>11.0f}{row['p50']:>10.3f}"
            f"{row['p99']:>10.3f}{errs:>8}"
        )
    for conns in sorted({c for _, c in med}):
        a, b = med.get(("ours", conns)), med.get(("probe", conns))
        if a and b and b["rps"]:
            print(
                f"  ours / probe c={conns:<3} handoffs/s x{a['rps'] / b['rps']:.2f}"
                f"   p50 x{a['p50'] / b['p50']:.3f}   p99 x{a['p99'] / b['p99']:.3f}"
            )
    ledgers = results / "handoff-ledgers.txt"
    if ledgers.exists():
        print("  " + ledgers.read_text().strip())
    return med, errors


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path)
    parser.add_argument("--ours", default="ours-sqlite")
    parser.add_argument("--baseline", default="sdk-memory")
    parser.add_argument("--probe", default="probe-echo")
    parser.add_argument("--plain", default="plain-sse")
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
    sse = sse_results(args.results)

    servers = sorted({s for s, _ in runs} | set(sse), key=lambda s: (s != args.ours, s))
    conns_seen = sorted({c for _, c in runs}, reverse=True)
    med: dict[tuple[str, int], dict[str, float]] = {}
    total_errors = 0

    print("SendMessage (wrk; ours-grpc: bench/grpc_load.py; median over rounds; errors summed)")
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
        rss = rss if hold else "-"
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
    ours_first = sse.get(args.ours, {}).get("first", {}).get("first_p50_ms")
    for other in servers:
        other_first = sse[other].get("first", {}).get("first_p50_ms") if other in sse else None
        if other != args.ours and ours_first and other_first:
            print(f"  {args.ours} / {other:<12} first event p50 x{ours_first / other_first:.2f}")
    plain = sse.get(args.plain, {}).get("first", {}).get("first_p50_ms")
    durable = sse.get(f"{args.plain}-durable", {}).get("first", {}).get("first_p50_ms")
    if plain and durable:  # the floor of a durable first event: one row, one fsync
        print(f"  {args.plain}-durable / {args.plain} first event p50 x{durable / plain:.2f}")

    handoff, handoff_errors = handoff_table(args.results)
    total_errors += handoff_errors

    print()
    print("Goals")
    goals = Goals()
    ours32, base32 = med.get((args.ours, 32)), med.get((args.baseline, 32))
    probe32, probe1 = med.get((args.probe, 32)), med.get((args.probe, 1))
    ours1 = med.get((args.ours, 1))
    goals.ratio(
        f"req/s at 32 conns, {args.ours} / {args.baseline}",
        ours32,
        base32,
        "rps",
        RPS_VS_SDK,
        higher=True,
    )
    goals.ratio(
        f"req/s at 32 conns, {args.ours} / {args.probe}",
        ours32,
        probe32,
        "rps",
        RPS_VS_PROBE,
        higher=True,
    )
    goals.ratio(
        f"p50 at 1 conn, {args.ours} / {args.probe}",
        ours1,
        probe1,
        "p50",
        P50_VS_PROBE,
        higher=False,
    )
    first = {k: sse.get(k, {}).get("first") for k in (args.ours, args.plain)}
    goals.ratio(
        f"stream first event p50, {args.ours} / {args.plain}",
        first[args.ours],
        first[args.plain],
        "first_p50_ms",
        FIRST_VS_PLAIN,
        higher=False,
    )
    kib = sse.get(args.ours, {}).get("hold", {}).get("kib_per_stream")
    goals.value("memory per open SSE stream, KiB", kib, KIB_PER_STREAM)
    idle = sse.get(args.ours, {}).get("hold", {}).get("rss_before_mib")
    idle_sdk = sse.get(args.baseline, {}).get("hold", {}).get("rss_before_mib")
    goals.ratio(
        f"idle RSS (fresh, warmed), {args.ours} / {args.baseline}",
        {"rss": idle} if idle else None,
        {"rss": idle_sdk} if idle_sdk else None,
        "rss",
        1.0,
        higher=False,
    )
    goals.ratio(
        "handoff p50 at 1 conn, ours / probe",
        handoff.get(("ours", 1)),
        handoff.get(("probe", 1)),
        "p50",
        HANDOFF_P50_VS_PROBE,
        higher=False,
    )
    goals.ratio(
        "handoffs/s at 8 conns, ours / probe",
        handoff.get(("ours", 8)),
        handoff.get(("probe", 8)),
        "rps",
        HANDOFF_RPS_VS_PROBE,
        higher=True,
    )
    ok = goals.ok
    if total_errors:
        ok = False
        print(f"  [ERRORS] {total_errors} errors counted: figures with errors are not valid")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
