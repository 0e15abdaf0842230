#!/usr/bin/env bash
# Make sure Debian packages are installed before anything runs.
#
#   scripts/need-packages.sh PACKAGE...
#
# For each package that is not installed: as root, `apt-get update` once and
# `apt-get install` them all; as any other user, print the exact install line
# and exit 1, so the caller stops before running anything. On a system
# without dpkg, nothing can be checked: it says so and carries on (the
# caller's own checks then name what is missing).
#
# A package name may carry a command or library that stands for it, as
# NAME=cmd:cc or NAME=lib:libmimalloc.so.2 — then a package providing that
# command or library from elsewhere (not through dpkg) counts as well.
set -euo pipefail

missing=()
for spec in "$@"; do
    pkg=${spec%%=*}
    alt=
    [[ $spec == *=* ]] && alt=${spec#*=}
    if command -v dpkg-query >/dev/null 2>&1 &&
        [[ $(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true) == "install ok installed" ]]; then
        continue
    fi
    case $alt in
        cmd:*) command -v "${alt#cmd:}" >/dev/null 2>&1 && continue ;;
        lib:*) /sbin/ldconfig -p 2>/dev/null | grep -F "${alt#lib:}" >/dev/null && continue ;;
    esac
    missing+=("$pkg")
done
((${#missing[@]})) || exit 0

if ! command -v apt-get >/dev/null 2>&1; then
    echo "need-packages: these Debian packages are missing and there is no apt-get here: ${missing[*]}" >&2
    echo "need-packages: install their equivalents with your system's package manager, then run this again" >&2
    exit 1
fi
line="apt-get install -y --no-install-recommends ${missing[*]}"
if [[ $(id -u) != 0 ]]; then
    echo "need-packages: missing Debian packages: ${missing[*]}" >&2
    echo "need-packages: install them as root, then run this again:" >&2
    echo "    sudo apt-get update && sudo $line" >&2
    exit 1
fi
echo "== installing Debian packages: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
# shellcheck disable=SC2086
$line
