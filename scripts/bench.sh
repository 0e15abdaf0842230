#!/usr/bin/env bash
# Every benchmark of record (docs/src/benchmarks.md), one after another, each
# printing the Markdown tables the page shows.
#
#   scripts/bench.sh            # the full run: the figures of record (about 25 minutes)
#   scripts/bench.sh --quick    # every table, fewer rounds and smaller sizes (CI; under a minute)
#
# Both build first (the workspace in release mode, the benches, and the
# Python environment if it is missing).
#
# Needs what scripts/test-all.sh installs: libmimalloc2.0 and
# libtcmalloc-minimal4 (allocators by symbol name), python3-venv (the NumPy
# benchmarks' environment, made by scripts/py-env.sh), what a free-threaded
# CPython's build needs (scripts/ft-python.sh) and valgrind (the
# instruction count, full run only; guard vs memcheck in `memplug run`'s
# section; the interposer's instructions per malloc+free pair, both runs). Runs every benchmark even if one fails,
# then exits 1 naming the ones that failed.
set -euo pipefail
cd "$(dirname "$0")/.."

quick=0
case "${1:-}" in
    --quick) quick=1 ;;
    "") ;;
    *) echo "usage: scripts/bench.sh [--quick]" >&2; exit 2 ;;
esac
# The number of rounds (or any setting): the full run's, or the quick run's.
pick() { if ((quick)); then echo "$2"; else echo "$1"; fi; }

target=${CARGO_TARGET_DIR:-target}
venv=${MEMPLUG_VENV:-$target/py-venv}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failed=()
begin=$SECONDS

if ((quick)); then
    echo "# memplug benchmarks: QUICK RUN (fewer rounds, smaller sizes)"
    echo
    echo "The figures of a quick run are NOT figures of record: it checks that every benchmark"
    echo "runs and prints its table. The figures of record are in docs/src/benchmarks.md (full run)."
else
    echo "# memplug benchmarks: full run"
fi
echo
echo "Machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), \
$(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo), \
$(sed -n 's/^PRETTY_NAME="\(.*\)"$/\1/p' /etc/os-release), $(rustc --version | cut -d' ' -f1-2), \
load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo

echo "== building (release: the workspace, then the benches)" >&2
cargo build --release --workspace --quiet
cargo bench --no-run --quiet

# section TITLE COMMAND...: run one benchmark under a heading, note a failure.
section() {
    local title=$1 t0=$SECONDS
    shift
    echo "## $title"
    echo
    echo "\$ $*"
    echo
    if "$@"; then
        echo "($((SECONDS - t0)) s)"
    else
        echo "FAILED: $title (exit $?)"
        failed+=("$title")
    fi
    echo
}

# cargo_bench NAME ROUNDS [CRITERION ARGS...]: one bench of benches/.
cargo_bench() {
    local name=$1 rounds=$2
    shift 2
    ROUNDS=$rounds cargo bench --quiet --bench "$name" -- "$@"
}

section "Dispatch: one 64-byte allocation + free" \
    cargo_bench dispatch_interleaved "$(pick 300 30)"
section "Allocators by symbol name vs the system plugin" \
    cargo_bench allocators "$(pick 200 20)"

# The arena: criterion's group, then the interleaved summary (the figures of record).
arena_args=()
((quick)) && arena_args=(--warm-up-time 0.1 --measurement-time 0.3 --sample-size 10)
arena() {
    cargo_bench arena "$(pick 400 40)" "${arena_args[@]}" &&
        python3 scripts/bench_tables.py criterion "$target/criterion/arena_alloc_free_64_x1000" 1000
}
section "Locking a handler that is not thread-safe: the arena" arena

section "Crash isolation: loading a plugin directly vs probed in a worker" \
    cargo_bench probe "$(pick 30 5)"
section "The abi_stable layout check of Rust plugins" \
    cargo_bench layout "$(pick 100 10)"
section "The verdict cache, cold vs warm" \
    cargo_bench cache "$(pick 10 2)"
section "Huge pages: hugepage vs system on a 256 MiB array" \
    cargo_bench hugepage "$(pick 15 3)"
section "What guard costs" \
    cargo_bench guard "$(pick 60 5)"
section "Shared memory: shm vs system, and handing a block over" \
    cargo_bench shm "$(pick 60 5)"
section "Rust collections on a Handler vs the global allocator" \
    cargo_bench collections "$(pick 60 5)"
global_alloc() {
    ROUNDS=$(pick 31 3) ITERATIONS=$(pick 100 10) cargo bench --quiet --bench global
}
section "A global allocator chosen at start-up: Global vs std::alloc::System" global_alloc

