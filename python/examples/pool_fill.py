#!/usr/bin/env python3
"""A `multiprocessing.Pool` whose workers fill slices of one large array in
place, through memplug's shared-memory handler.

The parent makes one float64 array in a named shared-memory segment (the
bundled `shm` plugin, inside a `with` block of its `memplug.numpy.allocator`), cuts it
into chunks and hands each worker a *handle* to its chunk
(`memplug.numpy.share`: a few hundred bytes, whatever the chunk's size).
A worker attaches its chunk (`memplug.numpy.attach`: an ndarray over the
parent's memory, not a copy) and writes it in place. When `pool.map`
returns, the parent's array holds every worker's results; nothing but the
handles was pickled. At the end the parent frees the array and closes the
instance, which removes the segment from /dev/shm (it was made with
`unlink=1`, so it would go at exit anyway).

    python python/examples/pool_fill.py [--mib 256] [--workers 4] [--chunks 16]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import sys
import time

import numpy as np

import memplug.numpy as mnp


def fill(job: tuple) -> tuple:
    """In a worker: element i of the whole array becomes sqrt(i)."""
    handle, start = job
    part = mnp.attach(handle)  # the parent's memory
    part[:] = np.arange(start, start + len(part), dtype=np.float64)
    np.sqrt(part, out=part)
    return os.getpid(), len(part)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mib", type=int, default=256, help="size of the array in MiB (default 256)")
    ap.add_argument("--workers", type=int, default=4, help="pool processes (default 4)")
    ap.add_argument("--chunks", type=int, default=16, help="slices handed out (default 16)")
    args = ap.parse_args(argv)

    n = args.mib * (1 << 20) // 8
    name = f"pool-fill-{os.getpid()}"
    # The segment holds the array and the allocator's bookkeeping; it is a
    # sparse file, so only the pages written use memory.
    shm = mnp.allocator(f"shm:name={name},size={args.mib + 1}m,create=1,unlink=1")
    with shm:
        data = np.full(n, np.nan)  # made in the segment
    bounds = np.linspace(0, n, args.chunks + 1).astype(np.int64)
    jobs = [(mnp.share(data[lo:hi]), int(lo)) for lo, hi in zip(bounds[:-1], bounds[1:])]

    t0 = time.perf_counter()
    with mp.get_context("spawn").Pool(args.workers) as pool:
        done = pool.map(fill, jobs)
    took = time.perf_counter() - t0

    # Check every element, a chunk at a time.
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        want = np.sqrt(np.arange(lo, hi, dtype=np.float64))
        if not np.array_equal(data[lo:hi], want):
            print(f"chunk {lo}..{hi} is wrong", file=sys.stderr)
            return 1
    workers = sorted({pid for pid, _ in done})
    print(
        f"{len(jobs)} chunks of a {args.mib} MiB array filled in place by {len(workers)} worker processes "
        f"in {took:.2f} s; every element checked"
    )

    del data, jobs
    shm.close()  # the array is gone: the segment goes now
    left = os.path.exists(f"/dev/shm/memplug-{name}")
    print(f"segment /memplug-{name} {'still exists' if left else 'removed'}")
    return 1 if left else 0


if __name__ == "__main__":
    sys.exit(main())
