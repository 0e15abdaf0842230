#!/usr/bin/env bash
# Every test, in one command, on a fresh machine too:
#   0. what the tests need: C and C++ compilers, valgrind, the system allocators
#      mimalloc, tcmalloc and jemalloc (loaded by symbol name), Python's venv
#      module — installed with apt-get when run as root; otherwise the exact
#      install line is printed and nothing runs (scripts/need-packages.sh);
#   1. the Rust workspace (cargo test --workspace), the guide's Rust snippets
#      included;
#   2. the thread stress test under valgrind (scripts/valgrind-stress.sh) and
#      the slow tests marked #[ignore] (gcc -O2 of 100 000 lines on sampling
#      guard: about two minutes);
#   3. the Python package, then NumPy's own suite through the bridge
#      (scripts/python-tests.sh; PyPI must be reachable), on the system's
#      Python and then on a free-threaded CPython 3.13 with the GIL off,
#      built from Debian's source package once per machine and cached
#      (scripts/python-ft-tests.sh, scripts/ft-python.sh: minutes the
#      first time).
#
#   scripts/test-all.sh            # everything
#   scripts/test-all.sh --quick    # without NumPy's suite, valgrind and the slow tests
set -euo pipefail
cd "$(dirname "$0")/.."

quick=0
[[ "${1:-}" == "--quick" ]] && quick=1

echo "== what the tests need"
# make and the headers are for the free-threaded CPython (scripts/ft-python.sh):
# pip needs ssl and zlib, NumPy's tests ctypes (libffi), bz2, lzma and sqlite3.
need=(gcc=cmd:cc g++=cmd:g++ libc6-dev valgrind=cmd:valgrind make=cmd:make
    libssl-dev zlib1g-dev libffi-dev libbz2-dev liblzma-dev libsqlite3-dev uuid-dev
    libmimalloc2.0=lib:libmimalloc.so.2 libtcmalloc-minimal4=lib:libtcmalloc_minimal.so.4
    libjemalloc2=lib:libjemalloc.so.2 libunwind8=lib:libunwind.so.8)
python=${PYTHON:-python3}
if ! command -v "$python" >/dev/null 2>&1; then
    need+=(python3 python3-venv python3-dev)
elif ! "$python" -c 'import ensurepip, venv' >/dev/null 2>&1; then
    # Debian's python3 needs python3-venv for `python3 -m venv` (a pyenv or
    # python.org build has it), and python3-dev to link the bridge's tests.
    need+=(python3-venv python3-dev)
fi
scripts/need-packages.sh "${need[@]}"
for so in libmimalloc.so.2 libtcmalloc_minimal.so.4 libjemalloc.so.2; do
    /sbin/ldconfig -p | grep -F "$so" >/dev/null || { echo "test-all: $so is still missing" >&2; exit 1; }
done
command -v cargo >/dev/null || { echo "test-all: cargo is not on PATH (install Rust: https://rustup.rs)" >&2; exit 1; }
echo "   $(cc --version | head -n 1); $("$python" --version); $(cargo --version)"

echo "== cargo test --workspace"
cargo test --workspace

if ((quick)); then
    echo "== valgrind stress and the slow tests skipped (--quick)"
else
    echo "== thread stress test under valgrind"
    scripts/valgrind-stress.sh
    echo "== the slow tests (#[ignore]d in a plain cargo test)"
    cargo test -p memplug --test guard_scale -- --ignored
fi

scripts/python-tests.sh "$@"
