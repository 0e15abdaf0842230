#!/usr/bin/env python3
"""Markdown tables for scripts/bench.sh from benchmark outputs (stdlib only).

    bench_tables.py criterion GROUP_DIR PER   criterion medians of a group, divided by PER
    bench_tables.py numpy FILE.json           python/bench/numpy_bridge.py --json
    bench_tables.py scaling FILE.json         python/bench/scaling.py --json
    bench_tables.py share FILE.json           python/bench/share.py --json
    bench_tables.py instructions FILE...      output of python/bench/instructions.sh
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path


def criterion(group: Path, per: float) -> None:
    """Criterion's median (`median.point_estimate`, ns per iteration) of every
    variant of a group, divided by `per` (operations per iteration)."""
    rows = []
    for est in sorted(group.glob("*/new/estimates.json")):
        median = json.loads(est.read_text())["median"]["point_estimate"]
        rows.append((est.parent.parent.name, median / per))
    if not rows:
        sys.exit(f"bench_tables: no criterion estimates under {group}")
    order = ["unlocked_direct", "per_op_lock", "guard_batch_1000", "two_threads_per_op", "two_threads_batch_1000"]
    rows.sort(key=lambda r: order.index(r[0]) if r[0] in order else len(order))
    print(f"criterion medians of {group.name} (one variant after another)")
    print("| variant | criterion median ns/pair |")
    print("|---|---:|")
    for name, ns in rows:
        print(f"| {name} | {ns:.2f} |")
    print()


def numpy(path: Path) -> None:
    r = json.loads(path.read_text())
    print(f"NumPy bridge vs NumPy's default handler: NumPy {r['numpy']}, Python {r['python']}, "
          f"{r['rounds']} interleaved rounds; ratio = median of per-round variant / default")
    print("| case | variant | median ns/op | ratio | ratio p10–p90 |")
    print("|---|---|---:|---:|---:|")
    for case, variants in r["cases"].items():
        for v, f in variants.items():
            print(f"| {case} | {v} | {f['ns_per_op']:.1f} | {f['ratio']:.3f} | {f['p10']:.3f}–{f['p90']:.3f} |")
    print()


def scaling(path: Path) -> None:
    r = json.loads(path.read_text())
    n = r["threads"]
    policy = "SCHED_FIFO" if r.get("realtime") else "ordinary priority"
    immortal = {True: "immortal", False: "not immortal", None: "not found"}[r.get("default_capsule_immortal")]
    print(f"Arrays per second on {n} threads over 1, the bridge (`system`) vs NumPy's default handler: "
          f"NumPy {r['numpy']} (default handler capsule {immortal}), Python {r['python']}, {r['cpus']} CPUs, "
          f"workers at {policy}, {r['rounds']} interleaved rounds, load average {r['load']:.1f}; "
          f"scaling = rate on {n} / rate on 1; a ratio is the handler's scaling over the default's in the same "
          f"round (median, its 95% interval, the rounds' p10–p90); the default measured again is the noise floor")
    print("| case | default: scaling | system: scaling | system / default | 95% interval | p10–p90 "
          "| noise floor: default again / default | its 95% interval |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")

    def interval(s: dict) -> str:
        return "—" if s["ci_low"] is None else f"{s['ci_low']:.3f}–{s['ci_high']:.3f}"

    for case, c in r["cases"].items():
        rel, noise = c["system"]["relative"], c["default (again)"]["relative"]
        print(f"| {case} | {c['default']['scaling']:.3f} | {c['system']['scaling']:.3f} | {rel['median']:.3f} "
              f"| {interval(rel)} | {rel['p10']:.3f}–{rel['p90']:.3f} | {noise['median']:.3f} | {interval(noise)} |")
    print()


def share(path: Path) -> None:
    r = json.loads(path.read_text())
    print(f"Handing a {r['mib']} MiB NumPy array to 2 worker processes: NumPy {r['numpy']}, Python {r['python']}, "
          f"{r['rounds']} interleaved rounds; ratio = median of per-round variant / shared_memory")
    print("| variant | median ms | ratio to shared_memory | ratio p10–p90 | ratio to pickle |")
    print("|---|---:|---:|---:|---:|")
    for v, f in r["variants"].items():
        print(f"| {v} | {f['ms']:.1f} | {f['ratio']:.3f} | {f['p10']:.3f}–{f['p90']:.3f} | {f['vs_pickle']:.3f} |")
    print()


def instructions(paths: list[Path]) -> None:
    counts: dict[str, dict[str, str]] = {}
    line = re.compile(r"^(\w+) (\w+): (\d+) instructions per create\+delete$")
    added = re.compile(r"^(\w+): the bridge adds (-?\d+)$")
    for p in paths:
        for text in p.read_text().splitlines():
            if m := line.match(text):
                counts.setdefault(m[1], {})[m[2]] = m[3]
            elif m := added.match(text):
                counts.setdefault(m[1], {})["added"] = m[2]
    if not counts:
        sys.exit("bench_tables: no instruction counts found")
    print("Instructions per NumPy create+delete (valgrind), NumPy's default handler vs the bridge with `system` "
          "and numpy-allocator over libc")
    print("| case | default | system | numpy-allocator | the bridge adds |")
    print("|---|---:|---:|---:|---:|")
    for case, c in counts.items():
        print(f"| {case} | {c.get('default', '?')} | {c.get('system', '?')} | {c.get('numpy_allocator', '—')} "
              f"| {c.get('added', '?')} |")
    print()


def main(argv: list[str]) -> None:
    if len(argv) >= 3 and argv[0] == "criterion":
        criterion(Path(argv[1]), float(argv[2]))
    elif len(argv) == 2 and argv[0] == "numpy":
        numpy(Path(argv[1]))
    elif len(argv) == 2 and argv[0] == "scaling":
        scaling(Path(argv[1]))
    elif len(argv) == 2 and argv[0] == "share":
        share(Path(argv[1]))
    elif len(argv) >= 2 and argv[0] == "instructions":
        instructions([Path(a) for a in argv[1:]])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
