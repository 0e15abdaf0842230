#!/usr/bin/env python3
"""How NumPy's array creation scales from 1 thread to N, through the memplug
bridge (`system`) and with NumPy's default handler, side by side.

Run on a free-threaded CPython (3.13t, 3.14t; the GIL off), where threads
allocate truly in parallel. scaling = (arrays per second on N threads) /
(arrays per second on 1 thread), and the figure of record per case is the
bridge's scaling over the default handler's: at least 1.0 means the bridge
scales at least as well as NumPy's default handler. Every array holds a
reference to its handler's capsule, which every thread shares: memplug
makes its capsules immortal on a free-threaded build, so that their
reference counts are never written; whether NumPy's default capsule is
immortal depends on the NumPy release (numpy#30494), and the run says which
it found (a mortal one's count is changed by every thread at every array's
creation and deletion, which slows the default handler's threads down).

The method, for a shared machine with few CPUs, where other tenants' work
comes and goes by the second. Scaling is only seen while the N threads run
at the same time, each on a CPU of its own: on a machine whose CPUs other
processes keep busy they do not (the kernel shares the CPUs out between
them), so where it may (as root) each worker runs under the real-time
policy SCHED_FIFO, ahead of every ordinary process, and the run sleeps as
long as it worked after each case of each round, so that the others keep
at least half the machine (`--no-realtime`: ordinary priority). N worker
threads live for the whole run (no thread is started while timing). A
block makes and frees a number of arrays of one case with one handler
(each worker inside `with alloc:`), on worker 0 alone or split over all N
started together at a barrier, and is timed from the workers' own clocks
(first start to last end). A round measures, for each case, every handler
on 1 and on N threads: the handlers' blocks take turns, in rotating order,
and each handler's measurement is the best of its three (a block in which
something else took a CPU from a worker is slower, and dropped), so that
the machine's speed, which drifts, is about the same for the handlers'
measurements that are compared; then

    bridge / default = (bridge's rate on N / default's rate on N)
                     / (bridge's rate on 1 / default's rate on 1)

is that round's ratio of the two scalings. The figure is the median over
rounds, with its distribution-free 95% interval (two order statistics; the
interval holds the true median with probability 0.95 whatever the
distribution) and the rounds' p10-p90 spread. The default handler is also
measured a second time in each round as if it were another handler: its
ratio to itself is the method's noise floor (the true value is 1), printed
as a row of its own.

Cases: empty8 (`np.empty(8)`), ones64 (`np.ones(64)`), empty64k (`np.empty(8192)`).

    python python/bench/scaling.py [--rounds 60] [--threads 2] [--scale 1] [--json FILE]
"""

from __future__ import annotations

import argparse
import contextvars
import json
import os
import statistics
import sys
import threading
import time
from math import comb
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

import memplug.numpy as mnp  # noqa: E402
from numpy_bridge import case_empty8, case_ones64  # noqa: E402  (this folder's: the same loops)


def empty64k(n):
    empty = np.empty
    for _ in range(n):
        empty(8192)


# Arrays per block: about 10-20 ms on one thread of a 2-core machine.
CASES = {"empty8": (case_empty8, 60_000), "ones64": (case_ones64, 40_000), "empty64k": (empty64k, 30_000)}
REPEATS = 3
NOISE = "default (again)"


