#!/usr/bin/env python3
"""`memplug run`'s benchmark (scripts/bench.sh's "memplug run" section).

Real programs, each variant of a table run once per round paired with the
table's baseline (below); the ratio of a variant is the median of its
per-round ratios to the baseline, of CPU time (user + system of the program
and its children: on a loaded machine, wall time mostly measures waiting for
a CPU), wall time beside it when the runs take turns (`--sequential`).
Prints Markdown tables.

  scripts/bench_run.py --memplug target/release/memplug --rounds 9 [--quick] [--lines N] [--sequential]
  scripts/bench_run.py --memplug target/release/memplug --profile --rounds 9   # only the heap profile table
  scripts/bench_run.py --memplug target/release/memplug --rounds 9 --acceptance   # the goal tables only
  scripts/bench_run.py --memplug target/release/memplug --rounds 3 --guard        # the guard tables only
  scripts/bench_run.py --write-c-file FILE --lines N   # only write the large C file (tests use it)

Tables:
- the acceptance programs — a malloc-heavy Python program (a dict of lists
  built and dropped) and `gcc -O2 -c` of a generated C file of 100 000 lines
  — alone vs `memplug run --handler system` (goal <= 1.02 CPU time), and on
  mimalloc: `memplug run` by symbol name (the manifest of examples/manifests
  as shipped, which names its usable-size function: the headerless path) vs
  `LD_PRELOAD=libmimalloc.so.2` (goal <= 1.02 CPU time and max RSS), beside
  `memplug run` on the same manifest without its `usable_size` line (the
  header path); each run's path is checked first (the report's `headerless`
  count);
- a smaller Python program: `memplug run --handler guard` vs valgrind's
  memcheck (the ratio is reported, no goal);
- `gcc -O2 -c` of the same file: alone vs
  `memplug run --handler guard:sample=1000` (goal <= 1.3);
- `--profile`: `gcc -O2 -c` of the same file alone vs `memplug run
  --handler system` and `memplug run --handler system --profile FILE` at
  the default rate (goal <= 1.03).

`--instructions` counts instead of timing: each acceptance program (the C
file smaller, `--lines`, default 10 000) runs once per variant under
`valgrind --tool=callgrind --trace-children=yes`, and a variant's figure is
the instructions of every process it ran (gcc's `cc1` and `as` included),
summed; `memplug run` starts valgrind, so its own check is not counted
(its CPU time is measured beside). Instructions do not vary from run to
run as time does, so the ratio shows what the interposer adds to the work
whatever the machine is doing.

Max RSS is the largest resident set of the program and its children
(`ru_maxrss` of `wait4`); its ratio is the median of the per-round ratios.

Paired rounds (the default; `--sequential` turns them off): in each round
every variant runs at the same time as the baseline, both pinned to the
same CPU (`sched_setaffinity`, inherited by the children), so that the
kernel gives them turns of a few milliseconds. Whatever the machine does
meanwhile — another tenant on the host, a change of clock speed — then falls
on both runs of the pair alike, down to the millisecond, and the pair's
ratio keeps only the difference between the variants. Pairs of different
variants (or rounds) run on different CPUs at once, one pair per CPU. Each
table also runs the baseline paired with itself: its ratios are the
method's noise floor, printed as a row of their own. On a shared 2-CPU
virtual machine a pair's ratio of identical runs spreads by under 1% this
way, against 4-10% for runs one after the other (ABBA order) and 10-20% for
runs at the same time on different CPUs. A ratio's 95% interval is the
distribution-free one for a median (two order statistics of the per-round
ratios; printed from 6 rounds up).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MIMALLOC = ["/lib/x86_64-linux-gnu/libmimalloc.so.2", "/usr/lib/libmimalloc.so.2"]


def dict_program(n: int) -> str:
    """Python code that builds and drops a dict of `n` lists (up to 200 items:
    most are more than the 512 bytes Python serves itself, so malloc's)."""
    return (
        f"d = {{i: list(range(i % 200)) for i in range({n})}}\n"
        "s = sum(len(v) for v in d.values())\n"
        "del d\n"
    )


def large_c_file(path: Path, lines: int) -> None:
    """Write a C file of at least `lines` lines: the functions of `c_file`,
    one statement a line, called in groups of 100 (no function of thousands
    of lines, which would make an optimising compile superlinear)."""
    n = lines // 10 + 1
    with path.open("w") as f:
        f.write("#include <stdio.h>\n#include <string.h>\n")
        for i in range(n):
            f.write(
                f"struct s{i} {{ int a[{i % 7 + 1}]; char name[{i % 13 + 8}]; }};\n"
                f"int f{i}(int x) {{\n"
                f"    struct s{i} v;\n"
                "    memset(&v, 0, sizeof v);\n"
                f"    for (int k = 0; k < {i % 5 + 2}; k++)\n"
                f"        x = x * {i % 11 + 3} + v.a[0] + k;\n"
                f"    snprintf(v.name, sizeof v.name, \"f{i}_%d\", x);\n"
                "    return x + (int)strlen(v.name);\n"
                "}\n"
            )
        groups = range(0, n, 100)
        for j in groups:
            f.write(f"int g{j // 100}(int x) {{\n")
            for i in range(j, min(n, j + 100)):
                f.write(f"    x ^= f{i}(x);\n")
            f.write("    return x;\n}\n")
        f.write("int main(void) {\n    int x = 1;\n")
        for j in groups:
            f.write(f"    x = g{j // 100}(x);\n")
        f.write('    printf("%d\\n", x);\n    return 0;\n}\n')


def start(argv: list[str], env: dict[str, str], cpu: int | None) -> tuple[subprocess.Popen, float]:
    """Start `argv`, pinned to `cpu` (with its children) when given."""
    pin = (lambda: os.sched_setaffinity(0, {cpu})) if cpu is not None else None
    t0 = time.perf_counter()
    p = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, preexec_fn=pin)
    return p, t0


