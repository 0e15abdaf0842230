#!/usr/bin/env bash
# The Python package's tests on a free-threaded CPython (3.13t, built with
# --disable-gil), with the GIL off:
#   0. the interpreter, built once per machine and cached
#      (scripts/ft-python.sh), and a virtual environment with it
#      (scripts/py-env.sh: NumPy's cp313t wheel from PyPI, memplug built
#      as a cp313t extension, without the stable ABI);
#   1. `import memplug, memplug.numpy` leaves the GIL off;
#   2. python/tests with pytest (conftest asserts before and after every
#      test that the GIL is off), test_parallel.py's stress and StringDType
#      tests among them. Steps 1 and 2 run without PYTHON_GIL set, so that
#      an extension module turning the GIL back on would show (PYTHON_GIL=0
#      would keep it off whatever is imported);
#   3. with PYTHON_GIL=0: NumPy's own test_multithreading and
#      test_stringdtype, then its core suite (test_multiarray,
#      test_numeric), with NumPy's default handler and through `python -m
#      memplug.numpy --handler tracking --all-threads`, compared test by
#      test (scripts/numpy-suite.py).
#
#   scripts/python-ft-tests.sh            # all of it
#   scripts/python-ft-tests.sh --quick    # without NumPy's suites
#   MEMPLUG_FT_VENV=DIR scripts/python-ft-tests.sh   # venv location (default target/py-venv-ft)
#
# scripts/python-tests.sh runs it after the default build's tests.
# Needs what scripts/ft-python.sh needs (apt-get, cc, make, the headers
# scripts/test-all.sh installs), cargo, and PyPI.
set -euo pipefail
cd "$(dirname "$0")/.."

quick=0
[[ "${1:-}" == "--quick" ]] && quick=1
venv=${MEMPLUG_FT_VENV:-target/py-venv-ft}

step() { echo "== python (free-threaded): $* ($(date +%T))"; }
begin=$SECONDS

step "the interpreter (scripts/ft-python.sh)"
python=$(scripts/ft-python.sh)
PYTHON=$python MEMPLUG_VENV=$venv scripts/py-env.sh
venv=$(cd "$venv" && pwd)
unset PYTHON_GIL

step "import memplug, memplug.numpy leaves the GIL off"
"$venv/bin/python" -W error::RuntimeWarning - <<'EOF'
import sys, sysconfig
assert sysconfig.get_config_var("Py_GIL_DISABLED") == 1, "not a free-threaded build"
import numpy, memplug, memplug.numpy
assert not sys._is_gil_enabled(), "the GIL is on after importing memplug and memplug.numpy"
print(f"   Python {sys.version.split()[0]} free-threaded, NumPy {numpy.__version__}, GIL off")
EOF

step "pytest python/tests"
"$venv/bin/python" -m pytest -q -p no:cacheprovider --rootdir python python/tests

if ((quick)); then
    echo "== python (free-threaded): NumPy's suites skipped (--quick); $((SECONDS - begin)) s"
    exit 0
fi

export PYTHON_GIL=0
step "NumPy's test_multithreading and test_stringdtype, default handler vs memplug tracking in every thread"
"$venv/bin/python" scripts/numpy-suite.py --workdir target/numpy-suite-ft/threads --runs bridged --all-threads \
    --modules numpy._core.tests.test_multithreading numpy._core.tests.test_stringdtype
step "NumPy's core suite, default handler vs memplug tracking in every thread"
"$venv/bin/python" scripts/numpy-suite.py --workdir target/numpy-suite-ft/core --runs bridged --all-threads
echo "== python (free-threaded): done in $((SECONDS - begin)) s"
