"""Summarise py-spy collapsed stacks (`py-spy record --format raw`), e.g. from `bench/profile`.

    stacks.py FILE [--top 25] [--thread MainThread] [--match a2a_handoff]

Prints: samples per thread; the functions with the most *self* samples (the leaf frame:
where the CPU actually was); and the most *inclusive* samples (on the stack at all: what a
call costs with everything below it), as percentages of the selected samples. `--match`
lists only functions whose file contains the text (inclusive table), to see our own code
among the framework's. Samples whose leaf is an idle wait (epoll/select/lock wait) are
counted as idle when py-spy ran with --idle.
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from pathlib import Path

LINE = re.compile(r"^(?P<stack>.*) (?P<count>\d+)$")
FRAME = re.compile(r"^(?P<func>.*) \((?P<file>[^()]*?)(?::(?P<line>\d+))?\)$")
IDLE = (
    "select (selectors.py",
    "_run_once (asyncio/base_events.py",
    "wait (threading.py",
    "get (queue.py",
    "run_forever",
)


def frame_name(frame: str, with_line: bool) -> str:
    m = FRAME.match(frame)
    if not m:
        return frame
    name = f"{m['func']} ({m['file']}"
    return name + (f":{m['line']})" if with_line and m["line"] else ")")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file", type=Path)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--thread", default=None, help="only threads whose name contains this")
    parser.add_argument("--match", default=None, help="inclusive table: only files containing")
    parser.add_argument("--lines", action="store_true", help="keep line numbers in names")
    args = parser.parse_args()

    threads: Counter[str] = Counter()
    self_time: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    total = 0
    idle = 0
    for raw in args.file.read_text().splitlines():
        m = LINE.match(raw.strip())
        if not m:
            continue
        count = int(m["count"])
        frames = m["stack"].split(";")
        thread = frames[0]
        threads[thread] += count
        if args.thread and args.thread not in thread:
            continue
        frames = [frame_name(f, args.lines) for f in frames[1:]]
        if not frames:
            continue
        total += count
        leaf = frames[-1]
        if any(leaf.startswith(p) for p in IDLE):
            idle += count
        self_time[leaf] += count
        for name in set(frames):
            inclusive[name] += count

    print(f"{args.file}: {sum(threads.values())} samples")
    for thread, n in threads.most_common():
        print(f"  {n:>7}  {thread}")
    if not total:
        return
    print(f"\nselected: {total} samples; idle-looking leaves: {100 * idle / total:.1f}%")
    print(f"\nself (leaf) time, top {args.top}")
    for name, n in self_time.most_common(args.top):
        print(f"  {100 * n / total:5.1f}%  {name}")
    print(
        f"\ninclusive time, top {args.top}"
        + (f" (files matching {args.match!r})" if args.match else "")
    )
    shown = 0
    for name, n in inclusive.most_common():
        if args.match and args.match not in name:
            continue
        print(f"  {100 * n / total:5.1f}%  {name}")
        shown += 1
        if shown >= args.top:
            break


if __name__ == "__main__":
    main()
