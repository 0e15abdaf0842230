#!/usr/bin/env bash
# Build the Debian package of memplug (the layout of scripts/install.sh under
# /usr) with cargo-deb, and print its path on the last line.
#
#   scripts/deb.sh [--no-build]
#
# cargo-deb is installed (cargo install cargo-deb --locked) when missing.
# The workspace is built first (cargo build --release --workspace: the
# bundled plugins are not built by `cargo deb` itself), the pkg-config file
# for prefix /usr is written to target/deb/memplug.pc (and libmemplug's to
# target/deb/memplug-host.pc, its links to target/deb/lib/, the library
# stripped of debug info to target/deb/stripped/), the man pages,
# completions and Debian copyright file under target/deb/, then
# `cargo deb -p memplug --no-build --strip` packs the assets listed under
# [package.metadata.deb] in Cargo.toml.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

build=1
case ${1:-} in
    "") ;;
    --no-build) build=0 ;;
    -h | --help) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "deb.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
esac

if [[ -n ${CARGO_TARGET_DIR:-} && $(realpath -m "$CARGO_TARGET_DIR") != "$root/target" ]]; then
    echo "deb.sh: the package's assets are read from $root/target; unset CARGO_TARGET_DIR" >&2
    exit 1
fi

if ! cargo deb --version >/dev/null 2>&1; then
    echo "== cargo-deb is missing: cargo install cargo-deb --locked"
    cargo install cargo-deb --locked
fi

if ((build)); then
    echo "== cargo build --release --workspace"
    # libmemplug runs /usr/bin/memplug for worker probes (capi/build.rs).
    MEMPLUG_INSTALL_WORKER=/usr/bin/memplug cargo build --release --workspace
fi

mkdir -p target/deb
scripts/install.sh --prefix /usr --print-pc >target/deb/memplug.pc
scripts/install.sh --prefix /usr --print-host-pc >target/deb/memplug-host.pc
# libmemplug's links: libmemplug.so.0 (its soname) and libmemplug.so.
version=$(sed -n '/^\[workspace\.package\]/,/^\[/s/^version *= *"\(.*\)"/\1/p' Cargo.toml)
rm -rf target/deb/lib
mkdir -p target/deb/lib
# libmemplug.so is packed from target/deb/stripped/ without its debug info
# (cargo-deb's --strip leaves it, renamed to its versioned name); not in
# target/deb/lib/, whose links cargo-deb packs as links only while their
# target is absent there.
rm -rf target/deb/stripped
mkdir -p target/deb/stripped
strip --strip-debug -o "target/deb/stripped/libmemplug.so.$version" target/release/libmemplug_c.so
ln -s "libmemplug.so.$version" target/deb/lib/libmemplug.so.0
ln -s libmemplug.so.0 target/deb/lib/libmemplug.so

# The man pages and completions, written by the command being packaged from
# its own argument definitions (cargo deb gzips the pages).
rm -rf target/deb/man target/deb/completions
target/release/memplug man-pages target/deb/man >/dev/null
mkdir -p target/deb/completions
target/release/memplug completions bash >target/deb/completions/memplug
target/release/memplug completions zsh >target/deb/completions/_memplug
target/release/memplug completions fish >target/deb/completions/memplug.fish

# Debian's machine-readable copyright file, from the two licence texts.
repository=$(sed -n '/^\[workspace\.package\]/,/^\[/s/^repository *= *"\(.*\)"/\1/p' Cargo.toml)
debian_text() { sed 's/^[[:space:]]*$/./; s/^/ /' "$1"; }
{
    echo "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/"
    echo "Upstream-Name: memplug"
    echo "Source: $repository"
    echo
    echo "Files: *"
    echo "Copyright: The memplug developers"
    echo "License: MIT or Apache-2.0"
    echo
    echo "License: MIT"
    debian_text LICENSE-MIT
    echo
    echo "License: Apache-2.0"
    debian_text LICENSE-APACHE
} >target/deb/copyright

echo "== cargo deb -p memplug --no-build --strip"
out=$(cargo deb -p memplug --no-build --strip)
deb=$(printf '%s\n' "$out" | tail -n 1)
[[ -f $deb ]] || { echo "deb.sh: cargo deb did not report a package file (it said: $out)" >&2; exit 1; }
echo "$deb"
