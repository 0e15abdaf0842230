#!/usr/bin/env bash
# Check both ways of installing memplug, end to end:
#  1. scripts/install.sh into a temporary prefix (and a --destdir staging);
#  2. the installed memplug checks every bundled plugin ok with no MEMPLUG_*
#     or XDG_* variable set and HOME an empty directory;
#  3. a C plugin built with `pkg-config --cflags memplug` against the
#     installed header passes `memplug check`, and is found once installed
#     into `pkg-config --variable=plugindir memplug`;
#  3b. a C and a C++ program built against the installed libmemplug with
#     nothing but `pkg-config --cflags --libs memplug-host` (examples/c/),
#     run without arguments and with no MEMPLUG_* variable (the .pc sets no
#     run path: LD_LIBRARY_PATH=PREFIX/lib), find the installed plugins by
#     themselves and allocate through them; a probe runs PREFIX/bin/memplug;
#     and the prefix copied elsewhere, the original removed, the copy's
#     programs find the copy's plugins and worker;
#  4. --uninstall leaves the prefix without memplug's files (and keeps a file
#     it did not install);
#  5. the Debian package (scripts/deb.sh): dpkg -i, /usr/bin/memplug check
#     (every bundled plugin ok), dpkg -r, and nothing of it left;
#  6. in both, the licence texts (the .deb's Debian copyright file), the man
#     pages (rendered with man -l) and the shell completions (bash's offers
#     the subcommands).
# Installs pkg-config (apt-get) and cargo-deb (cargo install) when missing
# and running as root; otherwise says what to install and fails. The .deb
# part needs root (dpkg -i). Prints how long each step took.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

PLUGINS=(system aligned tracking arena hugepage guard shm)

fail() {
    echo "install-check: FAILED: $*" >&2
    exit 1
}

times=()
step_start=$SECONDS
step_name=
step() {
    if [[ -n $step_name ]]; then times+=("$(printf '%4d s  %s' $((SECONDS - step_start)) "$step_name")"); fi
    step_name=$1
    step_start=$SECONDS
    echo "== install-check: $1"
}

is_root=0
if [[ $(id -u) == 0 ]]; then is_root=1; fi

work=$(mktemp -d)
deb_installed=0
cleanup() {
    local status=$?
    if ((deb_installed)) && dpkg-query -W -f='${Status}' memplug 2>/dev/null | grep -q "install ok installed"; then
        echo "install-check: removing the memplug package after a failure" >&2
        dpkg -r memplug >/dev/null || true
    fi
    rm -rf "$work"
    exit "$status"
}
trap cleanup EXIT

# The environment of a user who set nothing: no MEMPLUG_* or XDG_* variable,
# HOME an empty directory (so no user plugin directory or cache interferes).
clean_env() {
    local home=$1
    shift
    local args=(env -u MEMPLUG_PLUGIN_PATH -u MEMPLUG_SYSTEM_PLUGIN_PATH)
    local v
    for v in $(compgen -e); do
        case $v in MEMPLUG_* | XDG_*) args+=(-u "$v") ;; esac
    done
    "${args[@]}" HOME="$home" "$@"
}

# Assert that the JSON report of `memplug check` on stdin has every bundled
# plugin ok, loaded from directory $1 (other entries, e.g. shadowed copies
# elsewhere on the search path, are listed but not judged).
all_bundled_ok() {
    python3 -c '
import json, os, sys
want_dir, names = sys.argv[1], sys.argv[2:]
reports = json.load(sys.stdin)
for r in reports:
    print("  %-9s %-8s %s" % (r.get("name"), r["status"], r["path"]))
bad = []
for n in names:
    ok = [r for r in reports if r.get("name") == n and r["status"] == "ok"
          and os.path.dirname(os.path.realpath(r["path"])) == os.path.realpath(want_dir)]
    if not ok:
        bad.append(n)
if bad:
    sys.exit("not ok from %s: %s" % (want_dir, ", ".join(bad)))
' "$1" "${PLUGINS[@]}"
}

