#!/usr/bin/env bash
# The workspace's tests under AddressSanitizer: the host library, its
# command, the bundled plugins (built as instrumented cdylibs and loaded by
# the tests) and the integration tests in tests/.
#
#   scripts/asan.sh                  # every test
#   scripts/asan.sh --test soundness # arguments go to `cargo test`
#                                    # (and replace the default targets)
#
# Nightly flags on the stable compiler (RUSTC_BOOTSTRAP); the explicit
# --target keeps build scripts and proc macros uninstrumented, and
# --export-dynamic lets the plugins the tests dlopen resolve the ASan
# runtime of the test executable. Doc tests are left out (rustdoc would
# need the same flags; they are small API examples the plain run covers).
#
# MEMPLUG_ASAN=1 tells the tests they run under ASan: a test that cannot
# work there returns early and prints why (none needs to today; the
# thread tests of tests/soundness.rs run fewer rounds).
set -euo pipefail
cd "$(dirname "$0")/.."

export RUSTC_BOOTSTRAP=1
export RUSTFLAGS="-Zsanitizer=address -Clink-arg=-Wl,--export-dynamic"
export MEMPLUG_ASAN=1
# Crash-isolation tests need their workers to die by the signal the plugin
# raised: ASan's own SEGV/abort handlers would turn it into an exit status.
# Leak detection is off: a handler's state (its core, its info, the
# validated copy of its header) is leaked on purpose for the rest of the
# process, and the tests make hundreds of handlers in registries they then
# drop, so LeakSanitizer finds that state unreachable. Its allocations sit
# inlined in their callers (`Box::new`), tests included, so suppressions by
# function cannot name them without hiding the loader's whole path.
# Tests of allocation failure ask for absurd sizes: malloc returns NULL, as
# libc's does, instead of ASan stopping the process.
export ASAN_OPTIONS="allocator_may_return_null=1:detect_leaks=0:handle_segv=0:handle_sigbus=0:handle_sigfpe=0:handle_abort=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
# Instrumented code runs 2-3x slower: more time before a watchdog fires.
export MEMPLUG_WATCHDOG_SECS="${MEMPLUG_WATCHDOG_SECS:-300}"

echo "== tests under AddressSanitizer (scripts/asan.sh)"
start=$SECONDS
# Arguments (e.g. `--test soundness`) choose the targets; else all of them.
targets=(--lib --bins --tests)
if (($#)); then targets=(); fi
# memplug-preload is left out: the interposer defines malloc and free itself,
# which is where AddressSanitizer's own runtime intercepts them (its test
# binary dies at start-up); its tests run in the ordinary suite.
cargo test --workspace --exclude memplug-preload --no-fail-fast --target x86_64-unknown-linux-gnu \
    --target-dir target/asan "${targets[@]}" "$@"
echo "== asan: clean ($((SECONDS - start)) s)"
