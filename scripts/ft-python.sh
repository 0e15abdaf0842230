#!/usr/bin/env bash
# A free-threaded CPython (built with --disable-gil), made once per machine
# and kept in a cache directory keyed by its version and by how it is built:
#   ${XDG_CACHE_HOME:-~/.cache}/memplug/cpython-3.13.5t-RECIPE
# RECIPE is a hash of the configure arguments and of the install's steps
# (below): a change to them builds afresh, beside the old build, which stays
# usable by whatever was made with it. Later runs reuse it; a fresh machine
# builds it (minutes on 2 cores). XDG_CACHE_HOME says where the cache is.
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
# own layout.
#
# Built to build quickly, for what runs on it here (virtual environments
# with pip, NumPy, pytest, hypothesis and maturin; NumPy's tests):
#   - no PGO, no LTO; `make -j$(nproc)`;
#   - a release build's flags (-O3, -DNDEBUG) without -g: debug
#     information costs a third of the compile time and nothing at run time;
#   - no test modules (--disable-test-modules: neither built nor installed),
#     and none of the extension modules nothing here uses: readline, curses,
#     tkinter, dbm, the CJK codecs, and _decimal (`decimal` then runs on its
#     pure-Python twin, _pydecimal). ssl, hashlib, zlib, bz2, lzma, ctypes,
#     sqlite3, uuid, expat and the rest are built;
#   - `make install` byte-compiles the standard library once, at the
#     optimisation level Python runs at (-O0), not three times (-O0, -O1
#     and -O2): the compiled modules are needed (where PYTHONDONTWRITEBYTECODE
#     is set, a module without one is compiled again at every import, which
#     costs each new interpreter about 0.4 s of CPU), their -O and -OO twins
#     are not;
#   - no pip in the prefix (--without-ensurepip): `python -m venv` installs
#     pip into each environment from the wheel bundled with the standard
#     library.
#
# Needs apt-get, a C compiler, make, and the headers of the modules pip and
# NumPy's tests need (ssl, zlib, ctypes' libffi, bz2, lzma, sqlite3, uuid):
# scripts/test-all.sh installs them (scripts/need-packages.sh).
set -euo pipefail

version=3.13.5
mirror=http://deb.debian.org/debian
suite=trixie
cache_root=${XDG_CACHE_HOME:-$HOME/.cache}/memplug

# The configure arguments (see above); modules are left out with configure's
# own cache variables (py_cv_module_NAME=n/a).
configure_args=(--disable-gil --disable-test-modules --without-ensurepip OPT="-DNDEBUG -O3 -Wall")
for module in readline _curses _curses_panel _tkinter _dbm _gdbm _decimal _multibytecodec \
    _codecs_cn _codecs_hk _codecs_iso2022 _codecs_jp _codecs_kr _codecs_tw; do
    configure_args+=("py_cv_module_$module=n/a")
done
# How `make install` byte-compiles (see the build below).
install_recipe="make install, compileall -o 0 only"
recipe=$(printf '%s\n' "$version" "${configure_args[@]}" "$install_recipe" | sha256sum | cut -c1-8)
prefix=$cache_root/cpython-${version}t-$recipe
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
# One build at a time per cache entry (two test runs may start together).
exec 9>"$prefix.lock"
flock 9

works() {
    [[ -f "$stamp" && -x "$python" ]] &&
        "$python" -c 'import sys, sysconfig, ssl, hashlib, ctypes, zlib, bz2, lzma, sqlite3, uuid, decimal
import venv, ensurepip, xml.etree.ElementTree
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
say "configure --prefix=$prefix ${configure_args[*]}"
rm -rf "$prefix"
mkdir -p "$work/build"
(cd "$work/build" && "$srcdir/configure" --prefix="$prefix" "${configure_args[@]}" >"$work/configure.log" 2>&1) ||
    { tail -n 40 "$work/configure.log" >&2; fail "configure"; }
# `make install` runs compileall twice (the standard library, then
# site-packages), each time at three optimisation levels: both at -O0 only.
# Changed before the build (some of its targets depend on the Makefile), and
# checked, so that a Makefile of another shape fails here rather than
# install differently.
levels='-o 0 -o 1 -o 2 $(COMPILEALL_OPTS)'
[[ "$(grep -cF -- "$levels" "$work/build/Makefile")" == 2 ]] ||
    fail "the Makefile does not run compileall twice with '$levels'"
sed -i 's/-o 0 -o 1 -o 2 \$(COMPILEALL_OPTS)/-o 0 $(COMPILEALL_OPTS)/' "$work/build/Makefile"
[[ "$(grep -cF -- '-o 0 $(COMPILEALL_OPTS)' "$work/build/Makefile")" == 2 ]] ||
    fail "compileall still runs at more levels than -O0"
say "  configured in $((SECONDS - t0)) s"

t0=$SECONDS
say "make -j$(nproc)"
(cd "$work/build" && make -j"$(nproc)" >"$work/make.log" 2>&1) ||
    { tail -n 40 "$work/make.log" >&2; fail "make"; }
missing=$(grep -A3 'necessary bits to build these optional modules were not found' "$work/make.log" | sed -n 2p | tr -s ' ' || true)
[[ -z "$missing" ]] || say "  optional modules not built (their headers are missing):$missing"
say "  built in $((SECONDS - t0)) s"

t0=$SECONDS
say "make install (the standard library byte-compiled at -O0)"
(cd "$work/build" && make install >"$work/install.log" 2>&1) ||
    { tail -n 40 "$work/install.log" >&2; fail "make install"; }
touch "$stamp"
works || fail "the installed $python is not a working free-threaded interpreter with the modules pip, NumPy's tests and venv need"
say "  installed in $((SECONDS - t0)) s; CPython $version free-threaded ready in $((SECONDS - begin)) s: $python"
echo "$python"