# Assert that the man pages in $1 (memplug.1 and one per subcommand, plain
# or gzipped) are there and that man renders them.
man_pages_ok() {
    local dir=$1 sub page
    for sub in memplug memplug-check memplug-list memplug-inspect memplug-run memplug-bench memplug-completions; do
        page=$dir/$sub.1
        [[ -f $page ]] || page=$page.gz
        [[ -f $page ]] || fail "no man page $dir/$sub.1"
        MANWIDTH=80 man -l "$page" 2>/dev/null | grep -q "^NAME" || fail "man -l $page renders no NAME section"
    done
    MANWIDTH=80 man -l "$page" | head -n 8
}

# Assert that the bash completion script $1 offers the subcommands after
# `memplug ` and the options of `memplug run --h`.
bash_completion_ok() {
    local offered
    # shellcheck disable=SC2016 # expanded by the inner bash.
    offered=$(bash -c 'source "$1"; COMP_WORDS=(memplug ""); COMP_CWORD=1; _memplug memplug "" memplug; printf "%s\n" "${COMPREPLY[@]}"' _ "$1") ||
        fail "sourcing the bash completion $1"
    local sub
    for sub in list inspect paths install uninstall check bench run completions; do
        grep -qx "$sub" <<<"$offered" || fail "bash completion ($1) does not offer '$sub' after 'memplug ' (it offers: $(tr '\n' ' ' <<<"$offered"))"
    done
    # shellcheck disable=SC2016 # expanded by the inner bash.
    offered=$(bash -c 'source "$1"; COMP_WORDS=(memplug run --ha); COMP_CWORD=2; _memplug memplug --ha run; printf "%s\n" "${COMPREPLY[@]}"' _ "$1")
    grep -qx -- "--handler" <<<"$offered" || fail "bash completion ($1) does not complete 'memplug run --ha' to --handler"
    echo "bash completion ($1): the subcommands after 'memplug ', --handler after 'memplug run --ha'"
}

step "prerequisites (cc, pkg-config, python3, man, cargo-deb, dpkg, root for the .deb)"
command -v cc >/dev/null || fail "cc is missing: apt-get install -y gcc libc6-dev"
command -v python3 >/dev/null || fail "python3 is missing: apt-get install -y python3"
if ! command -v pkg-config >/dev/null; then
    if ((is_root)); then
        export DEBIAN_FRONTEND=noninteractive
        apt-get update
        apt-get install -y --no-install-recommends pkg-config
    else
        fail "pkg-config is missing: sudo apt-get install -y pkg-config"
    fi
fi
((is_root)) || fail "the .deb part (dpkg -i / dpkg -r) needs root: run as root or under sudo"
command -v dpkg >/dev/null || fail "dpkg is missing: the .deb part needs a Debian-based system"
if ! cargo deb --version >/dev/null 2>&1; then
    cargo install cargo-deb --locked
fi
if dpkg-query -W -f='${Status}' memplug 2>/dev/null | grep -q "install ok installed"; then
    fail "a memplug package is installed already; remove it first (dpkg -r memplug)"
fi
pkg-config --version >/dev/null
if ! command -v man >/dev/null; then
    if ((is_root)); then
        export DEBIAN_FRONTEND=noninteractive
        apt-get update
        apt-get install -y --no-install-recommends man-db
    else
        fail "man is missing: sudo apt-get install -y man-db"
    fi
fi

step "scripts/install.sh --prefix TMP (release build)"
prefix=$work/prefix
mkdir -m 0700 "$prefix"
scripts/install.sh --prefix "$prefix"
for f in bin/memplug include/memplug.h lib/pkgconfig/memplug.pc share/memplug/install-manifest.txt \
    include/memplug_host.h include/memplug.hpp lib/libmemplug.a lib/pkgconfig/memplug-host.pc lib/libmemplug.so.0; do
    [[ -f $prefix/$f ]] || fail "$prefix/$f was not installed"
