#!/usr/bin/env bash
# The workspace's tests under AddressSanitizer: the host library, its
# command, the bundled plugins (built as instrumented cdylibs and loaded by
# the tests) and the integration tests in tests/.
#
#   scripts/asan.sh                  # every test
#   scripts/asan.sh --test soundness # arguments go to `cargo test`
#
# Nightly flags on the stable compiler (RUSTC_BOOTSTRAP); the explicit
# --target keeps build scripts and proc macros uninstrumented, and
# --export-dynamic lets the plugins the tests dlopen resolve the ASan
# runtime of the test executable. Doc tests are left out (rustdoc would
# need the same flags; they are small API examples the plain run covers).
#
# MEMPLUG_ASAN=1 tells the few tests that cannot work under ASan to return
# early, each printing why (they measure RSS, or reserve more address
# space than ASan's shadow allows, or run valgrind).
set -euo pipefail
cd "$(dirname "$0")/.."

export RUSTC_BOOTSTRAP=1
export RUSTFLAGS="-Zsanitizer=address -Clink-arg=-Wl,--export-dynamic"
export MEMPLUG_ASAN=1
# Crash-isolation tests need their workers to die by the signal the plugin
# raised: ASan's own SEGV/abort handlers would turn it into an exit status.
# LeakSanitizer: the suppressions list the leaks that are meant (see there).
export ASAN_OPTIONS="handle_segv=0:handle_sigbus=0:handle_sigfpe=0:handle_abort=0:detect_odr_violation=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export LSAN_OPTIONS="suppressions=$PWD/scripts/lsan.supp:print_suppressions=0${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
# Instrumented code runs 2-3x slower: more time before a watchdog fires.
export MEMPLUG_WATCHDOG_SECS="${MEMPLUG_WATCHDOG_SECS:-300}"

echo "== tests under AddressSanitizer (scripts/asan.sh)"
start=$SECONDS
cargo test --workspace --target x86_64-unknown-linux-gnu --target-dir target/asan --lib --bins --tests "$@"
echo "== asan: clean ($((SECONDS - start)) s)"
