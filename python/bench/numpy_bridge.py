#!/usr/bin/env python3
"""NumPy's default handler vs the memplug bridge, side by side in one run.

Variants (each NumPy's handler for its block of work):
  default          NumPy's own handler (with its small-block cache)
  system           memplug's bundled `system` plugin (libc) through the bridge
  numpy-allocator  (if the `numpy-allocator` package is installed) its handler
                   with libc's malloc, calloc, realloc and free by address
  ff-ctypes        (if memplug has `from_functions`) a handler made by
                   memplug.from_functions from libc's malloc and free (ctypes)
  ff-python        the same from Python callables that call them
  mimalloc         (unless --no-mimalloc) mimalloc taken by symbol name
                   (examples/manifests/mimalloc.memplug.toml)
  shm              (with --shm) the shareable `shm` plugin, a 256 MiB segment of
                   this process: every call takes the segment's lock, and the
                   bridge pads each array to a 64-byte boundary

Cases:
  empty8   np.empty(8) created and deleted (64 bytes of data)
  ones64   np.ones(64) created and deleted (512 bytes)
  empty1m  np.empty(1 MiB, uint8) created and deleted
  mixed1m  the same, of 1 MiB + 64 k bytes for k = 0, 1, ..., 1023 in turn:
           no size comes back soon enough for the bridge's two spare blocks
           (freed blocks kept for a request of their exact size), so this
           is their cost where they cannot help
  ufunc    a chain of ufuncs on 1e5-element float64 arrays, making temporaries:
           d = np.sqrt(a * a + b * b) * 0.5 + np.exp(-a) ; del d

Interleaved: each round runs every case under every variant, the variants in
rotating order; a variant's time in a round is the best of three short blocks
(a block that another process preempted is discarded that way). A ratio is
variant / default *in the same round*, and the figure of record is the median
over rounds (the machine's speed drifts; rounds next to each other see the
same speed).

    python python/bench/numpy_bridge.py [--rounds 60] [--json FILE] [--no-mimalloc] [--shm]
                                        [--cases CASE...] [--variants VARIANT...]

--cases and --variants keep only those (the default variant always runs: it
is the baseline); scripts/bench.sh runs `--cases empty8 ones64 --variants
system` on a free-threaded CPython.
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import gc
import json
import os
import statistics
import sys
import time
from pathlib import Path

# OpenBLAS's idle threads spin for a while after NumPy starts: keep them out
# of a 2-core machine's timings (nothing here calls BLAS).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

import memplug  # noqa: E402
import memplug.numpy as mnp  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
MANIFEST = REPO / "examples" / "manifests" / "mimalloc.memplug.toml"


def case_empty8(n):
    empty = np.empty
    for _ in range(n):
        empty(8)


def case_ones64(n):
    ones = np.ones
    for _ in range(n):
        ones(64)


def case_empty1m(n):
    empty, u8 = np.empty, np.uint8
    for _ in range(n):
        empty(1 << 20, dtype=u8)


MIXED_SIZES = [(1 << 20) + 64 * k for k in range(1024)]


def case_mixed1m(n):
    empty, u8, sizes = np.empty, np.uint8, MIXED_SIZES
    for i in range(n):
        empty(sizes[i & 1023], dtype=u8)


A = np.linspace(0.0, 1.0, 100_000)
B = np.linspace(1.0, 2.0, 100_000)


def case_ufunc(n):
    a, b, sqrt, exp = A, B, np.sqrt, np.exp
    for _ in range(n):
        d = sqrt(a * a + b * b) * 0.5 + exp(-a)
        del d


CASES = {
    "empty8": (case_empty8, 5_000),
    "ones64": (case_ones64, 4_000),
    "empty1m": (case_empty1m, 2_000),
    "mixed1m": (case_mixed1m, 2_000),
    "ufunc": (case_ufunc, 100),
}
REPEATS = 3


def memplug_variant(handler):
    """A variant that makes a memplug handler NumPy's for its block."""
    alloc = mnp.allocator(handler)
    return lambda: alloc