done
for p in "${PLUGINS[@]}"; do
    so=$prefix/lib/memplug/plugins/libmemplug_$p.so
    [[ -f $so ]] || fail "$so was not installed"
    [[ $(stat -c %a "$so") == 644 ]] || fail "$so has mode $(stat -c %a "$so"), not 644"
done
[[ $(stat -c %a "$prefix/bin/memplug") == 755 ]] || fail "bin/memplug is not mode 755"
ls "$prefix"/share/memplug/manifests/*.memplug.toml >/dev/null || fail "no manifests in share/memplug/manifests"
for f in share/doc/memplug/LICENSE-MIT share/doc/memplug/LICENSE-APACHE; do
    cmp -s "$prefix/$f" "${f##*/}" || fail "$prefix/$f is not the repository's ${f##*/}"
done
for f in share/bash-completion/completions/memplug share/zsh/site-functions/_memplug share/fish/vendor_completions.d/memplug.fish; do
    [[ -s $prefix/$f ]] || fail "$prefix/$f (a shell completion) was not installed"
done
readelf -S "$prefix/lib/libmemplug.so.0" | grep -q '\.debug_' && fail "lib/libmemplug.so.0 was installed with debug info"
echo "lib/libmemplug.so.0: no debug info, $(stat -L -c %s "$prefix/lib/libmemplug.so.0") bytes"
scripts/install.sh --prefix "$prefix" --no-build >/dev/null || fail "installing again over the same prefix"

step "the installed man pages render; bash completion offers the subcommands"
man_pages_ok "$prefix/share/man/man1"
bash_completion_ok "$prefix/share/bash-completion/completions/memplug"

step "installed memplug check, no environment variable set"
home=$work/home
mkdir "$home"
clean_env "$home" "$prefix/bin/memplug" paths || fail "memplug paths"
clean_env "$home" "$prefix/bin/memplug" check --json >"$work/check.json" || {
    cat "$work/check.json"
    fail "memplug check (installed in $prefix) did not pass"
}
all_bundled_ok "$prefix/lib/memplug/plugins" <"$work/check.json" || fail "the installed plugins are not all ok"

step "installed memplug run finds its interposer in lib/memplug"
[[ $(stat -c %a "$prefix/lib/memplug/libmemplug_preload.so") == 644 ]] || fail "lib/memplug/libmemplug_preload.so is not mode 644"
ran=$(clean_env "$home" "$prefix/bin/memplug" run --handler tracking -- /bin/echo run-ok) || fail "memplug run (installed in $prefix)"
[[ $ran == run-ok ]] || fail "memplug run printed '$ran', want run-ok"

step "a C plugin built with pkg-config against the installed header"
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
read -r -a cflags <<<"$(pkg-config --cflags memplug)"
plugindir=$(pkg-config --variable=plugindir memplug)
echo "pkg-config --cflags memplug: ${cflags[*]}; plugindir: $plugindir"
[[ ${cflags[*]} == "-I$prefix/include" ]] || fail "pkg-config --cflags memplug is '${cflags[*]}', want -I$prefix/include"
[[ $plugindir == "$prefix/lib/memplug/plugins" ]] || fail "plugindir is '$plugindir'"
[[ $(pkg-config --modversion memplug) == "$(scripts/install.sh --print-pc | sed -n 's/^Version: //p')" ]] ||
    fail "pkg-config --modversion memplug does not match the workspace version"
mkdir "$work/c"
cc "${cflags[@]}" -shared -fPIC -O2 plugins/c/counting.c -o "$work/c/libcounting.so"
clean_env "$home" "$prefix/bin/memplug" check "$work/c/libcounting.so" || fail "memplug check of the C plugin"
install -m 0644 "$work/c/libcounting.so" "$plugindir/"
clean_env "$home" "$prefix/bin/memplug" check --json >"$work/check2.json" || fail "memplug check with the C plugin in plugindir"
python3 -c '
import json, sys
ok = [r for r in json.load(sys.stdin) if r["path"].endswith("/libcounting.so") and r["status"] == "ok"]
sys.exit(0 if ok else "libcounting.so in plugindir was not found ok")' <"$work/check2.json" || fail "plugindir"

