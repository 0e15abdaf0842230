#!/usr/bin/env bash
# Instructions per NumPy create+delete, NumPy's default handler vs the bridge
# with the `system` plugin (and numpy-allocator over libc, if installed):
# deterministic, where the time of a 130 ns loop is not (valgrind counts the
# instructions; two loop lengths are run and the difference divided, so the
# interpreter's start-up cancels out).
#
#   python/bench/instructions.sh [PYTHON] [empty1m|mixed1m|empty8|ones64]
#
# empty1m: np.empty(1 MiB, uint8); mixed1m: the same, of 1 MiB + 64 k bytes for
# k = 0..1023 in turn; empty8: np.empty(8); ones64: np.ones(64).
#
# PYTHON defaults to target/py-venv/bin/python (scripts/python-tests.sh --quick
# makes it). Needs valgrind. Takes about a minute.
set -euo pipefail
cd "$(dirname "$0")/../.."
python=${1:-target/py-venv/bin/python}
case=${2:-empty1m}
command -v valgrind >/dev/null || { echo "instructions.sh: valgrind is needed" >&2; exit 2; }

prog='
import os, sys, ctypes, ctypes.util
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
import numpy as np, memplug.numpy as mnp
variant, n, case = sys.argv[1], int(sys.argv[2]), sys.argv[3]
if variant == "numpy_allocator":
    import numpy_allocator
    libc = ctypes.CDLL(ctypes.util.find_library("c"))
    class libc_allocator(metaclass=numpy_allocator.type):
        _calloc_ = ctypes.addressof(libc.calloc)
        _free_ = ctypes.addressof(libc.free)
        _malloc_ = ctypes.addressof(libc.malloc)
        _realloc_ = ctypes.addressof(libc.realloc)
    ctx = libc_allocator
else:
    ctx = mnp.allocator(None if variant == "default" else variant)
empty, ones, u8 = np.empty, np.ones, np.uint8
with ctx:
    if case == "empty1m":
        for _ in range(n):
            empty(1 << 20, dtype=u8)
    elif case == "mixed1m":
        sizes = [(1 << 20) + 64 * k for k in range(1024)]
        for i in range(n):
            empty(sizes[i & 1023], dtype=u8)
    elif case == "ones64":
        for _ in range(n):
            ones(64)
    else:
        for _ in range(n):
            empty(8)
'

count() { # variant n -> instructions of the whole run
    PYTHONHASHSEED=0 valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file=/dev/null \
        "$python" -c "$prog" "$1" "$2" "$case" 2>&1 | awk '/I *refs:/ {gsub(",", "", $NF); print $NF}'
}

variants=(default system)
"$python" -c 'import numpy_allocator' 2>/dev/null && variants+=(numpy_allocator)
declare -A per_op
for variant in "${variants[@]}"; do
    a=$(count "$variant" 50000)
    b=$(count "$variant" 150000)
    per_op[$variant]=$(( (b - a) / 100000 ))
    echo "$case $variant: ${per_op[$variant]} instructions per create+delete"
done
echo "$case: the bridge adds $(( per_op[system] - per_op[default] ))"