# memplug bench: the four plugins of the page's table (default_allocator is the baseline).
memplug_bench() {
    local quick_flag=()
    ((quick)) && quick_flag=(--quick)
    "$target/release/memplug" bench "$target/release" \
        --handler system --handler aligned --handler tracking --handler arena "${quick_flag[@]}"
}
section "memplug bench" memplug_bench

# The NumPy bridge: the Python environment first.
if scripts/py-env.sh --reuse >&2; then
    py="$venv/bin/python"
    numpy_bridge() {
        "$py" python/bench/numpy_bridge.py --rounds "$(pick 100 5)" --json "$tmp/numpy.json" >&2 &&
            python3 scripts/bench_tables.py numpy "$tmp/numpy.json"
    }
    section "The NumPy bridge vs NumPy's default handler" numpy_bridge
    share() {
        "$py" python/bench/share.py --rounds "$(pick 30 2)" --mib "$(pick 256 64)" --json "$tmp/share.json" >&2 &&
            python3 scripts/bench_tables.py share "$tmp/share.json"
    }
    section "Handing a NumPy array to worker processes" share
    if ((quick)); then
        echo "## Instructions per NumPy create+delete"
        echo
        echo "SKIPPED in a quick run (valgrind: about 3 minutes); scripts/bench.sh without --quick runs it:"
        echo "python/bench/instructions.sh $py CASE, for CASE in empty1m mixed1m empty8 ones64"
        echo
    else
        instructions() {
            python/bench/instructions.sh "$py" empty1m | tee "$tmp/empty1m.txt" >&2 &&
                python/bench/instructions.sh "$py" mixed1m | tee "$tmp/mixed1m.txt" >&2 &&
                python/bench/instructions.sh "$py" empty8 | tee "$tmp/empty8.txt" >&2 &&
                python/bench/instructions.sh "$py" ones64 | tee "$tmp/ones64.txt" >&2 &&
                python3 scripts/bench_tables.py instructions "$tmp/empty1m.txt" "$tmp/mixed1m.txt" "$tmp/empty8.txt" "$tmp/ones64.txt"
        }
        section "Instructions per NumPy create+delete" instructions
    fi
else
    echo "FAILED: the Python environment (scripts/py-env.sh); the NumPy benchmarks did not run"
    failed+=("the Python environment")
fi

# The NumPy bridge on a free-threaded CPython (the GIL off): np.empty(8)
# and np.ones(64) through `system` vs NumPy's default, and how array
# creation scales from 1 thread to 2 with each. The interpreter is
# scripts/ft-python.sh's (built once per machine and cached), its venv
# scripts/python-ft-tests.sh's.
ft_venv=${MEMPLUG_FT_VENV:-$target/py-venv-ft}
if ft_python=$(scripts/ft-python.sh) && PYTHON=$ft_python MEMPLUG_VENV=$ft_venv scripts/py-env.sh --reuse >&2; then
    ft_py="$ft_venv/bin/python"
    numpy_bridge_ft() {
        PYTHON_GIL=0 "$ft_py" python/bench/numpy_bridge.py --rounds "$(pick 100 5)" --cases empty8 ones64 \
            --variants system --no-mimalloc --json "$tmp/numpy-ft.json" >&2 &&
            python3 scripts/bench_tables.py numpy "$tmp/numpy-ft.json"
    }
    section "The NumPy bridge vs NumPy's default handler, free-threaded Python" numpy_bridge_ft
    scaling_ft() {
        PYTHON_GIL=0 "$ft_py" python/bench/scaling.py --rounds "$(pick 60 3)" --scale "$(pick 1 0.3)" \
            --json "$tmp/scaling.json" >&2 &&
            python3 scripts/bench_tables.py scaling "$tmp/scaling.json"
    }
    section "Array creation on 2 threads over 1, free-threaded Python" scaling_ft
else
    echo "FAILED: the free-threaded Python environment (scripts/ft-python.sh, scripts/py-env.sh); its benchmarks did not run"
    failed+=("the free-threaded Python environment")
fi

# memplug run: real programs on the interposer, side by side with the
# program alone, with mimalloc preloaded directly, and guard with valgrind.
run_programs() {
    local quick_flag=()
    ((quick)) && quick_flag=(--quick)
    python3 scripts/bench_run.py --memplug "$target/release/memplug" --rounds "$(pick 9 3)" "${quick_flag[@]}"
}
section "memplug run: real programs on the interposer" run_programs