step "a C and a C++ program built with pkg-config memplug-host against the prefix"
read -r -a host_flags <<<"$(pkg-config --cflags --libs memplug-host)"
echo "pkg-config --cflags --libs memplug-host: ${host_flags[*]}"
[[ $(readlink "$prefix/lib/libmemplug.so") == libmemplug.so.0 ]] || fail "lib/libmemplug.so is not a link to libmemplug.so.0"
readelf -d "$prefix/lib/libmemplug.so.0" | grep -q "Library soname: \[libmemplug.so.0\]" || fail "libmemplug's soname is not libmemplug.so.0"
cc -std=c11 -Wall -Werror examples/c/allocate.c "${host_flags[@]}" -o "$work/c/allocate"
c++ -std=c++17 -Wall -Werror examples/c/pmr.cpp "${host_flags[@]}" -o "$work/c/pmr"
# The loading rules' test program, in its `installed` mode: the search path
# loads PLUGINS, and a probe runs WORKER (where it is built, run from $home).
cc -std=c11 -Wall -Werror capi/tests/c/rules_test.c "${host_flags[@]}" -o "$work/c/rules_test"
# installed_programs_run PREFIX: the programs, run from $home without
# arguments, find PREFIX's plugins and worker by themselves.
installed_programs_run() {
    local at=$1 exe
    for exe in allocate pmr; do
        (cd "$home" && clean_env "$home" env LD_LIBRARY_PATH="$at/lib" "$work/c/$exe") >"$work/c/$exe.out" 2>&1 ||
            fail "$exe (built against $prefix, run with $at/lib) did not run: $(cat "$work/c/$exe.out")"
        ! grep -q refused "$work/c/$exe.out" || fail "$exe refused an installed plugin: $(cat "$work/c/$exe.out")"
        cat "$work/c/$exe.out"
    done
    (cd "$home" && clean_env "$home" env LD_LIBRARY_PATH="$at/lib" PLUGINS="$at/lib/memplug/plugins" \
        WORKER="$at/bin/memplug" "$work/c/rules_test" installed) >"$work/c/rules.out" 2>&1 ||
        fail "rules_test installed (run with $at/lib) did not find $at's plugins and worker: $(cat "$work/c/rules.out")"
}
installed_programs_run "$prefix"
moved=$work/moved
cp -a "$prefix" "$moved"

step "scripts/install.sh --uninstall"
scripts/install.sh --prefix "$prefix" --uninstall
[[ -f $plugindir/libcounting.so ]] || fail "--uninstall removed a plugin it did not install"
left=$(cd "$prefix" && find . -type f | sort | tr '\n' ' ')
[[ $left == "./lib/memplug/plugins/libcounting.so ./share/memplug/install-manifest.txt " ]] ||
    fail "after --uninstall, $prefix holds: $left (want only the foreign plugin and the list of kept directories)"
rm "$plugindir/libcounting.so"
# Again: without the list of installed files now, and nothing to remove
# except the directories, empty at last.
scripts/install.sh --prefix "$prefix" --uninstall
left=$(find "$prefix" -mindepth 1)
[[ -z $left ]] || fail "--uninstall left files in $prefix: $left"
[[ -d $prefix ]] || fail "--uninstall removed the prefix it did not create"

step "a relocated prefix: the programs find the copy's plugins and worker, the original gone"
installed_programs_run "$moved"
rm -rf "$moved"

step "scripts/install.sh --destdir (staged), then --uninstall"
stage=$work/stage
scripts/install.sh --destdir "$stage" --prefix /opt/memplug --no-build >/dev/null
[[ -x $stage/opt/memplug/bin/memplug ]] || fail "--destdir: bin/memplug is not under $stage/opt/memplug"
grep -qx 'prefix=/opt/memplug' "$stage/opt/memplug/lib/pkgconfig/memplug.pc" || fail "--destdir: the .pc does not say prefix=/opt/memplug"
scripts/install.sh --destdir "$stage" --prefix /opt/memplug --uninstall >/dev/null
left=$(find "$stage/opt" -mindepth 1)
[[ -z $left ]] || fail "--destdir --uninstall left: $left"

