#!/usr/bin/env bash
# The Python package's tests: build and install `memplug` (python/) into a
# virtual environment, then run
#   1. the bridge crate's Rust unit tests (cargo test, linking libpython),
#   2. python/tests with pytest,
#   3. NumPy's own test_multiarray and test_numeric, with NumPy's default
#      handler, through `python -m memplug.numpy --handler tracking`, and
#      with an allocator made by `memplug.from_functions` of the C
#      library's functions (scripts/numpy-suite-created.py), each compared
#      with the default test by test (scripts/numpy-suite.py);
#   4. all of it again on a free-threaded CPython with the GIL off
#      (scripts/python-ft-tests.sh: the interpreter is built once per
#      machine and cached).
#
#   scripts/python-tests.sh                 # all four
#   scripts/python-tests.sh --quick         # without NumPy's suites
#   MEMPLUG_FREE_THREADED=0 scripts/python-tests.sh   # without step 4
#   MEMPLUG_VENV=DIR scripts/python-tests.sh  # venv location (default target/py-venv)
#   PYTHON=python3.12 scripts/python-tests.sh # the interpreter to make it with
#
# Needs python3 with the venv module, cargo, cc, and PyPI (numpy, pytest,
# hypothesis, maturin): scripts/test-all.sh makes sure of the first three.
# The environment is made by scripts/py-env.sh, whose `pip install ./python`
# builds the bundled plugins with cargo and packs them into the wheel.
set -euo pipefail
cd "$(dirname "$0")/.."

quick=0
[[ "${1:-}" == "--quick" ]] && quick=1
venv=${MEMPLUG_VENV:-target/py-venv}

step() { echo "== $* ($(date +%T))"; }

scripts/py-env.sh
venv=$(cd "$venv" && pwd)

step "python: bridge unit tests (cargo test)"
(cd python && PYO3_PYTHON="$venv/bin/python" cargo test --no-default-features -q)

step "python: pytest python/tests"
"$venv/bin/python" -m pytest -q -p no:cacheprovider --rootdir python python/tests

if ((quick)); then
    echo "== python: NumPy's suite skipped (--quick)"
else
    step "python: NumPy's own tests, default handler vs memplug tracking and a created allocator"
    start=$SECONDS
    "$venv/bin/python" scripts/numpy-suite.py --workdir target/numpy-suite
    echo "   NumPy suite comparison took $((SECONDS - start)) s"

    step "python: NumPy's own tests, the interpreter under memplug run --handler guard:sample=1000 (no heap error)"
    start=$SECONDS
    # target/debug/memplug finds the bundled plugins beside it, where `cargo
    # build` puts them (`cargo test` leaves them in target/debug/deps).
    cargo build --workspace --quiet
    "$venv/bin/python" scripts/numpy-suite.py --workdir target/numpy-suite-guard --runs interposed \
        --baseline target/numpy-suite/default.xml --memplug target/debug/memplug --run-handler guard:sample=1000
    echo "   NumPy suite under guard:sample=1000 took $((SECONDS - start)) s"
fi

if [[ "${MEMPLUG_FREE_THREADED:-1}" != 0 ]]; then
    scripts/python-ft-tests.sh "$@"
fi