def finish(p: subprocess.Popen, t0: float, argv: list[str]) -> tuple[float, float, float]:
    """Wall seconds, CPU seconds (user + system, the program's children
    included) and max RSS (KiB, the largest of the program and its children)
    of a run `start` began; it must succeed."""
    err = p.stderr.read() if p.stderr else b""
    _, status, usage = os.wait4(p.pid, 0)
    dt = time.perf_counter() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        sys.exit(f"{' '.join(argv[:6])}...: exit {p.returncode}: {err.decode(errors='replace')[-2000:]}")
    return dt, usage.ru_utime + usage.ru_stime, float(usage.ru_maxrss)


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, float, float]:
    """One run of `argv` on its own (see `finish`)."""
    p, t0 = start(argv, env, None)
    return finish(p, t0, argv)


def timed_pair(a: tuple[list[str], dict[str, str]], b: tuple[list[str], dict[str, str]], cpu: int,
               b_first: bool = False):
    """`a` and `b` run at the same time, both pinned to `cpu` (the kernel
    then gives them turns of a few milliseconds); their `finish` figures.
    Each one's stderr is read on its own thread, so that neither can fill
    its pipe and stall."""
    import threading

    order = (1, 0) if b_first else (0, 1)
    started: dict[int, tuple[subprocess.Popen, float]] = {}
    for i in order:
        argv, env = (a, b)[i]
        started[i] = start(argv, env, cpu)
    out: list = [None, None]

    def reap(i: int) -> None:
        out[i] = finish(started[i][0], started[i][1], (a, b)[i][0])

    threads = [threading.Thread(target=reap, args=(i,)) for i in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if None in out:
        sys.exit("a paired run failed (see above)")
    return out[0], out[1]


def pair_cpus() -> list[int] | None:
    """The CPUs this process may run on, for paired rounds (one pair per
    CPU at a time); None when `--sequential` was asked for."""
    if PAIRED is False:
        return None
    return sorted(os.sched_getaffinity(0))


PAIRED: bool | None = None  # set by main(): False for --sequential
QUICK = False  # set by main(): --quick


def callgrind_total(argv: list[str], env: dict[str, str], prefix: list[str], out: Path) -> int:
    """The instructions of one run of `argv` and every process it starts,
    counted by callgrind (`prefix`, e.g. `memplug run ... --`, goes before
    valgrind); it must succeed."""
    out.mkdir(parents=True, exist_ok=True)
    for f in out.glob("cg.*"):
        f.unlink()
    vg = ["valgrind", "--tool=callgrind", "--trace-children=yes", f"--callgrind-out-file={out}/cg.%p"]
    p = subprocess.run(prefix + vg + argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    if p.returncode != 0:
        sys.exit(f"callgrind of {' '.join(argv[:4])}...: exit {p.returncode}: {p.stderr.decode(errors='replace')[-2000:]}")
    total = 0
    for f in out.glob("cg.*"):
        for line in f.read_text(errors="replace").splitlines():
            if line.startswith("summary:") or line.startswith("totals:"):
                total += int(line.split()[1])
                break
    return total


def instruction_table(title: str, variants: list[tuple[str, list[str], list[str], dict[str, str]]], tmp: Path,
                      goal: str) -> None:
    """Count `variants` (name, prefix, argv, env), the first the baseline,
    two at a time (one per CPU)."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=max(1, min(2, len(os.sched_getaffinity(0))))) as pool:
        totals = list(pool.map(lambda iv: callgrind_total(iv[1][2], iv[1][3], iv[1][1], tmp / f"cg{iv[0]}"),
                               enumerate(variants)))
    base = totals[0]
    print(f"```text\n{title}: instructions of every process (callgrind), one run each\n```\n")
    print(f"| variant | instructions | ratio to {variants[0][0]} | added |")
    print("|---|---:|---:|---:|")
    for (name, *_), t in zip(variants, totals):
        print(f"| {name} | {t:,} | {t / base:.5f} | {t - base:+,} |")
    print(f"\n**Goal**: {goal}\n" if goal else "")


def median_interval(xs: list[float]) -> tuple[float, float] | None:
    """A distribution-free 95% confidence interval for the median of the
    sorted `xs`: the order statistics k and n-1-k (0-based) with k the
    largest for which P(Binomial(n, 1/2) <= k) <= 0.025; None when `n` is
    too small for one (fewer than 6)."""
    from math import comb

    n = len(xs)
    k, tail = -1, 0.0
    while True:
        tail += comb(n, k + 1) / 2**n
        if tail > 0.025:
            break
        k += 1
    return None if k < 0 else (xs[k], xs[n - 1 - k])


def table(title: str, variants: list[tuple[str, list[str], dict[str, str]]], rounds: int, goal: str) -> None:
    """Run `variants` (name, argv, env), the first the baseline: each
    paired with it on one CPU (see the module's doc), else interleaved one
    after the other (`--sequential`)."""
    wall: dict[str, list[float]] = {name: [] for name, _, _ in variants}
    cpu: dict[str, list[float]] = {name: [] for name, _, _ in variants}
    rss: dict[str, list[float]] = {name: [] for name, _, _ in variants}
    # The baseline's own figures for the pair each variant's round ran in.
    base_of: dict[str, dict[str, list[float]]] = {name: {"wall": [], "cpu": [], "rss": []} for name, _, _ in variants}
    cpus = pair_cpus()
    for _, argv, env in variants:  # warm-up: caches, the verdict cache, page cache
        timed(argv, env)
    base = variants[0][0]
    # The baseline against itself: what the method reads when there is no
    # difference to find (its ratios show the noise floor).
    variants = variants + [(f"{base} (again: the method's noise floor)", variants[0][1], variants[0][2])]
    for d in (wall, cpu, rss):
        d[variants[-1][0]] = []
    base_of[variants[-1][0]] = {"wall": [], "cpu": [], "rss": []}
    if cpus is not None:
        # Every (round, variant) pair is a job; the jobs run one per CPU at
        # a time, each on a CPU no other job holds.
        import queue
        from concurrent.futures import ThreadPoolExecutor

        free: queue.Queue[int] = queue.Queue()
        for c in cpus:
            free.put(c)
        jobs = [(r, v) for r in range(rounds) for v in variants[1:]]

        def job(rv):
            r, (name, argv, env) = rv
            cpu = free.get()
            try:
                return name, timed_pair((variants[0][1], variants[0][2]), (argv, env), cpu, b_first=r % 2 == 1)
            finally:
                free.put(cpu)

        with ThreadPoolExecutor(max_workers=len(cpus)) as pool:
            for name, ((bw, bc, bm), (w, c, m)) in pool.map(job, jobs):
                for key, v in (("wall", bw), ("cpu", bc), ("rss", bm)):
                    base_of[name][key].append(v)
                wall[name].append(w)
                cpu[name].append(c)
                rss[name].append(m)
                wall[base].append(bw)
                cpu[base].append(bc)
                rss[base].append(bm)
    else:
        for r in range(rounds):
            order = variants[r % len(variants):] + variants[: r % len(variants)]
            for name, argv, env in order:
                w, c, m = timed(argv, env)
                wall[name].append(w)
                cpu[name].append(c)
                rss[name].append(m)
            for name, _, _ in variants[1:]:
                for key, v in (("wall", wall[base][-1]), ("cpu", cpu[base][-1]), ("rss", rss[base][-1])):
                    base_of[name][key].append(v)
    how = (f"paired rounds: each variant at the same time as {base}, both pinned to one CPU "
           f"(pairs on CPUs {', '.join(map(str, cpus))}, one pair per CPU at a time)"
           if cpus is not None else "interleaved rounds, one run after another")
    print(f"```text\n{title}: {rounds} {how}; ratio = median of per-round variant / {base}, "
          "of CPU time (user + system, children included) and of max RSS\n```\n")
    print(f"| variant | median wall s | median CPU s | CPU ratio to {base} | its 95% interval | ratio p10–p90 "
          "| wall ratio | max RSS MiB | RSS ratio |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, _, _ in variants:
        if name == base:
            ratios = walls = rss_ratios = [1.0]
        else:
            ratios = sorted(t / b for t, b in zip(cpu[name], base_of[name]["cpu"]))
            walls = sorted(t / b for t, b in zip(wall[name], base_of[name]["wall"]))
            rss_ratios = sorted(t / b for t, b in zip(rss[name], base_of[name]["rss"]))
        lo = ratios[len(ratios) // 10]
        hi = ratios[min(len(ratios) - 1, (len(ratios) * 9) // 10)]
        spread = "—" if name == base else f"{lo:.3f}–{hi:.3f}"
        ci = median_interval(ratios)
        interval = "—" if name == base or ci is None else f"{ci[0]:.3f}–{ci[1]:.3f}"
        # Paired runs share a CPU, so each one's wall time counts the other's turns.
        wall_ratio = f"{statistics.median(walls):.3f}" if cpus is None else "—"
        print(
            f"| {name} | {statistics.median(wall[name]):.3f} | {statistics.median(cpu[name]):.3f} "
            f"| {statistics.median(ratios):.3f} | {interval} | {spread} | {wall_ratio} "
            f"| {statistics.median(rss[name]) / 1024:.1f} | {statistics.median(rss_ratios):.3f} |"
        )
    if goal and QUICK:
        goal += " — at the full sizes; `--quick`'s programs are small, so `memplug run`'s start-up weighs more"
    print(f"\n**Goal**: {goal}\n" if goal else "")


def mimalloc_runs(memplug: str, tmp: Path, env: dict[str, str]) -> list[tuple[str, list[str]]]:
    """`memplug run` on mimalloc by symbol name, twice: the manifest as
    shipped (headerless) and without its `usable_size` line (header path);
    each checked first to run on the path its name says."""
    src = (ROOT / "examples/manifests/mimalloc.memplug.toml").read_text()
    runs = []
    for way, text, want in [
        ("headerless", src, 1),
        ("header path", "".join(l for l in src.splitlines(True) if not l.startswith("usable_size")), 0),
    ]:
        manifest_dir = tmp / f"mimalloc-{way.replace(' ', '-')}"
        manifest_dir.mkdir(exist_ok=True)
        (manifest_dir / "mimalloc.memplug.toml").write_text(text)
        run = [memplug, "run", "--plugin-path", str(manifest_dir), "--handler", "mimalloc"]
        report = tmp / "mimalloc-report.json"
        p = subprocess.run(run + ["--report-json", str(report), "--", "true"], env=env, capture_output=True)
        got = json.loads(report.read_text())["heap"]["counts"].get("headerless") if p.returncode == 0 else None
        if got != want:
            sys.exit(f"memplug run on the mimalloc manifest ({way}): exit {p.returncode}, headerless {got}, "
                     f"not {want}: {p.stderr.decode(errors='replace')[-2000:]}")
        shipped = "as shipped" if want else "without usable_size"
        runs.append((f"memplug run --handler mimalloc (manifest {shipped}: {way})", run + ["--"]))
    return runs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--memplug", help="the memplug executable (release build)")
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--quick", action="store_true", help="small sizes (CI)")
    ap.add_argument("--instructions", action="store_true",
                    help="count instructions under callgrind instead of timing (the acceptance programs)")
    ap.add_argument("--short-factor", type=int, default=5, metavar="K",
                    help="the Python program's tables run K times the rounds (default 5)")
    ap.add_argument("--acceptance", action="store_true", help="only the tables with a 1.02 goal (system, mimalloc)")
    ap.add_argument("--guard", action="store_true", help="only the guard tables (against memcheck; sampling)")
    ap.add_argument("--stacks", action="store_true",
                    help="only the stack tables: guard:sample=1000 with allocation stacks; tracking vs heaptrack on cc1")
    ap.add_argument("--guard-sampling", action="store_true",
                    help="with --stacks: only the guard:sample=1000 table, not tracking vs heaptrack")
    ap.add_argument("--profile", action="store_true",
                    help="only the heap profile table: memplug run --profile at the default rate on system")
    ap.add_argument("--sequential", action="store_true", help="run the variants one after another, never paired")
    ap.add_argument("--write-c-file", type=Path, metavar="FILE", help="only write the large C file to FILE")
    ap.add_argument("--lines", type=int, help="the generated C file's lines (default 100 000; 3 000 with --quick)")
    ap.add_argument("--cc1-lines", type=int, metavar="N",
                    help="the lines of the file cc1 compiles in the tracking vs heaptrack table (default 15 000, "
                         "about 4 s of cc1 -O1; the --lines of --quick with --quick)")
    a = ap.parse_args()
    if a.write_c_file:
        large_c_file(a.write_c_file, a.lines or 100_000)
        return
    if not a.memplug:
        ap.error("--memplug is required")
    global PAIRED, QUICK
    PAIRED = not a.sequential
    QUICK = a.quick
    memplug = str(Path(a.memplug).resolve())
    plugins = str(Path(memplug).parent)
    python = subprocess.run(
        ["python3", "-c", "import sys; print(sys.executable)"], capture_output=True, text=True, check=True
    ).stdout.strip()  # the interpreter itself, not a wrapper script (pyenv's shim)
    cc = shutil.which(os.environ.get("CC", "cc")) or "cc"
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD" and not k.startswith("MEMPLUG_RUN_")}
    run = [memplug, "run", "--plugin-path", plugins, "--plugin-path", str(ROOT / "examples/manifests")]
    with tempfile.TemporaryDirectory() as tmp:
        big = Path(tmp) / "large.c"
        lines = a.lines or (3_000 if a.quick else 10_000 if a.instructions else 100_000)
        large_c_file(big, lines)
        gcc = shutil.which("gcc") or cc
        compile_big = [gcc, "-O2", "-c", str(big), "-o", str(Path(tmp) / "large.o")]
        # The Python program takes well under a second: it gets more rounds.
        programs = [
            (f"python3 -c: a dict of {'20 000' if a.quick else '100 000'} lists built and dropped",
             [python, "-c", dict_program(20_000 if a.quick else 100_000)], a.rounds * a.short_factor),
            (f"gcc -O2 -c: a generated C file of {lines:_} lines".replace("_", " "), compile_big, a.rounds),
        ]
        if a.instructions:
            mi = next((p for p in MIMALLOC if Path(p).exists()), None)
            head = mimalloc_runs(memplug, Path(tmp), env)[0] if mi else None
            for what, argv, _ in programs:
                instruction_table(
                    f"memplug run on system: {what}",
                    [("alone", [], argv, env),
                     ("memplug run --handler system", run + ["--handler", "system", "--"], argv, env)],
                    Path(tmp), "")
                if mi and head:
                    instruction_table(
                        f"mimalloc by symbol name vs preloaded: {what}",
                        [("LD_PRELOAD=libmimalloc.so.2", [], argv, {**env, "LD_PRELOAD": mi}),
                         (head[0], head[1], argv, env)],
                        Path(tmp), "")
            if not mi:
                print("mimalloc tables SKIPPED: libmimalloc.so.2 is not installed (apt-get install libmimalloc2.0)\n")
            return
        cc1_lines = a.cc1_lines or (lines if a.quick else 15_000)
        if a.stacks:
            stack_tables(run, compile_big, gcc, Path(tmp), env, max(1, a.rounds // 3), lines, cc1_lines,
                         a.guard_sampling)
            return
        if a.profile:
            profile_table(run, compile_big, Path(tmp), env, a.rounds, lines)
            return
        for what, argv, rounds in programs if not a.guard else []:
            table(
                f"memplug run on system: {what}",
                [
                    ("alone", argv, env),
                    ("memplug run --handler system", run + ["--handler", "system", "--"] + argv, env),
                ],
                rounds,
                "memplug run --handler system within 1.02 of the program alone (CPU time)",
            )
        mi = next((p for p in MIMALLOC if Path(p).exists()), None)
        if a.guard:
            pass
        elif mi is None:
            print("mimalloc tables SKIPPED: libmimalloc.so.2 is not installed (apt-get install libmimalloc2.0)\n")
        else:
            runs = mimalloc_runs(memplug, Path(tmp), env)
            for what, argv, rounds in programs:
                table(
                    f"mimalloc by symbol name vs preloaded: {what}",
                    [("LD_PRELOAD=libmimalloc.so.2", argv, {**env, "LD_PRELOAD": mi})]
                    + [(name, prefix + argv, env) for name, prefix in runs],
                    rounds,
                    "the headerless run within 1.02 of LD_PRELOAD=libmimalloc.so.2 (CPU time and max RSS)",
                )
        if a.acceptance:
            return
        small = [python, "-c", dict_program(2_000 if a.quick else 10_000)]
        if shutil.which("valgrind") is None:
            print("guard vs valgrind SKIPPED: valgrind is not installed\n")
        else:
            table(
                f"guard vs valgrind memcheck: python3 -c, a dict of {'2 000' if a.quick else '10 000'} lists",
                [
                    ("valgrind --tool=memcheck", ["valgrind", "-q", "--tool=memcheck"] + small, env),
                    ("memplug run --handler guard", run + ["--handler", "guard", "--"] + small, env),
                    ("alone", small, env),
                ],
                max(1, a.rounds // 3),
                "",
            )
        stack_tables(run, compile_big, gcc, Path(tmp), env, max(1, a.rounds // 3), lines, cc1_lines)


def profile_table(run: list[str], compile_big: list[str], tmp: Path, env: dict[str, str], rounds: int,
                  lines: int) -> None:
    """`memplug run --profile` at the default rate (one sample per 512 KiB
    allocated on average) on `system`, the large compile: the profile of
    gcc, cc1 and as written and their flame graphs drawn, all in the CPU
    time of `memplug run`."""
    size = f"{lines:_}".replace("_", " ")
    profile = str(tmp / "heap.pb.gz")
    table(
        f"a sampled heap profile on system: gcc -O2 -c, a generated C file of {size} lines",
        [
            ("alone", compile_big, env),
            ("memplug run --handler system", run + ["--handler", "system", "--"] + compile_big, env),
            ("memplug run --handler system --profile", run + ["--handler", "system", "--profile", profile, "--"]
             + compile_big, env),
        ],
        rounds,
        "memplug run --handler system --profile (one sample per 512 KiB on average) within 1.03 of the compile "
        "alone (CPU time)",
    )


def stack_tables(run: list[str], compile_big: list[str], gcc: str, tmp: Path, env: dict[str, str],
                 rounds: int, lines: int, cc1_lines: int, guard_only: bool = False) -> None:
    """guard:sample=1000 with allocation stacks on the large compile; and,
    unless `guard_only`, tracking recording a stack for every block next to
    heaptrack, on cc1 run directly on the preprocessed generated file of
    `cc1_lines` lines (heaptrack follows no child)."""
    size = f"{lines:_}".replace("_", " ")
    table(
        f"guard sampling one allocation in 1000, with allocation stacks: gcc -O2 -c, a generated C file of {size} lines",
        [
            ("alone", compile_big, env),
            ("memplug run --handler guard:sample=1000", run + ["--handler", "guard:sample=1000", "--"] + compile_big,
             env),
            ("memplug run --handler guard:sample=1000,stack_depth=0",
             run + ["--handler", "guard:sample=1000,stack_depth=0", "--"] + compile_big, env),
        ],
        rounds,
        "memplug run --handler guard:sample=1000 (stacks of 32 frames) within 1.10 of the compile alone (CPU time)",
    )
    if guard_only:
        return
    cc1 = subprocess.run([gcc, "-print-prog-name=cc1"], capture_output=True, text=True).stdout.strip()
    heaptrack = shutil.which("heaptrack")
    if not cc1 or not Path(cc1).exists():
        print("tracking vs heaptrack SKIPPED: gcc's cc1 was not found\n")
        return
    if heaptrack is None:
        print("tracking vs heaptrack SKIPPED: heaptrack is not installed (apt-get install heaptrack)\n")
        return
    src, pre = tmp / "cc1.c", tmp / "cc1.i"
    large_c_file(src, cc1_lines)
    subprocess.run([gcc, "-E", str(src), "-o", str(pre)], check=True)
    compile_cc1 = [cc1, "-quiet", "-O1", str(pre), "-o", str(tmp / "cc1.s")]
    size = f"{cc1_lines:_}".replace("_", " ")
    table(
        f"tracking, a stack for every block, vs heaptrack: cc1 -O1 on the preprocessed generated file of {size} lines",
        [
            ("alone", compile_cc1, env),
            ("heaptrack", [heaptrack, "-o", str(tmp / "heaptrack.%p")] + compile_cc1, env),
            ("memplug run --handler tracking", run + ["--handler", "tracking", "--"] + compile_cc1, env),
            ("memplug run --handler tracking:stack_depth=0", run + ["--handler", "tracking:stack_depth=0", "--"]
             + compile_cc1, env),
        ],
        rounds,
        "memplug run --handler tracking (stacks of 32 frames) at most heaptrack's CPU time",
    )


if __name__ == "__main__":
    main()
