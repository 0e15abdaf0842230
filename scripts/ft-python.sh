#!/usr/bin/env bash
# A free-threaded CPython (built with --disable-gil), made once per machine
# and kept in a cache directory keyed by its version:
#   ${XDG_CACHE_HOME:-~/.cache}/memplug/cpython-3.13.5t
# Later runs reuse it; a fresh machine builds it (a few minutes on 2 cores).
# Prints progress on stderr and, on its last stdout line, the interpreter's
# path (BIN/python3.13t), so a caller can write
#   python=$(scripts/ft-python.sh)
#
#   scripts/ft-python.sh            # the interpreter, built if it is not cached
#   scripts/ft-python.sh --rebuild  # build it again even if it is cached
#
# The source is Debian 13's source package python3.13 (CPython 3.13.5): no
# registry reachable here serves a free-threaded binary. It is fetched with a
# private apt configuration -- one `deb-src` line for suite trixie on
# Debian's mirror, its own lists directory -- so the system's apt sources and
# lists are never touched; apt checks the files against the suite's signed
# Release (the keyring of debian-archive-keyring). The build uses the
# upstream tarball in it (python3.13_3.13.5.orig.tar.xz) without Debian's
# patches, which move site-packages to dist-packages and belong to Debian's
# own layout. Configured for speed over peak performance: no PGO, no LTO,
# no test modules; `make -j$(nproc)`. pip comes from the tarball's own
# bundled wheel (ensurepip), and venv works.
#
# Needs apt-get, a C compiler, make, and the headers of the modules pip and
# NumPy's tests need (ssl, zlib, ctypes' libffi, bz2, lzma, sqlite3, uuid):
# scripts/test-all.sh installs them (scripts/need-packages.sh).
set -euo pipefail

version=3.13.5
mirror=http://deb.debian.org/debian
suite=trixie
cache_root=${XDG_CACHE_HOME:-$HOME/.cache}/memplug
prefix=$cache_root/cpython-${version}t
stamp=$prefix/.memplug-built
python=$prefix/bin/python${version%.*}t

say() { echo "ft-python: $*" >&2; }
fail() { say "FAILED: $*"; exit 1; }

rebuild=0
case ${1:-} in
"") ;;
--rebuild) rebuild=1 ;;
*) fail "unknown argument $1 (the one option is --rebuild)" ;;
esac

mkdir -p "$cache_root"
# One build at a time per cache (two test runs may start together).
exec 9>"$cache_root/cpython-${version}t.lock"
flock 9

works() {
    [[ -f "$stamp" && -x "$python" ]] &&
        "$python" -c 'import sys, sysconfig, ssl, ctypes, zlib, venv, ensurepip
assert sysconfig.get_config_var("Py_GIL_DISABLED") == 1' >/dev/null 2>&1
}

if ((!rebuild)) && works; then
    say "CPython $version free-threaded, cached in $prefix"
    echo "$python"
    exit 0
fi

begin=$SECONDS
say "building CPython $version free-threaded (--disable-gil) into $prefix (once per machine; minutes)"
work=$(mktemp -d "${TMPDIR:-/tmp}/memplug-ft-python.XXXXXX")
trap 'rm -rf "$work"' EXIT

say "fetching Debian's source package python3.13 (suite $suite) with a private apt configuration"
mkdir -p "$work/apt/lists/partial" "$work/src"
echo "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror $suite main" >"$work/apt/sources.list"
apt_private=(-q -o "Dir::Etc::sourcelist=$work/apt/sources.list" -o Dir::Etc::sourceparts=-
    -o "Dir::State::Lists=$work/apt/lists" -o APT::Sandbox::User=root)
apt-get "${apt_private[@]}" update >"$work/apt.log" 2>&1 ||
    { cat "$work/apt.log" >&2; fail "apt-get update of the private deb-src list"; }
(cd "$work/src" && apt-get "${apt_private[@]}" source --download-only python3.13 >>"$work/apt.log" 2>&1) ||
    { cat "$work/apt.log" >&2; fail "apt-get source --download-only python3.13"; }
orig=$work/src/python3.13_$version.orig.tar.xz
[[ -f "$orig" ]] || fail "the source package has no $(basename "$orig") (suite $suite moved on from $version?): $(ls "$work/src")"
tar -xJf "$orig" -C "$work/src"
srcdir=$work/src/Python-$version
[[ -x "$srcdir/configure" ]] || fail "no Python-$version/configure in $(basename "$orig")"
say "  fetched in $((SECONDS - begin)) s"

t0=$SECONDS
say "configure --disable-gil --prefix=$prefix"
rm -rf "$prefix"
mkdir -p "$work/build"
(cd "$work/build" && "$srcdir/configure" --prefix="$prefix" --disable-gil --disable-test-modules \
    --with-ensurepip=install >"$work/configure.log" 2>&1) ||
    { tail -n 40 "$work/configure.log" >&2; fail "configure"; }
say "  configured in $((SECONDS - t0)) s"

t0=$SECONDS
say "make -j$(nproc)"
(cd "$work/build" && make -j"$(nproc)" >"$work/make.log" 2>&1) ||
    { tail -n 40 "$work/make.log" >&2; fail "make"; }
missing=$(grep -A3 'necessary bits to build these optional modules were not found' "$work/make.log" | sed -n 2p | tr -s ' ' || true)
[[ -z "$missing" ]] || say "  optional modules not built (their headers are missing):$missing"
say "  built in $((SECONDS - t0)) s"

t0=$SECONDS
say "make install (pip from the bundled wheel)"
(cd "$work/build" && make install >"$work/install.log" 2>&1) ||
    { tail -n 40 "$work/install.log" >&2; fail "make install"; }
touch "$stamp"
works || fail "the installed $python is not a working free-threaded interpreter with ssl, ctypes, zlib and venv"
say "  installed in $((SECONDS - t0)) s; CPython $version free-threaded ready in $((SECONDS - begin)) s: $python"
echo "$python"
