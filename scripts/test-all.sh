#!/usr/bin/env bash
# Every test, in one command: the Rust workspace (cargo test --workspace),
# then the Python package with NumPy's own suite through the bridge
# (scripts/python-tests.sh). Arguments go to python-tests.sh (--quick skips
# NumPy's suite).
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== cargo test --workspace"
cargo test --workspace
scripts/python-tests.sh "$@"
