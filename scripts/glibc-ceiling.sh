#!/usr/bin/env bash
# The glibc a wheel needs, checked against a ceiling: every shared object in
# the wheel (the extension module and the bundled plugins) may need no glibc
# symbol version newer than the ceiling (default 2.17, manylinux2014's).
#
#   scripts/glibc-ceiling.sh WHEEL [CEILING]
#
# For each *.so, with `objdump`:
#  - its version references (`objdump -p`, "Version References") and its
#    versioned undefined symbols (`objdump -T`): none may be a GLIBC_x.y newer
#    than the ceiling (the dynamic loader refuses to load the file where the
#    C library lacks a version it references);
#  - its unversioned undefined symbols (`objdump -T`): each must be weak
#    (looked up at run time, null where the C library lacks it: Rust's
#    standard library does that for `statx`, `gettid`, ...) or the Python
#    interpreter's (`Py*`, `_Py*`). A strong unversioned one is a function the
#    linker's glibc (the ceiling's) did not have: it would fail to resolve on
#    an old system.
# Prints one line per file (its highest GLIBC version) and each offending
# symbol; exits 1 if there is one. Needs objdump (binutils; it reads x86_64
# and aarch64 files alike) and python3 (to unpack the wheel).
set -euo pipefail
wheel=${1:?usage: glibc-ceiling.sh WHEEL [CEILING]}
ceiling=${2:-2.17}
[[ -f "$wheel" ]] || { echo "glibc-ceiling: no file $wheel" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 -m zipfile -e "$wheel" "$tmp"

# Reads `objdump -p` and `objdump -T` of one file (as "P <line>" and
# "T <line>"); prints "max <version>" and one "bad <what>" line per offence.
judge='
function newer(v,   a, c, i, n) {
    n = split(v, a, "."); split(ceiling, c, ".")
    for (i = 1; i <= 3; i++) {
        if ((a[i] + 0) > (c[i] + 0)) return 1
        if ((a[i] + 0) < (c[i] + 0)) return 0
    }
    return 0
}
function later(v, w,   a, b, i) {
    split(v, a, "."); split(w, b, ".")
    for (i = 1; i <= 3; i++) {
        if ((a[i] + 0) != (b[i] + 0)) return (a[i] + 0) > (b[i] + 0)
    }
    return 0
}
function note(v) { if (max == "" || later(v, max)) max = v }
$1 == "P" && match($0, /GLIBC_[0-9][0-9.]*/) {
    v = substr($0, RSTART + 6, RLENGTH - 6); note(v)
    if (newer(v)) bad["version reference GLIBC_" v] = 1
    next
}
$1 == "T" && /\*UND\*/ {
    sym = $NF
    if (match($0, /GLIBC_[0-9][0-9.]*/)) {
        v = substr($0, RSTART + 6, RLENGTH - 6); note(v)
        if (newer(v)) bad[sym " (GLIBC_" v ")"] = 1
    } else if ($(NF - 1) !~ /^\(?[A-Z][A-Za-z0-9_]*_[0-9][0-9.]*\)?$/) {
        # Unversioned (not, say, GCC_3.0 of libgcc_s).
        # The flag letters between the address and *UND*: "w" is weak.
        flags = $0; sub(/^T [0-9a-f]+/, "", flags); sub(/\*UND\*.*/, "", flags)
        if (flags !~ /w/ && sym !~ /^_?Py/) bad[sym " (strong and unversioned: not in glibc " ceiling ")"] = 1
    }
}
END {
    print "max " (max == "" ? "none" : max)
    for (b in bad) print "bad " b
}'

status=0
count=0
while IFS= read -r -d '' so; do
    count=$((count + 1))
    verdict=$({ objdump -p "$so" | sed -n '/^Version References:/,/^$/p' | sed 's/^/P /'
        objdump -T "$so" | sed 's/^/T /'; } | awk -v ceiling="$ceiling" "$judge")
    rel=${so#"$tmp"/}
    echo "   $rel: GLIBC_$(sed -n 's/^max //p' <<<"$verdict") at most"
    if grep -q '^bad ' <<<"$verdict"; then
        status=1
        sed -n 's/^bad /     needs /p' <<<"$verdict" | sort
    fi
done < <(find "$tmp" -name '*.so' -print0 | sort -z)
((count > 0)) || { echo "glibc-ceiling: $(basename "$wheel") holds no shared object" >&2; exit 1; }
if ((status)); then
    echo "glibc-ceiling: FAILED: $(basename "$wheel") needs more than glibc $ceiling (see above)" >&2
    exit 1
fi
echo "   $count shared objects, none needs more than glibc $ceiling"
