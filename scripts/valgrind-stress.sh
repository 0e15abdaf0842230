#!/usr/bin/env bash
# Run the thread stress test (tests/thread_stress.rs) under valgrind's
# memcheck: build the test binary (debug profile), then run it with
# --error-exitcode=1, so that any invalid read or write, use of
# uninitialised memory or bad free in the host, the arena plugin or the
# test fails the run.
#
#   scripts/valgrind-stress.sh              # 2 000 operations per thread
#   MEMPLUG_STRESS_OPS=10000 scripts/valgrind-stress.sh
#
# Valgrind runs one thread at a time and about 30-50x slower, hence fewer
# operations than the 10 000 of a plain `cargo test`, and a long watchdog.
# Exit status: valgrind's (1 on any error) or the tests' own.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v valgrind >/dev/null 2>&1; then
    echo "valgrind-stress: valgrind is not installed (apt-get install valgrind)" >&2
    exit 2
fi

echo "== building the stress test"
exe=$(cargo test --test thread_stress --no-run --message-format=json |
    sed -n 's/.*"executable":"\([^"]*thread_stress[^"]*\)".*/\1/p' | tail -n 1)
if [[ -z "$exe" || ! -x "$exe" ]]; then
    echo "valgrind-stress: could not find the thread_stress test binary" >&2
    exit 2
fi
echo "   $exe"

export MEMPLUG_STRESS_OPS="${MEMPLUG_STRESS_OPS:-2000}"
export MEMPLUG_WATCHDOG_SECS="${MEMPLUG_WATCHDOG_SECS:-3600}"
echo "== valgrind ($(valgrind --version)), ${MEMPLUG_STRESS_OPS} operations per thread"
start=$SECONDS
# --fair-sched: valgrind serialises threads; give each its turn so that
# threads waiting on a handler's lock do not starve the one holding it.
# tests/valgrind.supp: libunwind's checks of an address (guard and tracking
# record allocation stacks) and the worker's prctl, which memcheck misreads.
valgrind --error-exitcode=1 --fair-sched=yes --track-origins=yes --num-callers=30 \
    --suppressions=tests/valgrind.supp "$exe" --test-threads=1
echo "== valgrind-stress: no errors ($((SECONDS - start)) s)"
