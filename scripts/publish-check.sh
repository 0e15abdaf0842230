#!/usr/bin/env bash
# The crates a user depends on, packaged as crates.io would take them:
# `cargo publish --dry-run` of memplug-abi, memplug-callcore, memplug-stacks
# and memplug together (cargo packages them, builds each against the
# packaged others, and stops before uploading). The plugins, the interposer, libmemplug and the test
# fixtures are `publish = false`. Fails on the first error.
#
#   scripts/publish-check.sh
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== publish-check: cargo publish --dry-run -p memplug-abi -p memplug-callcore -p memplug-stacks -p memplug ($(date +%T))"
start=$SECONDS
# --allow-dirty: CI's clone is clean, a developer's tree may not be; what is
# packaged is each manifest's `include` list either way.
# cargo unpacks the crates it packages into its home, under a directory
# named after the temporary registry's path, and takes what it finds there
# (and what it built from it) as unchanged: a second run from the same
# checkout would build against the first run's sources of the same version.
# So those copies go first, and the packages build in a target directory of
# their own, made afresh.
rm -rf "${CARGO_HOME:-$HOME/.cargo}"/registry/src/-*/memplug-*-0.*
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-target}/publish-check
rm -rf "$CARGO_TARGET_DIR"
cargo publish --dry-run --allow-dirty --quiet -p memplug-abi -p memplug-callcore -p memplug-stacks -p memplug
for crate in memplug-abi memplug-callcore memplug-stacks memplug; do
    listing=$(cargo package --list --allow-dirty -p "$crate")
    for f in LICENSE-MIT LICENSE-APACHE README.md; do
        grep -qx "$f" <<<"$listing" || { echo "publish-check: FAILED: the $crate crate does not carry $f" >&2; exit 1; }
    done
done
echo "   the four crates package, build from their packages and carry their licence texts and README ($((SECONDS - start)) s)"