class Workers:
    """N threads that live for the whole run and make arrays on demand."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.go = [threading.Semaphore(0) for _ in range(n)]
        self.job = None
        self.began = [0] * n
        self.ended = [0] * n
        self.done = threading.Semaphore(0)
        self.threads = [threading.Thread(target=self._work, args=(i,), daemon=True) for i in range(n)]
        for t in self.threads:
            t.start()

    def _work(self, i: int) -> None:
        while True:
            self.go[i].acquire()
            job = self.job
            if job is None:
                return
            alloc, fn, per, start = job
            with alloc:
                fn(max(1, per // 20))  # this thread's caches warm for this handler
                start.wait()
                self.began[i] = time.perf_counter_ns()
                fn(per)
                self.ended[i] = time.perf_counter_ns()
            self.done.release()

    def rate(self, alloc, fn, arrays: int, threads: int) -> float:
        """Arrays per second: `arrays` made and freed by `fn`, split over
        the first `threads` workers, from the first start past the barrier
        to the last end."""
        per = arrays // threads
        self.job = (alloc, fn, per, threading.Barrier(threads))
        for i in range(threads):
            self.go[i].release()
        for _ in range(threads):
            self.done.acquire()
        return per * threads / ((max(self.ended[:threads]) - min(self.began[:threads])) / 1e9)

    def stop(self) -> None:
        self.job = None
        for g in self.go:
            g.release()
        for t in self.threads:
            t.join()


def default_capsule_immortal() -> bool | None:
    """Whether NumPy's default handler capsule is immortal (None: not found).
    It is the value of NumPy's context variable of the current handler
    while the default handler is entered."""
    with mnp.allocator(None):
        for var, value in contextvars.copy_context().items():
            if var.name == "current_allocator" and type(value).__name__ == "PyCapsule":
                is_immortal = getattr(sys, "_is_immortal", None)
                # Before Python 3.14: an immortal object's count reads 2**32 - 1 or more.
                return is_immortal(value) if is_immortal else sys.getrefcount(value) >= 2**32 - 1
    return None


def median_interval(xs: list[float]) -> tuple[float, float] | None:
    """A distribution-free 95% confidence interval for the median of the
    sorted `xs`: the order statistics k and n-1-k (0-based) with k the
    largest for which P(Binomial(n, 1/2) <= k) <= 0.025; None when `n` is
    too small for one (fewer than 6)."""
    n = len(xs)
    k, tail = -1, 0.0
    while True:
        tail += comb(n, k + 1) / 2**n
        if tail > 0.025:
            break
        k += 1
    return None if k < 0 else (xs[k], xs[n - 1 - k])


def summary(xs: list[float]) -> dict[str, float | None]:
    xs = sorted(xs)
    ci = median_interval(xs)
    return {
        "median": statistics.median(xs),
        "ci_low": ci[0] if ci else None,
        "ci_high": ci[1] if ci else None,
        "p10": xs[len(xs) // 10],
        "p90": xs[(len(xs) * 9) // 10],
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=60)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--scale", type=float, default=1.0, help="multiply the arrays per block")
    ap.add_argument("--no-realtime", action="store_true", help="the workers at ordinary priority")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    if args.threads < 2:
        ap.error("--threads must be at least 2")

    gil = getattr(sys, "_is_gil_enabled", lambda: True)()
    if gil:
        print("scaling: the GIL is on: threads take turns, so this measures nothing useful "
              "(run it on a free-threaded CPython with PYTHON_GIL=0)", file=sys.stderr)
    default = mnp.allocator(None)
    handlers = {"default": default, "system": mnp.allocator("system"), NOISE: default}
    names = list(handlers)
    n = args.threads
    # rates[case][handler][threads]: one per round.
    rates = {c: {h: {1: [], n: []} for h in names} for c in CASES}
    realtime = False
    if not args.no_realtime:
        try:
            # This thread, and the workers it starts (they inherit it).
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
            realtime = True
        except (OSError, AttributeError) as e:
            print(f"scaling: the workers run at ordinary priority (SCHED_FIFO refused: {e}); on a busy machine "
                  "the threads then seldom run at the same time", file=sys.stderr)
    workers = Workers(n)
    try:
        for r in range(args.rounds):
            order = names[r % len(names):] + names[: r % len(names)]
            for case, (fn, arrays) in CASES.items():
                arrays = max(n, int(arrays * args.scale))
                t0 = time.perf_counter()
                for threads in (1, n) if r % 2 == 0 else (n, 1):
                    best = dict.fromkeys(order, 0.0)
                    for _ in range(REPEATS):
                        for h in order:
                            best[h] = max(best[h], workers.rate(handlers[h], fn, arrays, threads))
                    for h in order:
                        rates[case][h][threads].append(best[h])
                if realtime:
                    time.sleep(time.perf_counter() - t0)
    finally:
        workers.stop()

    python = sys.version.split()[0] + ("" if gil else "t, GIL off")
    result = {"numpy": np.__version__, "python": python, "rounds": args.rounds, "threads": n,
              "cpus": os.cpu_count(), "realtime": realtime, "load": os.getloadavg()[0],
              "default_capsule_immortal": default_capsule_immortal(), "cases": {}}
    print(f"NumPy {np.__version__}, Python {python}, {os.cpu_count()} CPUs, {args.rounds} interleaved rounds, "
          f"1 vs {n} threads, {'SCHED_FIFO' if realtime else 'ordinary priority'}, "
          f"load average {result['load']:.1f}")
    immortal = {True: "immortal", False: "not immortal (its reference count is shared)", None: "not found"}
    print(f"NumPy's default handler capsule: {immortal[result['default_capsule_immortal']]}")
    print(f"{'case':<10}{'handler':<17}{'arrays/s, 1':>13}{f'arrays/s, {n}':>13}{'scaling':>9}"
          f"{'/ default':>11}{'95% interval':>16}{'p10–p90':>15}")
    for case in CASES:
        c = rates[case]
        out = result["cases"][case] = {}
        for h in names:
            scaling = [a / b for a, b in zip(c[h][n], c[h][1])]
            out[h] = {"rate_1": statistics.median(c[h][1]), "rate_n": statistics.median(c[h][n]),
                      "scaling": statistics.median(scaling)}
            line = f"{case:<10}{h:<17}{out[h]['rate_1']:>13.0f}{out[h]['rate_n']:>13.0f}{out[h]['scaling']:>9.3f}"
            if h != "default":
                rel = [(hn / dn) / (h1 / d1) for hn, dn, h1, d1 in zip(c[h][n], c["default"][n], c[h][1],
                                                                     c["default"][1])]
                s = out[h]["relative"] = summary(rel)
                ci = "—" if s["ci_low"] is None else f"{s['ci_low']:.3f}–{s['ci_high']:.3f}"
                line += f"{s['median']:>11.3f}{ci:>16}{s['p10']:>8.3f}–{s['p90']:.3f}"
            print(line)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
