#!/usr/bin/env bash
# Build the guide (docs/, mdBook) into docs/book/ and check its internal
# links: a broken relative link or #fragment fails the script.
# Installs mdbook with cargo when it is not on PATH.
set -euo pipefail
cd "$(dirname "$0")/.."

MDBOOK_VERSION=0.5.4
export PATH="${CARGO_HOME:-$HOME/.cargo}/bin:$PATH"
if ! command -v mdbook >/dev/null 2>&1; then
    echo "== cargo install mdbook --locked --version $MDBOOK_VERSION"
    cargo install mdbook --locked --version "$MDBOOK_VERSION"
fi

echo "== mdbook build docs ($(mdbook --version))"
mdbook build docs
echo "== scripts/check-book-links.py docs/book"
python3 scripts/check-book-links.py docs/book
