#!/usr/bin/env bash
# The Python environment the tests and benchmarks use: a virtual environment
# with numpy, pytest, hypothesis and maturin from PyPI (and numpy-allocator, for
# the NumPy benchmark), and memplug built
# from python/ and installed into it. Prints nothing else on success but
# progress lines; the environment's path is $MEMPLUG_VENV (default
# target/py-venv).
#
#   scripts/py-env.sh            # make or update it, (re)install memplug
#   scripts/py-env.sh --reuse    # keep an installed memplug as it is
#   PYTHON=python3.12 scripts/py-env.sh
#   PYTHON=$(scripts/ft-python.sh) MEMPLUG_VENV=target/py-venv-ft scripts/py-env.sh
#                                # a free-threaded one (memplug built as a
#                                # cp313t extension, without the stable ABI)
#
# Needs python3 with the venv module (Debian: python3-venv; scripts/test-all.sh
# installs it), cargo and cc (the bundled plugins are built into the wheel).
set -euo pipefail
cd "$(dirname "$0")/.."

reuse=0
[[ "${1:-}" == "--reuse" ]] && reuse=1
venv=${MEMPLUG_VENV:-target/py-venv}
python=${PYTHON:-python3}

echo "== python: virtual environment $venv ($(date +%T))"
# A virtual environment runs the interpreter it was made with: one made
# with another (an earlier build of the free-threaded one, whose cache
# directory is keyed by how it was built) is made afresh.
real_exe='import os, sys; print(os.path.realpath(getattr(sys, "_base_executable", sys.executable)))'
if [[ -e "$venv" ]] && [[ "$("$venv/bin/python" -c "$real_exe" 2>/dev/null)" != "$("$python" -c "$real_exe")" ]]; then
    echo "   made with another interpreter than $python: made afresh"
    rm -rf "$venv"
fi
if [[ ! -x "$venv/bin/python" ]]; then
    "$python" -m venv "$venv"
fi
venv=$(cd "$venv" && pwd)
# numpy-allocator, pinned: the other NumPy handler python/bench/numpy_bridge.py
# compares with (a C extension; optional: the benchmark leaves it out without).
numpy_allocator() {
    # Not on a free-threaded interpreter: a C extension that does not declare
    # itself free-threading-safe turns the GIL back on (and it has no cp313t
    # wheel); its benchmark rows are the default build's.
    if "$venv/bin/python" -c 'import sys, sysconfig; sys.exit(sysconfig.get_config_var("Py_GIL_DISABLED") != 1)'; then
        return 0
    fi
    "$venv/bin/python" -c 'import numpy_allocator' >/dev/null 2>&1 ||
        "$venv/bin/python" -m pip install -q numpy-allocator==1.2.1 ||
        echo "   numpy-allocator 1.2.1 did not install: the NumPy benchmark will leave it out" >&2
}
if ((reuse)) && "$venv/bin/python" -c 'import memplug, numpy' >/dev/null 2>&1; then
    numpy_allocator
    exit 0
fi
# Installed once per environment (asking PyPI again costs about a minute
# on a busy machine, twice per test run): remove the environment to take
# newer releases.
if ! "$venv/bin/python" -c 'import numpy, pytest, hypothesis, maturin' >/dev/null 2>&1; then
    "$venv/bin/python" -m pip install -q --upgrade pip
    # NumPy from a wheel only, and the others preferably: the newest release
    # may have none for this interpreter (NumPy 2.5 and hypothesis' Rust-built
    # releases have no cp313t wheel; hypothesis' build then fails), and a
    # source build of NumPy takes many minutes. pip then takes the newest
    # release that has one.
    "$venv/bin/python" -m pip install -q --prefer-binary --only-binary numpy numpy pytest hypothesis maturin
fi
numpy_allocator
"$venv/bin/python" -c 'import numpy, sys; print("   python", sys.version.split()[0], "numpy", numpy.__version__)'

echo "== python: pip install ./python (plugins + extension module) ($(date +%T))"
start=$SECONDS
build_args=()
if "$venv/bin/python" -c 'import sys, sysconfig; sys.exit(sysconfig.get_config_var("Py_GIL_DISABLED") != 1)'; then
    # A free-threaded CPython has no stable ABI: the extension is built for
    # this version (cp313t), without the abi3 feature.
    build_args=(--config-settings "maturin.build-args=--no-default-features --features extension-module")
fi
"$venv/bin/python" -m pip install -q --force-reinstall --no-deps "${build_args[@]}" ./python
echo "   built and installed in $((SECONDS - start)) s"
