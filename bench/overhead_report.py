"""bench/overhead's figures: one round's line (`--round WORK CONNS ROUND`) or the summary
(`--workloads echo:"32 1" handoff:"1 8"`), read from the run's JSON files in DIR.

Under load (CONNS > 1) a round is two wrk summaries, `WORK-cCONNS-rROUND-{observed,bare}.json`,
from runs made at the same time: the ratio is observed/bare of good replies per second and
"slower" is 1 - that ratio. At one connection a round is `bench/pairs.py`'s summary,
`WORK-c1-rROUND.json` (A = observed, B = bare): the ratio is bare/observed of p50 latency
(so that, as above, below 1 is slower) and "slower" is the latency's increase.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path


def ratio(tmp: Path, work: str, conns: int, round_: str) -> tuple[float, str] | None:
    """The round's ratio (below 1: observed is slower) and its line."""
    if conns == 1:
        path = tmp / f"{work}-c1-r{round_}.json"
        if not path.exists():
            return None
        d = json.loads(path.read_text())
        value = 1 / d["ratio_p50"]
        line = (
            f"observed p50 {d['a_p50_ms']:6.3f} ms   bare p50 {d['b_p50_ms']:6.3f} ms"
            f"   ({d['pairs']} pairs){'   ERRORS' if d['errors'] else ''}"
        )
        return value, line
    paths = [tmp / f"{work}-c{conns}-r{round_}-{side}.json" for side in ("observed", "bare")]
    if not all(p.exists() for p in paths):
        return None
    o, b = (json.loads(p.read_text()) for p in paths)
    line = (
        f"observed {o['good_rps']:6.0f}/s   bare {b['good_rps']:6.0f}/s   (together)"
        f"{'   ERRORS' if o['errors'] or b['errors'] else ''}"
    )
    return o["good_rps"] / b["good_rps"], line


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("dir", type=Path)
    parser.add_argument("--round", nargs=3, metavar=("WORK", "CONNS", "ROUND"))
    parser.add_argument("--workloads", nargs="+", default=[])
    args = parser.parse_args()
    if args.round:
        work, conns, round_ = args.round
        found = ratio(args.dir, work, int(conns), round_)
        if found is None:
            print(f"round {round_:>2}  {work:<7} c={conns:<2}  no result")
            return
        value, line = found
        print(f"round {round_:>2}  {work:<7} c={conns:<2}  {line}   ratio {value:.3f}")
        return
    print("workload  conns  rounds   ratio observed/bare (min-max)   slower")
    for spec in args.workloads:
        work, _, conns_list = spec.partition(":")
        for conns in conns_list.split():
            values = []
            for path in sorted(args.dir.glob(f"{work}-c{conns}-r*.json")):
                round_ = path.stem.split("-r")[-1].split("-")[0]
                found = ratio(args.dir, work, int(conns), round_)
                if found is not None and (int(conns) == 1 or path.stem.endswith("observed")):
                    values.append(found[0])
            if not values:
                continue
            mid = statistics.median(values)
            what = "p50 latency" if conns == "1" else "throughput"
            print(
                f"{work:<9} {conns:>5}  {len(values):>6}   {mid:.3f} ({min(values):.3f}-"
                f"{max(values):.3f})        {(1 - mid) * 100:5.1f}%   ({what})"
            )


if __name__ == "__main__":
    main()
