#!/usr/bin/env python3
"""How NumPy's array creation scales from 1 thread to N, through the memplug
bridge (`system`) and with NumPy's default handler, side by side.

Run on a free-threaded CPython (3.13t, 3.14t; the GIL off), where threads
allocate truly in parallel. For each handler and each case, a round times
the same number of arrays made and freed

  - on 1 thread, and
  - split over N threads (default 2), each inside its own `with alloc:`,
    started together at a barrier,

and scaling = (arrays per second on N threads) / (arrays per second on 1).
The figure of record per case is the median over interleaved rounds of
bridge scaling / default scaling in the same round: at least 1.0 means the
bridge scales at least as well as NumPy's default handler (whose capsule is
shared by every thread; NumPy makes it immortal on free-threaded builds so
that its reference count is not contended, and memplug does the same for
its own capsules).

Cases: empty8 (`np.empty(8)`), ones64 (`np.ones(64)`), empty64k (`np.empty(8192)`).

    python python/bench/scaling.py [--rounds 15] [--threads 2] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import threading
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

import memplug.numpy as mnp  # noqa: E402
from numpy_bridge import case_empty8, case_ones64  # noqa: E402  (this folder's: the same loops)


def empty64k(n):
    empty = np.empty
    for _ in range(n):
        empty(8192)


CASES = {"empty8": (case_empty8, 200_000), "ones64": (case_ones64, 100_000), "empty64k": (empty64k, 100_000)}


def run(alloc, fn, arrays: int, threads: int) -> float:
    """Arrays per second: `arrays` made and freed by `fn`, split over
    `threads` threads (each inside `with alloc:`), timed from the first
    thread's start past the barrier to the last thread's end (the threads
    take the times themselves: the main thread may be descheduled)."""
    per = arrays // threads
    start = threading.Barrier(threads)
    began, done = [], []

    def work():
        with alloc:
            fn(per // 20)  # warm this thread's caches for this handler
            start.wait()
            began.append(time.perf_counter_ns())
            fn(per)
            done.append(time.perf_counter_ns())

    ts = [threading.Thread(target=work) for _ in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return per * threads / ((max(done) - min(began)) / 1e9)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--scale", type=float, default=1.0, help="multiply the arrays per measurement")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()

    gil = getattr(sys, "_is_gil_enabled", lambda: True)()
    if gil:
        print("scaling: the GIL is on: threads take turns, so this measures nothing useful "
              "(run it on a free-threaded CPython with PYTHON_GIL=0)", file=sys.stderr)
    variants = {"default": mnp.allocator(None), "system": mnp.allocator("system")}
    names = list(variants)
    rates = {c: {v: {1: [], args.threads: []} for v in names} for c in CASES}
    for r in range(args.rounds):
        order = names[r % 2:] + names[: r % 2]
        for case, (fn, n) in CASES.items():
            n = int(n * args.scale)
            for v in order:
                for threads in (1, args.threads) if r % 2 == 0 else (args.threads, 1):
                    rates[case][v][threads].append(run(variants[v], fn, n, threads))

    python = sys.version.split()[0] + ("" if gil else "t, GIL off")
    result = {"numpy": np.__version__, "python": python, "rounds": args.rounds, "threads": args.threads,
              "cpus": os.cpu_count(), "cases": {}}
    print(f"NumPy {np.__version__}, Python {python}, {args.rounds} interleaved rounds, 1 vs {args.threads} threads")
    print(f"{'case':<10}{'handler':<9}{'arrays/s, 1':>14}{f'arrays/s, {args.threads}':>14}{'scaling':>9}"
          f"{'vs default':>12}")
    for case in CASES:
        per_round = {v: [a / b for a, b in zip(rates[case][v][args.threads], rates[case][v][1])] for v in names}
        relative = sorted(s / d for s, d in zip(per_round["system"], per_round["default"]))
        result["cases"][case] = {
            v: {
                "rate_1": statistics.median(rates[case][v][1]),
                "rate_n": statistics.median(rates[case][v][args.threads]),
                "scaling": statistics.median(per_round[v]),
            }
            for v in names
        }
        result["cases"][case]["relative"] = {
            "median": statistics.median(relative),
            "p10": relative[len(relative) // 10],
            "p90": relative[(len(relative) * 9) // 10],
        }
        for v in names:
            f = result["cases"][case][v]
            rel = f"{statistics.median(relative):>12.3f}" if v == "system" else f"{'':>12}"
            print(f"{case:<10}{v:<9}{f['rate_1']:>14.0f}{f['rate_n']:>14.0f}{f['scaling']:>9.3f}{rel}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
