#!/usr/bin/env bash
# Check the Python package's distributions, end to end:
#  1. scripts/build-wheel.sh builds the sdist, the x86_64 and aarch64 abi3
#     wheels and the x86_64 cp313t wheel for free-threaded CPython 3.13 (and
#     fails unless `auditwheel show` finds each consistent with
#     manylinux2014);
#  2. each wheel is tagged manylinux2014_<arch>.manylinux_2_17_<arch>, and
#     no shared object in it (extension module, bundled plugins) needs a
#     glibc symbol newer than 2.17 (scripts/glibc-ceiling.sh, with objdump);
#  3. the sdist lists what building it needs: the top-level pyproject.toml and
#     PKG-INFO, both Cargo.lock, the build backend, and the Cargo.toml of every
#     crate of the workspace;
#  4. the x86_64 wheel, with numpy, pytest and hypothesis, installs into a new
#     virtual environment with a PATH on which there is no cargo and no rustc
#     (checked) and from binary distributions only, so nothing is compiled;
#  5. that environment imports memplug from its own site-packages (its
#     __version__ the wheel's) and finds the bundled plugins there, then runs
#     python/tests against it;
#  5t. the same for the cp313t wheel, in a virtual environment of the
#     free-threaded CPython (scripts/ft-python.sh) with NumPy's cp313t wheel,
#     without Rust, the tests run with the GIL off: PYTHON_GIL unset, so
#     that `import memplug, memplug.numpy` turning it on would show
#     (checked there and by every test).
#  6. with --sdist, also: `pip install` of the sdist into another new virtual
#     environment (cargo on PATH) compiles memplug and its plugins, and that
#     memplug finds its bundled plugins. This builds the whole workspace in
#     release mode from nothing: minutes, so .ci/run leaves it out.
#
#   scripts/wheel-check.sh            # 1-5
#   scripts/wheel-check.sh --sdist    # 1-6
#
# The files go to target/wheel-check/ (dist/, venv/, sdist-venv/,
# build-wheel.log; made afresh each time).
# Needs what scripts/build-wheel.sh needs, cc (the tests build bad plugins)
# and PyPI. Prints how long each step took.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

with_sdist=0
case ${1:-} in
"") ;;
--sdist) with_sdist=1 ;;
*) echo "wheel-check: unknown argument $1 (the one option is --sdist)" >&2; exit 2 ;;
esac
work=target/wheel-check
fail() { echo "wheel-check: FAILED: $*" >&2; exit 1; }
times=()
step_start=$SECONDS
step_name=
step() {
    [[ -n "$step_name" ]] && times+=("$step_name: $((SECONDS - step_start)) s")
    step_name=$1
    step_start=$SECONDS
    [[ -n "$1" ]] && echo "== wheel-check: $1 ($(date +%T))"
    return 0
}

# Checks memplug as installed in the virtual environment $1: imported from
# that environment's site-packages (not from the checkout), its __version__
# the installed distribution's, its bundled plugins there and registered.
check_memplug() {
    (cd "$1" && "$1/bin/python" - "$1" <<'EOF'
import importlib.metadata, pathlib, sys
import memplug
venv = pathlib.Path(sys.argv[1]).resolve()
where = pathlib.Path(memplug.__file__).resolve()
assert venv in where.parents, f"memplug imported from {where}, not from {venv}"
version = importlib.metadata.version("memplug")
assert memplug.__version__ == version, f"memplug.__version__ is {memplug.__version__}, the installed {version}"
bundled = sorted(p.name for p in (where.parent / "plugins").glob("*.so"))
assert bundled, f"no bundled plugins in {where.parent / 'plugins'}"
names = memplug.names()
unregistered = [b for b in bundled if b.removeprefix("libmemplug_").removesuffix(".so") not in names]
assert not unregistered, f"bundled but not registered: {unregistered} (handlers: {names})"
print(f"   {where.parent}: {len(bundled)} bundled plugins, handlers {', '.join(names)}")
EOF
    )
}

step "build the sdist and the wheels (scripts/build-wheel.sh)"
rm -rf "$work"
mkdir -p "$work"
scripts/build-wheel.sh --out "$work/dist" --arch x86_64 --arch aarch64 | tee "$work/build-wheel.log"
sdist=$(tail -n 4 "$work/build-wheel.log" | sed -n 1p)
wheel=$(tail -n 4 "$work/build-wheel.log" | sed -n 2p)
wheel_aarch64=$(tail -n 4 "$work/build-wheel.log" | sed -n 3p)
wheel_ft=$(tail -n 1 "$work/build-wheel.log")
[[ -f "$sdist" && -f "$wheel" && -f "$wheel_aarch64" && -f "$wheel_ft" ]] ||
    fail "build-wheel.sh did not print the paths of the sdist and the three wheels"
[[ "$(basename "$wheel_ft")" == memplug-*-cp313-cp313t-manylinux2014_x86_64.manylinux_2_17_x86_64.whl ]] ||
    fail "$(basename "$wheel_ft") is not tagged cp313-cp313t-manylinux2014_x86_64.manylinux_2_17_x86_64"