def numpy_allocator_variant():
    """numpy-allocator's handler over libc's functions by address, or None
    (with a message) when the package is not installed."""
    try:
        import numpy_allocator
    except ImportError:
        print("numpy-allocator is not installed: its variant is skipped "
              "(scripts/py-env.sh installs it)", file=sys.stderr)
        return None
    libc = ctypes.CDLL(ctypes.util.find_library("c"))

    # numpy-allocator 1.2.1 takes the address where each function's pointer
    # is kept (ctypes.addressof of a foreign function).
    class libc_allocator(metaclass=numpy_allocator.type):
        _calloc_ = ctypes.addressof(libc.calloc)
        _free_ = ctypes.addressof(libc.free)
        _malloc_ = ctypes.addressof(libc.malloc)
        _realloc_ = ctypes.addressof(libc.realloc)

    # numpy-allocator 1.2.1's handler capsule crashes when it is destroyed at
    # the interpreter's exit (its destructor releases what it does not own):
    # one reference more keeps it, as handlers are kept, for the process.
    ctypes.pythonapi.Py_IncRef(ctypes.py_object(libc_allocator.handler()))
    return lambda: libc_allocator


def from_functions_variants():
    """`memplug.from_functions` over libc (ctypes) and over Python callables,
    if this memplug has it."""
    make = getattr(memplug, "from_functions", None)
    if make is None:
        print("memplug.from_functions is not available: its variants are skipped", file=sys.stderr)
        return {}
    libc = ctypes.CDLL(ctypes.util.find_library("c"))
    libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
    libc.free.restype, libc.free.argtypes = None, [ctypes.c_void_p]
    out = {}
    try:
        make("bench_ctypes", malloc=libc.malloc, free=libc.free)
        out["ff-ctypes"] = memplug_variant("bench_ctypes")
        # Python callables: malloc(size) -> address, free(ptr, size).
        make("bench_python", malloc=lambda size: libc.malloc(size), free=lambda ptr, size: libc.free(ptr))
        out["ff-python"] = memplug_variant("bench_python")
    except Exception as e:  # noqa: BLE001 - the API is another module's; report and go on
        print(f"memplug.from_functions failed ({e}): its variants are skipped", file=sys.stderr)
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=60)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--no-mimalloc", action="store_true")
    ap.add_argument("--shm", action="store_true", help="also the shm plugin (a segment of this process)")
    ap.add_argument("--cases", nargs="+", choices=list(CASES), help="only these cases")
    ap.add_argument("--variants", nargs="+", help="only these variants besides default")
    args = ap.parse_args()
    cases = {c: CASES[c] for c in (args.cases or CASES)}

    keep = None if args.variants is None else {"default", *args.variants}
    variants = {"default": memplug_variant(None), "system": memplug_variant("system")}
    if (keep is None or "numpy-allocator" in keep) and (na := numpy_allocator_variant()) is not None:
        variants["numpy-allocator"] = na
    if keep is None or keep & {"ff-ctypes", "ff-python"}:
        variants.update(from_functions_variants())
    if not args.no_mimalloc and (keep is None or "mimalloc" in keep):
        memplug.load(MANIFEST)
        variants["mimalloc"] = memplug_variant("mimalloc")
    if args.shm:
        variants["shm"] = memplug_variant("shm:size=256m")
    if keep is not None:
        variants = {v: make for v, make in variants.items() if v in keep}
    names = list(variants)

    times = {c: {v: [] for v in names} for c in cases}
    gc.disable()
    for r in range(args.rounds):
        order = names[r % len(names):] + names[: r % len(names)]
        for case, (fn, n) in cases.items():
            for v in order:
                with variants[v]():
                    fn(max(1, n // 20))  # warm the allocator's caches for this variant
                    best = None
                    for _ in range(REPEATS):
                        t0 = time.perf_counter_ns()
                        fn(n)
                        t = time.perf_counter_ns() - t0
                        best = t if best is None else min(best, t)
                times[case][v].append(best / n)
    gc.enable()

    free_threaded = not getattr(sys, "_is_gil_enabled", lambda: True)()
    python = sys.version.split()[0] + ("t, GIL off" if free_threaded else "")
    result = {"numpy": np.__version__, "python": python, "rounds": args.rounds, "cases": {}}
    print(f"NumPy {np.__version__}, Python {result['python']}, {args.rounds} interleaved rounds")
    print(f"{'case':<9}{'variant':<17}{'median ns/op':>14}{'ratio (median)':>16}{'ratio p10–p90':>18}")
    for case in cases:
        base = times[case]["default"]
        result["cases"][case] = {}
        for v in names:
            ratios = sorted(t / b for t, b in zip(times[case][v], base))
            med = statistics.median(ratios)
            p10, p90 = ratios[len(ratios) // 10], ratios[(len(ratios) * 9) // 10]
            ns = statistics.median(times[case][v])
            result["cases"][case][v] = {"ns_per_op": ns, "ratio": med, "p10": p10, "p90": p90}
            print(f"{case:<9}{v:<17}{ns:>14.1f}{med:>16.3f}{p10:>11.3f}–{p90:.3f}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