# Stacks: guard:sample=1000 with allocation stacks on the large compile;
# tracking recording a stack for every block next to heaptrack on cc1 run
# directly (heaptrack follows no child process). Needs heaptrack
# (scripts/need-packages.sh installs it) and libunwind8 (memplug's stacks
# use libunwind when it is there, libgcc's unwinder otherwise).
run_stacks() {
    scripts/need-packages.sh heaptrack=cmd:heaptrack libunwind8=lib:libunwind.so.8 || return 1
    local quick_flag=()
    ((quick)) && quick_flag=(--quick)
    python3 scripts/bench_run.py --memplug "$target/release/memplug" --stacks --rounds "$(pick 9 3)" "${quick_flag[@]}"
}
section "memplug run: heap stacks (guard sampling, tracking vs heaptrack)" run_stacks

# A sampled heap profile (`memplug run --profile`, the default rate) on
# system, the large compile, against the compile alone. Sampled stacks use
# libunwind when it is there (libunwind8), libgcc's unwinder otherwise.
run_profile() {
    scripts/need-packages.sh libunwind8=lib:libunwind.so.8 || return 1
    local quick_flag=()
    ((quick)) && quick_flag=(--quick)
    python3 scripts/bench_run.py --memplug "$target/release/memplug" --profile --rounds "$(pick 9 3)" "${quick_flag[@]}"
}
section "memplug run: a sampled heap profile" run_profile

# One stack captured and stored, 32 frames of a 40-frame chain through libc,
# by libunwind (cached rules) and by libgcc's unwinder (the fallback).
run_capture() {
    local rounds
    rounds=$(pick 20 3)
    for unwinder in libunwind libgcc; do
        MEMPLUG_UNWINDER=$unwinder cargo bench -q -p memplug-stacks --bench capture -- \
            --warm-up-time 1 --measurement-time "$rounds" 2>&1 | grep -E "^capture|time:"
    done
}
section "stacks: one capture" run_capture

# memplug run: the interposer's instructions per malloc+free pair, headerless
# and with headers, over mimalloc preloaded plainly (valgrind's callgrind).
run_instructions() {
    scripts/bench_instructions.sh "$target/release/memplug" "$(pick 1000000 100000)"
}
section "memplug run: instructions per malloc+free pair" run_instructions

# memplug run: the instructions the interposer adds to whole programs (the
# acceptance programs under callgrind, every process counted; gcc on a
# 10 000-line file, 1 000 in the quick run).
run_program_instructions() {
    if ! command -v valgrind >/dev/null; then
        echo "SKIPPED: valgrind is not installed"
        return 0
    fi
    python3 scripts/bench_run.py --memplug "$target/release/memplug" --instructions --lines "$(pick 10000 1000)" \
        $( ((quick)) && echo --quick)
}
section "memplug run: instructions added to whole programs" run_program_instructions

# ---- libmemplug: the C API and the C++ layer (capi/) ----------------------
# One allocation + free through the C API as C calls it (a loop compiled
# from capi/bench/capi_loop.c against memplug_host.h when the bench runs)
# vs the Rust Handler and libc (benches/capi.rs, goal: the C API within
# 1.02x of the Handler of the same run), and
# std::pmr::vector pushed to 1e6 on memplug::memory_resource(system) vs
# std::allocator (capi/bench/pmr_bench.cpp, goal: at most 1.05x).
capi_dispatch() {
    cargo_bench capi "$(pick 300 30)"
}
capi_pmr() {
    local lib=$tmp/capi-lib
    mkdir -p "$lib"
    cp "$target/release/libmemplug_c.so" "$lib/libmemplug.so.0"
    ln -sf libmemplug.so.0 "$lib/libmemplug.so"
    c++ -std=c++17 -O2 -Iabi/include -Icapi/include capi/bench/pmr_bench.cpp -L"$lib" -lmemplug \
        -Wl,-rpath,"$lib" -o "$tmp/pmr_bench"
    MEMPLUG_CACHE=off "$tmp/pmr_bench" "$target/release/libmemplug_system.so" "$(pick 41 7)"
}
section "libmemplug: one allocation + free through the C API" capi_dispatch
section "libmemplug: std::pmr::vector on memplug::memory_resource vs std::allocator" capi_pmr
# ---- end of the libmemplug section -----------------------------------------

echo "Total: $((SECONDS - begin)) s$( ((quick)) && echo " (quick run: not figures of record)")"
if ((${#failed[@]})); then
    printf 'FAILED: %s\n' "${failed[@]}" >&2
    exit 1
fi