step "scripts/deb.sh (cargo deb)"
scripts/deb.sh | tee "$work/deb.out"
deb=$(tail -n 1 "$work/deb.out")
[[ -f $deb ]] || fail "scripts/deb.sh did not print a .deb path"
dpkg-deb -c "$deb"
dpkg-deb -x "$deb" "$work/deb-root"
readelf -S "$work/deb-root/usr/lib/libmemplug.so.0" | grep -q '\.debug_' && fail "the .deb's libmemplug.so.0 carries debug info"

step "dpkg -i, /usr/bin/memplug check, pkg-config from /usr"
deb_installed=1
dpkg -i "$deb"
dpkg -L memplug >"$work/dpkg-files.txt"
[[ -x /usr/bin/memplug ]] || fail "/usr/bin/memplug is missing after dpkg -i"
unset PKG_CONFIG_PATH
[[ $(pkg-config --variable=plugindir memplug) == /usr/lib/memplug/plugins ]] || fail "the package's plugindir"
# shellcheck disable=SC2046 # the cflags are a list of words (none for /usr).
cc $(pkg-config --cflags memplug) -shared -fPIC -O2 plugins/c/counting.c -o "$work/c/libcounting-usr.so"
rm -rf "$home" && mkdir "$home"
clean_env "$home" /usr/bin/memplug check --json >"$work/check3.json" || {
    cat "$work/check3.json"
    fail "/usr/bin/memplug check did not pass"
}
all_bundled_ok /usr/lib/memplug/plugins <"$work/check3.json" || fail "the packaged plugins are not all ok"
clean_env "$home" /usr/bin/memplug check "$work/c/libcounting-usr.so" || fail "memplug check of the C plugin (/usr/include)"

step "the package's copyright file, man pages and completions"
copyright=/usr/share/doc/memplug/copyright
grep -qx "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/" "$copyright" || fail "$copyright is not in Debian's copyright format"
grep -qx "License: MIT" "$copyright" && grep -qx "License: Apache-2.0" "$copyright" || fail "$copyright lacks a licence paragraph"
grep -q "Permission is hereby granted, free of charge" "$copyright" || fail "$copyright lacks the MIT text"
grep -q "TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION" "$copyright" || fail "$copyright lacks the Apache-2.0 text"
man_pages_ok /usr/share/man/man1
MANWIDTH=80 man memplug-run | grep -q "memplug-run" || fail "man memplug-run does not find the packaged page"
bash_completion_ok /usr/share/bash-completion/completions/memplug
[[ -s /usr/share/zsh/vendor-completions/_memplug && -s /usr/share/fish/vendor_completions.d/memplug.fish ]] ||
    fail "the package's zsh or fish completion is missing"

step "dpkg -r memplug, nothing left"
dpkg -r memplug
deb_installed=0
if dpkg-query -W -f='${Status}' memplug 2>/dev/null | grep -q "install ok installed"; then
    fail "memplug is still installed after dpkg -r"
fi
left=()
while IFS= read -r f; do
    # Files, and the directories only the package used; /usr, /usr/bin... stay.
    case $f in
        /usr/lib/memplug* | /usr/share/memplug* | /usr/share/doc/memplug*) gone=$([[ -e $f ]] || echo y) ;;
        *) gone=$([[ -e $f && ! -d $f ]] || echo y) ;;
    esac
    if [[ -z $gone ]]; then left+=("$f"); fi
done <"$work/dpkg-files.txt"
((${#left[@]} == 0)) || fail "dpkg -r left: ${left[*]}"

step "finished"
echo "== install-check: all passed; time per step:"
printf '%s\n' "${times[@]}"
