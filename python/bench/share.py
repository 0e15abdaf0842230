#!/usr/bin/env python3
"""Handing a large NumPy array to worker processes: pickling vs
`multiprocessing.shared_memory` by hand vs `memplug.numpy.share`, side by
side in one run.

The job: a 256 MiB float64 array (all 1.0), two worker processes (a
`multiprocessing.Pool`, spawn context, started once), each sums one half
and scales it by 3 in place; afterwards the parent's array holds the scaled
values and the parent has both sums (checked every round).

Variants:
  pickle         what `multiprocessing` does by default: each half is
                 pickled to its worker, and the scaled half pickled back and
                 copied into the parent's array
  shared_memory  the array lives in a `multiprocessing.shared_memory`
                 block; each worker gets (name, start, stop), attaches the
                 block, wraps its half in an ndarray, and detaches (written
                 by hand, as its documentation shows; the pool's workers
                 share the parent's resource tracker, so attaching does not
                 make them unlink the block)
  memplug        the array was made under `memplug.numpy.allocator("shm:...")`;
                 each worker gets `memplug.numpy.share(half)` and calls
                 `memplug.numpy.attach`

Interleaved: each round runs every variant, in rotating order; a variant's
time in a round is the best of three runs (pickle: one run, it is far off
anyway), a ratio is variant / shared_memory *in the same round*, and the
figure of record is the median over rounds. Every run's sums and the
parent's array are checked (untimed).

    python python/bench/share.py [--rounds 15] [--mib 256] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import statistics
import sys
import time
from multiprocessing import shared_memory
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

import memplug.numpy as mnp  # noqa: E402

FACTOR = 3.0
REPEATS = 3


def work_pickle(half: np.ndarray) -> tuple:
    total = float(half.sum())
    half *= FACTOR
    return total, half


def work_shared_memory(name: str, start: int, stop: int) -> float:
    block = shared_memory.SharedMemory(name=name)
    half = np.ndarray((stop - start,), dtype=np.float64, buffer=block.buf, offset=start * 8)
    total = float(half.sum())
    half *= FACTOR
    del half
    block.close()
    return total


def work_memplug(handle: mnp.SharedArray) -> float:
    half = mnp.attach(handle)
    total = float(half.sum())
    half *= FACTOR
    return total


def warm(_: int) -> int:
    return os.getpid()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--mib", type=int, default=256)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()

    n = args.mib * (1 << 20) // 8
    mid = n // 2
    nbytes = n * 8

    plain = np.ones(n)
    # Both shared arrays are made again every round (untimed), so that no
    # variant keeps, for a whole run, memory that happens to be slower (on a
    # virtual machine, guest pages backed by the host's huge pages or not
    # make runs differ by up to 20 % either way).
    fresh: dict = {}

    def make_fresh(r: int) -> None:
        drop_fresh()
        block = shared_memory.SharedMemory(create=True, size=nbytes)
        fresh["block"] = block
        variants["shared_memory"] = (run_shared_memory, np.ndarray((n,), dtype=np.float64, buffer=block.buf))
        key = f"shm:name=bench-share-{os.getpid()}-{r + 1},size={args.mib + 1}m,create=1,unlink=1"
        fresh["shm"] = shm = mnp.allocator(key)
        with shm:
            variants["memplug"] = (run_memplug, np.ones(n))

    def drop_fresh() -> None:
        variants.pop("shared_memory", None)
        variants.pop("memplug", None)
        if "block" in fresh:
            fresh["block"].close()
            fresh.pop("block").unlink()
        if "shm" in fresh:
            fresh.pop("shm").close()

    def run_pickle(pool) -> list:
        results = pool.map(work_pickle, [plain[:mid], plain[mid:]])
        plain[:mid] = results[0][1]
        plain[mid:] = results[1][1]
        return [r[0] for r in results]

    def run_shared_memory(pool) -> list:
        name = fresh["block"].name
        return pool.starmap(work_shared_memory, [(name, 0, mid), (name, mid, n)])

    def run_memplug(pool) -> list:
        ours = variants["memplug"][1]
        return pool.map(work_memplug, [mnp.share(ours[:mid]), mnp.share(ours[mid:])])

    variants: dict = {"pickle": (run_pickle, plain)}
    names = ["shared_memory", "memplug", "pickle"]
    times: dict = {v: [] for v in names}
    try:
        with mp.get_context("spawn").Pool(2) as pool:
            pool.map(warm, range(4), chunksize=1)
            for r in range(-1, args.rounds):  # round -1 warms up
                make_fresh(r)
                order = names[r % len(names):] + names[: r % len(names)]
                for v in order:
                    run, arr = variants[v]
                    best = float("inf")
                    for k in range(1 if v == "pickle" else REPEATS):
                        arr[:] = 1.0
                        t0 = time.perf_counter()
                        sums = run(pool)
                        best = min(best, time.perf_counter() - t0)
                        assert sums == [float(mid), float(n - mid)], (v, sums)
                        step = 1 if r == 0 and k == 0 else 4099
                        assert (arr[::step] == FACTOR).all(), f"{v}: the parent's array holds the scaled values"
                    if r >= 0:
                        times[v].append(best)
    finally:
        drop_fresh()

    result = {"mib": args.mib, "rounds": args.rounds, "python": sys.version.split()[0], "numpy": np.__version__,
              "variants": {}}
    print(f"{args.mib} MiB float64 array, 2 workers summing and scaling a half each; {args.rounds} interleaved rounds")
    print(f"{'variant':<15}{'median ms':>11}{'vs shared_memory':>18}{'p10–p90':>16}{'vs pickle':>11}")
    for v in names:
        ratios = sorted(t / b for t, b in zip(times[v], times["shared_memory"]))
        vs_pickle = statistics.median(t / p for t, p in zip(times[v], times["pickle"]))
        med = statistics.median(ratios)
        p10, p90 = ratios[len(ratios) // 10], ratios[(len(ratios) * 9) // 10]
        ms = statistics.median(times[v]) * 1e3
        result["variants"][v] = {"ms": ms, "ratio": med, "p10": p10, "p90": p90, "vs_pickle": vs_pickle}
        print(f"{v:<15}{ms:>11.1f}{med:>18.3f}{p10:>10.3f}–{p90:.3f}{vs_pickle:>11.3f}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
