#!/usr/bin/env bash
# Instructions the interposer adds per malloc+free pair (scripts/bench.sh's
# "memplug run: instructions per malloc+free" section).
#
#   scripts/bench_instructions.sh MEMPLUG [PAIRS]
#
# MEMPLUG is the release `memplug` (its directory holds
# libmemplug_preload.so). A fixed C loop — PAIRS times malloc(64)+free, and
# PAIRS times a mix of 8 sizes from 16 to 4000 bytes — is counted under
# `valgrind --tool=callgrind` with 0 and with PAIRS pairs; the difference
# over PAIRS is the instructions per pair, start-up left out. Three ways:
#   - LD_PRELOAD=libmimalloc.so.2: the baseline;
#   - `memplug run` on the mimalloc manifest of examples/manifests as
#     shipped (it names its usable-size function, mi_usable_size): the
#     interposer's headerless path;
#   - `memplug run` on the same manifest without its `usable_size` line:
#     the header path.
# The same mimalloc serves all three, so the difference to the baseline is
# the interposer's own cost.
set -euo pipefail

memplug=$(realpath "$1")
pairs=${2:-1000000}
preload=${MEMPLUG_PRELOAD:-$(dirname "$memplug")/libmemplug_preload.so}
root=$(cd "$(dirname "$0")/.." && pwd)
mi=$(ls /lib/x86_64-linux-gnu/libmimalloc.so.2 /usr/lib/libmimalloc.so.2 2>/dev/null | head -1 || true)
if [[ -z $mi ]] || ! command -v valgrind >/dev/null; then
    echo "SKIPPED: needs libmimalloc.so.2 (apt-get install libmimalloc2.0) and valgrind"
    exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

cat >"$tmp/loop.c" <<'EOF'
#include <stdlib.h>
#include <string.h>
int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 0;
    int mix = argc > 2 && strcmp(argv[2], "mix") == 0;
    static const size_t sizes[8] = {16, 24, 64, 100, 200, 512, 1000, 4000};
    for (long i = 0; i < n; i++) {
        void *p = malloc(mix ? sizes[i & 7] : 64);
        __asm__ volatile("" : : "r"(p) : "memory");
        free(p);
    }
    return 0;
}
EOF
cc -O2 -o "$tmp/loop" "$tmp/loop.c"

# The manifests: as shipped (headerless), and without the usable-size
# function (header path).
mkdir -p "$tmp/header" "$tmp/headerless"
cp "$root/examples/manifests/mimalloc.memplug.toml" "$tmp/headerless/"
grep -v '^usable_size *=' "$root/examples/manifests/mimalloc.memplug.toml" >"$tmp/header/mimalloc.memplug.toml"
export MEMPLUG_CACHE=off MEMPLUG_PRELOAD=$preload
unset LD_PRELOAD

# instructions CMD...: the callgrind total of one run.
instructions() {
    valgrind --tool=callgrind --callgrind-out-file="$tmp/cg.out" "$@" >/dev/null 2>"$tmp/vg.err" ||
        { cat "$tmp/vg.err" >&2; return 1; }
    awk '/^summary:/ {print $2; exit}' "$tmp/cg.out"
}

# Each way's manifest must pass `memplug check`: a refused one stops here.
for way in headerless header; do
    "$memplug" check "$tmp/$way" >"$tmp/check.out" 2>&1 ||
        { echo "memplug check of the $way mimalloc manifest failed:" >&2; cat "$tmp/check.out" >&2; exit 1; }
done
headerless=("$memplug" run --plugin-path "$tmp/headerless" --handler mimalloc --)
header=("$memplug" run --plugin-path "$tmp/header" --handler mimalloc --)
# And each runs on the path its name says (the report's `headerless` count).
for way in headerless header; do
    want=1
    [[ $way == header ]] && want=0
    "$memplug" run --plugin-path "$tmp/$way" --handler mimalloc --report-json "$tmp/report.json" -- "$tmp/loop" 1 64
    grep -q "\"headerless\": $want\b" "$tmp/report.json" ||
        { echo "the $way run does not report headerless $want:" >&2; cat "$tmp/report.json" >&2; exit 1; }
done

echo '```text'
echo "instructions per malloc+free pair: callgrind totals of $pairs pairs minus 0 pairs, over $pairs"
echo '```'
echo
echo "| loop | way | instructions per pair | added by the interposer |"
echo "|---|---|---:|---:|"
for kind in 64 mix; do
    what="malloc(64)+free"
    [[ $kind == mix ]] && what="8 sizes, 16 B to 4000 B"
    base0=$(LD_PRELOAD=$mi instructions "$tmp/loop" 0 "$kind")
    base1=$(LD_PRELOAD=$mi instructions "$tmp/loop" "$pairs" "$kind")
    base=$(((base1 - base0) / pairs))
    echo "| $what | LD_PRELOAD=libmimalloc.so.2 | $base | — |"
    for way in headerless header; do
        if [[ $way == headerless ]]; then
            name="memplug run, mimalloc manifest as shipped (headerless)"
            run=("${headerless[@]}")
        else
            name="memplug run, mimalloc manifest without usable_size (header path)"
            run=("${header[@]}")
        fi
        a=$("${run[@]}" valgrind --tool=callgrind --callgrind-out-file="$tmp/cg.out" "$tmp/loop" 0 "$kind" \
            >/dev/null 2>&1 && awk '/^summary:/ {print $2; exit}' "$tmp/cg.out")
        b=$("${run[@]}" valgrind --tool=callgrind --callgrind-out-file="$tmp/cg.out" "$tmp/loop" "$pairs" "$kind" \
            >/dev/null 2>&1 && awk '/^summary:/ {print $2; exit}' "$tmp/cg.out")
        per=$(((b - a) / pairs))
        echo "| $what | $name | $per | $((per - base)) |"
    done
done
echo
echo "**Goal**: the headerless path adds at most 25 instructions per malloc+free pair"