step "the wheels' tags and glibc ceiling (2.17)"
for w in "$wheel" "$wheel_aarch64"; do
    arch=${w%.whl}
    arch=${arch##*_2_17_}
    [[ "$(basename "$w")" == "memplug-"*"-cp39-abi3-manylinux2014_${arch}.manylinux_2_17_${arch}.whl" ]] ||
        fail "$(basename "$w") is not tagged cp39-abi3-manylinux2014_<arch>.manylinux_2_17_<arch>"
    echo "   $(basename "$w")"
    scripts/glibc-ceiling.sh "$w" 2.17 || fail "$(basename "$w") needs a glibc newer than 2.17 (see above)"
done
[[ "$wheel" == *_x86_64.whl && "$wheel_aarch64" == *_aarch64.whl ]] ||
    fail "expected the x86_64 wheel, then the aarch64 one"

step "the sdist holds what building it needs"
top=$(basename "$sdist" .tar.gz)
listing=$(tar tzf "$sdist")
need=(pyproject.toml PKG-INFO Cargo.lock python/Cargo.toml python/Cargo.lock python/_build_backend/backend.py
    python/memplug/__init__.py)
while read -r manifest; do
    need+=("${manifest#"$root"/}")
done < <(cargo metadata --format-version 1 --no-deps |
    python3 -c 'import json, sys; m = json.load(sys.stdin); ids = set(m["workspace_members"]); print("\n".join(p["manifest_path"] for p in m["packages"] if p["id"] in ids))')
for f in "${need[@]}"; do
    grep -qxF "$top/$f" <<<"$listing" || fail "$(basename "$sdist") lacks $f"
done
echo "   ${#need[@]} required files present, $(grep -vc '/$' <<<"$listing") in all"

step "install the wheel where there is no Rust"
# The PATH without every directory that holds cargo or rustc.
norust=
IFS=: read -ra dirs <<<"$PATH"
for d in "${dirs[@]}"; do
    [[ -n "$d" && ! -e "$d/cargo" && ! -e "$d/rustc" ]] && norust+="${norust:+:}$d"
done
venv="$root/$work/venv"
"${PYTHON:-python3}" -m venv "$venv"
norust="$venv/bin:$norust"
in_norust() { env -u CARGO -u RUSTC -u RUSTUP_TOOLCHAIN PATH="$norust" "$@"; }
if in_norust bash -c 'command -v cargo || command -v rustc'; then
    fail "cargo or rustc is still on the PATH meant to be without them"
fi
echo "   PATH=$norust (no cargo, no rustc)"
in_norust "$venv/bin/python" -m pip install -q --only-binary :all: "$wheel" numpy pytest hypothesis

step "memplug from the wheel: where it is, its bundled plugins"
PATH="$norust" check_memplug "$venv" || fail "the installed wheel's memplug is not as expected (see above)"

step "python/tests against the installed wheel"
# From inside the venv, so that neither the checkout's python/ nor its build
# outputs are on sys.path.
(cd "$venv" && in_norust "$venv/bin/python" -m pytest -q -p no:cacheprovider \
    --rootdir "$root/python" "$root/python/tests")

step "the cp313t wheel in a free-threaded CPython where there is no Rust"
ft_python=$(scripts/ft-python.sh)
ft_venv="$root/$work/venv-ft"
"$ft_python" -m venv "$ft_venv"
norust_ft="$ft_venv/bin:${norust#"$venv/bin:"}"
in_norust_ft() { env -u CARGO -u RUSTC -u RUSTUP_TOOLCHAIN -u PYTHON_GIL PATH="$norust_ft" "$@"; }
in_norust_ft "$ft_venv/bin/python" -m pip install -q --only-binary :all: "$wheel_ft" numpy pytest hypothesis
PATH="$norust_ft" check_memplug "$ft_venv" ||
    fail "the installed cp313t wheel's memplug is not as expected (see above)"
(cd "$ft_venv" && in_norust_ft "$ft_venv/bin/python" -c '
import sys, memplug, memplug.numpy
assert not sys._is_gil_enabled(), "the GIL is on after importing memplug and memplug.numpy"
print(f"   Python {sys.version.split()[0]} free-threaded: GIL off after import memplug, memplug.numpy")')

step "python/tests against the installed cp313t wheel, the GIL off"
(cd "$ft_venv" && in_norust_ft "$ft_venv/bin/python" -m pytest -q -p no:cacheprovider \
    --rootdir "$root/python" "$root/python/tests")

if ((with_sdist)); then
    step "pip install the sdist (compiles memplug and its plugins)"
    sdist_venv="$root/$work/sdist-venv"
    "${PYTHON:-python3}" -m venv "$sdist_venv"
    "$sdist_venv/bin/python" -m pip install -q "$sdist"
    check_memplug "$sdist_venv" || fail "memplug built from $(basename "$sdist") is not as expected (see above)"
fi

step ""
echo "== wheel-check: ok: $(basename "$wheel") ($(du -k "$wheel" | cut -f1) KiB), $(basename "$wheel_ft"), $(basename "$sdist")"
printf '   %s\n' "${times[@]}"
