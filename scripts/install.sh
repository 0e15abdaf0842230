#!/usr/bin/env bash
# Install memplug (the command, its bundled plugins, the C header, a
# pkg-config file and the example manifests) under a prefix, or remove it.
#
#   scripts/install.sh [--prefix DIR] [--destdir DIR] [--no-build] [--strip]
#   scripts/install.sh --uninstall [--prefix DIR] [--destdir DIR]
#   scripts/install.sh --print-pc [--prefix DIR]
#
# Files go to $DESTDIR$PREFIX/...; paths written into files (the .pc) use
# $PREFIX alone, as with `make DESTDIR=`. The list of what was installed is
# kept in $PREFIX/share/memplug/install-manifest.txt; --uninstall removes
# those files (and the list recomputed from this source tree, so it works
# without the list too), then the directories the install created, when
# empty. --uninstall builds nothing.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)

PLUGINS=(system aligned tracking arena hugepage guard shm)

usage() {
    cat <<'EOF'
Usage: scripts/install.sh [--prefix DIR] [--destdir DIR] [--no-build] [--strip]
       scripts/install.sh --uninstall [--prefix DIR] [--destdir DIR]
       scripts/install.sh --print-pc [--prefix DIR]

Builds memplug in release mode (cargo build --release --workspace) and
installs, under PREFIX (default /usr/local):
  bin/memplug                                  the command (0755)
  lib/memplug/plugins/libmemplug_*.so          the seven bundled plugins (0644)
  lib/memplug/libmemplug_preload.so            the interposer of `memplug run` (0644)
  include/memplug.h                            the C header for plugin authors
  lib/libmemplug.so.VERSION, .so.0, .so        libmemplug, the host as a C library (soname libmemplug.so.0)
  lib/libmemplug.a                             libmemplug, static
  include/memplug_host.h, memplug.hpp          its C API and header-only C++ layer
  share/man/man1/memplug.1, memplug-*.1        man pages (from the command's own definitions)
  share/bash-completion/completions/memplug    bash completion
  share/zsh/site-functions/_memplug            zsh completion
  share/fish/vendor_completions.d/memplug.fish fish completion
  share/doc/memplug/LICENSE-MIT, LICENSE-APACHE  the licence texts
  lib/pkgconfig/memplug.pc                     pkg-config: --cflags, --variable=plugindir
  lib/pkgconfig/memplug-host.pc                pkg-config: --cflags --libs memplug-host
  share/memplug/manifests/*.memplug.toml       example manifests
  share/memplug/install-manifest.txt           the list of installed files

Options:
  --prefix DIR    where memplug lives (default /usr/local); written into memplug.pc
  --destdir DIR   staging root: files go to DIR/PREFIX/... (as make DESTDIR=)
  --no-build      install what target/release holds; do not run cargo
  --strip         strip the installed executable, plugins and libmemplug.so
                  (without it, libmemplug.so is installed without debug info)
  --uninstall     remove the files an install put under PREFIX, and the
                  directories it created when they are empty (no build)
  --print-pc      print the memplug.pc for PREFIX and exit (scripts/deb.sh
                  uses it for the Debian package's /usr)
  --print-host-pc print the memplug-host.pc for PREFIX and exit
  -h, --help      this text

The installed memplug finds its plugins in PREFIX/lib/memplug/plugins with no
environment variable set, and so does a program linked to the installed
libmemplug (from the library's own place, wherever the program is). libmemplug
runs the memplug command of its own installation for worker probes
(PREFIX/bin/memplug, found from the library's place; else the path fixed when
it is built; MEMPLUG_WORKER overrides both).
EOF
}

prefix=/usr/local
destdir=
uninstall=0
print_pc=0
print_host_pc=0
build=1
strip=()
while (($#)); do
    case $1 in
        --prefix) [[ $# -ge 2 ]] || { echo "install.sh: --prefix needs a directory" >&2; exit 2; }; prefix=$2; shift 2 ;;
        --prefix=*) prefix=${1#*=}; shift ;;
        --destdir) [[ $# -ge 2 ]] || { echo "install.sh: --destdir needs a directory" >&2; exit 2; }; destdir=$2; shift 2 ;;
        --destdir=*) destdir=${1#*=}; shift ;;
        --uninstall) uninstall=1; shift ;;
        --no-build) build=0; shift ;;
        --print-pc) print_pc=1; shift ;;
        --print-host-pc) print_host_pc=1; shift ;;
        --strip) strip=(--strip); shift ;;
        -h | --help) usage; exit 0 ;;
        *) echo "install.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done

[[ $prefix == /* ]] || { echo "install.sh: --prefix must be an absolute path, got '$prefix'" >&2; exit 2; }
prefix=${prefix%/}
[[ -n $prefix ]] || { echo "install.sh: --prefix / is not supported; use --prefix /usr" >&2; exit 2; }
destdir=${destdir%/}
[[ -z $destdir || $destdir == /* ]] || destdir=$PWD/$destdir
dest=$destdir$prefix
list=share/memplug/install-manifest.txt

# The directories an install may create, parents first (relative to PREFIX).
DIRS=(bin include lib lib/memplug lib/memplug/plugins lib/pkgconfig share share/memplug share/memplug/manifests
    share/man share/man/man1 share/doc share/doc/memplug share/bash-completion share/bash-completion/completions
    share/zsh share/zsh/site-functions share/fish share/fish/vendor_completions.d)

# The shell completions: shell, and where its script goes (relative to PREFIX).
COMPLETIONS=("bash share/bash-completion/completions/memplug" "zsh share/zsh/site-functions/_memplug"
    "fish share/fish/vendor_completions.d/memplug.fish")
LICENSES=(LICENSE-MIT LICENSE-APACHE)

# The man pages' file names (memplug.1, memplug-run.1, ...): those the built
# command writes at install; at --uninstall, those installed.
man_pages=()

# What an install puts under PREFIX (relative paths), recomputed from the
# source tree.
installed_files() {
    echo bin/memplug
    for p in "${PLUGINS[@]}"; do echo "lib/memplug/plugins/libmemplug_$p.so"; done
    echo lib/memplug/libmemplug_preload.so
    echo include/memplug.h
    echo "lib/libmemplug.so.$version"
    echo lib/libmemplug.so.0
    echo lib/libmemplug.so
    echo lib/libmemplug.a
    echo include/memplug_host.h
    echo include/memplug.hpp
    echo lib/pkgconfig/memplug.pc
    echo lib/pkgconfig/memplug-host.pc
    for m in "${man_pages[@]}"; do echo "share/man/man1/$m"; done
    for c in "${COMPLETIONS[@]}"; do echo "${c#* }"; done
    for l in "${LICENSES[@]}"; do echo "share/doc/memplug/$l"; done
    for m in "$root"/examples/manifests/*.memplug.toml; do
        if [[ -e $m ]]; then echo "share/memplug/manifests/$(basename "$m")"; fi
    done
    echo "$list"
}

version=$(sed -n '/^\[workspace\.package\]/,/^\[/s/^version *= *"\(.*\)"/\1/p' "$root/Cargo.toml")
[[ -n $version ]] || { echo "install.sh: no version in [workspace.package] of $root/Cargo.toml" >&2; exit 1; }

if ((uninstall)); then
    for m in "$dest"/share/man/man1/memplug.1 "$dest"/share/man/man1/memplug-*.1; do
        if [[ -e $m ]]; then man_pages+=("$(basename "$m")"); fi
    done
    files=()
    dirs=()
    if [[ -f $dest/$list ]]; then
        while IFS=' ' read -r kind rel; do
            case $kind in
                f) files+=("$rel") ;;
                d) dirs+=("$rel") ;;
            esac
        done <"$dest/$list"
    else
        echo "install.sh: no $dest/$list; removing the files this source tree installs"
        # Without the list, only memplug's own directories are removed.
        dirs=(lib/memplug lib/memplug/plugins share/memplug share/memplug/manifests share/doc/memplug)
    fi
    mapfile -t -O "${#files[@]}" files < <(installed_files)
    removed=0
    while IFS= read -r rel; do
        case $rel in /* | *..*) echo "install.sh: ignoring '$rel' in the list (not a plain relative path)" >&2; continue ;; esac
        if [[ -e $dest/$rel || -L $dest/$rel ]]; then
            rm -f -- "$dest/$rel"
            echo "removed $dest/$rel"
            removed=$((removed + 1))
        fi
    done < <(printf '%s\n' "${files[@]}" | sort -u)
    # Deepest first (the prefix itself, ".", last), each only when empty.
    while IFS= read -r rel; do
        case $rel in /* | *..*) continue ;; esac
        dir=$dest/$rel
        [[ $rel == . ]] && dir=$dest
        if [[ -d $dir ]] && rmdir -- "$dir" 2>/dev/null; then
            echo "removed directory $dir"
        fi
    done < <(printf '%s\n' "${dirs[@]}" | sed '/^$/d' | sort -ru)
    # A created directory still holding files memplug did not install stays,
    # and stays on the list, so that --uninstall again (once they are gone)
    # removes it.
    kept=()
    for rel in "${dirs[@]}"; do
        if [[ $rel != . && -d $dest/$rel ]]; then kept+=("$rel"); fi
    done
    if ((${#kept[@]})); then
        echo "kept, as they hold files memplug did not install (--uninstall again removes them once empty):"
        printf '  %s\n' "${kept[@]/#/$dest/}"
        if printf '%s\n' "${dirs[@]}" | grep -qx '\.' && [[ -d $dest ]]; then kept+=(.); fi
        for rel in share share/memplug; do
            if [[ ! -d $dest/$rel ]]; then
                install -d -m 0755 "$dest/$rel"
                kept+=("$rel")
            fi
        done
        {
            echo "# directories scripts/install.sh created that held other files at --uninstall"
            printf 'd %s\n' "${kept[@]}"
        } >"$dest/$list"
        echo "(their list stays in $dest/$list)"
    fi
    if ((removed)); then
        echo "memplug uninstalled from $dest ($removed file$( ((removed == 1)) || echo s))"
    else
        echo "memplug is not installed in $dest: nothing to remove"
    fi
    exit 0
fi


# The pkg-config file for $prefix: plugin authors' --cflags, and plugindir
# for where a plugin goes. No Libs: a plugin links against nothing of memplug.
pc_file() {
    # shellcheck disable=SC2016 # ${...} are pkg-config variables, not the shell's.
    printf '%s\n' \
        "prefix=$prefix" \
        'exec_prefix=${prefix}' \
        'libdir=${exec_prefix}/lib' \
        'includedir=${prefix}/include' \
        'plugindir=${libdir}/memplug/plugins' \
        '' \
        'Name: memplug' \
        'Description: The memplug plugin ABI (memplug.h), for allocator plugins the memplug host loads' \
        "Version: $version" \
        'Cflags: -I${includedir}'
}

# The pkg-config file of libmemplug for $prefix: what a C or C++ program
# that hosts plugins compiles and links with.
host_pc_file() {
    # shellcheck disable=SC2016 # ${...} are pkg-config variables, not the shell's.
    printf '%s\n' \
        "prefix=$prefix" \
        'exec_prefix=${prefix}' \
        'libdir=${exec_prefix}/lib' \
        'includedir=${prefix}/include' \
        '' \
        'Name: memplug-host' \
        'Description: The memplug host as a C library: load allocator plugins, checked, and allocate through them (memplug_host.h, memplug.hpp)' \
        "Version: $version" \
        'Libs: -L${libdir} -lmemplug' \
        'Libs.private: -lpthread -ldl -lm' \
        'Cflags: -I${includedir}'
}

if ((print_pc)); then
    pc_file
    exit 0
fi
if ((print_host_pc)); then
    host_pc_file
    exit 0
fi

command -v install >/dev/null || { echo "install.sh: install(1) not found (coreutils)" >&2; exit 1; }

target=${CARGO_TARGET_DIR:-$root/target}
[[ $target == /* ]] || target=$root/$target
release=$target/release
if ((build)); then
    echo "== cargo build --release --workspace"
    # libmemplug runs this prefix's memplug for worker probes (capi/build.rs).
    (cd "$root" && MEMPLUG_INSTALL_WORKER=$prefix/bin/memplug cargo build --release --workspace)
fi
sources=("$release/memplug")
for p in "${PLUGINS[@]}"; do sources+=("$release/libmemplug_$p.so"); done
sources+=("$release/libmemplug_preload.so" "$release/libmemplug_c.so" "$release/libmemplug_c.a")
for s in "${sources[@]}"; do
    [[ -f $s ]] || { echo "install.sh: $s is missing; run cargo build --release --workspace (or drop --no-build)" >&2; exit 1; }
done

# Directories one level at a time with an explicit mode, so that none is
# group- or world-writable whatever the umask (memplug's trust check looks
# at every directory on a plugin's path). Those that did not exist are
# recorded, so that --uninstall removes them when empty.
created=()
if [[ -f $dest/$list ]]; then
    while IFS=' ' read -r kind rel; do
        if [[ $kind == d ]]; then created+=("$rel"); fi
    done <"$dest/$list"
fi
if [[ ! -d $dest ]]; then
    # Parents of the prefix (and DESTDIR) as mkdir -p makes them; the prefix
    # itself 0755 and recorded.
    mkdir -p "$(dirname "$dest")"
    install -d -m 0755 "$dest"
    created+=(.)
fi
for rel in "${DIRS[@]}"; do
    if [[ ! -d $dest/$rel ]]; then
        install -d -m 0755 "$dest/$rel"
        created+=("$rel")
    fi
done

echo "== installing memplug $version into $dest (prefix $prefix)"
install -m 0755 "${strip[@]}" "$release/memplug" "$dest/bin/memplug"
for p in "${PLUGINS[@]}"; do
    install -m 0644 "${strip[@]}" "$release/libmemplug_$p.so" "$dest/lib/memplug/plugins/"
done
install -m 0644 "${strip[@]}" "$release/libmemplug_preload.so" "$dest/lib/memplug/"
install -m 0644 "$root/abi/include/memplug.h" "$dest/include/memplug.h"
install -m 0644 "${strip[@]}" "$release/libmemplug_c.so" "$dest/lib/libmemplug.so.$version"
# The shared library other programs link is installed without its debug
# info (most of its size) even without --strip; its symbol table stays.
if ((${#strip[@]} == 0)); then strip --strip-debug "$dest/lib/libmemplug.so.$version"; fi
ln -sfn "libmemplug.so.$version" "$dest/lib/libmemplug.so.0"
ln -sfn libmemplug.so.0 "$dest/lib/libmemplug.so"
install -m 0644 "$release/libmemplug_c.a" "$dest/lib/libmemplug.a"
install -m 0644 "$root/capi/include/memplug_host.h" "$root/capi/include/memplug.hpp" "$dest/include/"
for m in "$root"/examples/manifests/*.memplug.toml; do
    install -m 0644 "$m" "$dest/share/memplug/manifests/"
done

for l in "${LICENSES[@]}"; do
    install -m 0644 "$root/$l" "$dest/share/doc/memplug/$l"
done

pc=$(mktemp)
gen=$(mktemp -d)
trap 'rm -rf "$pc" "$gen"' EXIT
# Man pages and completions, written by the command being installed from its
# own argument definitions.
"$release/memplug" man-pages "$gen/man" >/dev/null
for m in "$gen"/man/*.1; do
    install -m 0644 "$m" "$dest/share/man/man1/"
    man_pages+=("$(basename "$m")")
done
for c in "${COMPLETIONS[@]}"; do
    "$release/memplug" completions "${c%% *}" >"$gen/completion"
    install -m 0644 "$gen/completion" "$dest/${c#* }"
done
pc_file >"$pc"
install -m 0644 "$pc" "$dest/lib/pkgconfig/memplug.pc"
host_pc_file >"$pc"
install -m 0644 "$pc" "$dest/lib/pkgconfig/memplug-host.pc"

{
    echo "# memplug $version installed under $prefix; read by scripts/install.sh --uninstall"
    installed_files | sed 's/^/f /'
    printf '%s\n' "${created[@]}" | sort -u | sed '/^$/d; s/^/d /'
} >"$pc"
install -m 0644 "$pc" "$dest/$list"

echo "installed:"
installed_files | sed "s|^|  $dest/|"
echo "memplug $version is installed in $dest; run $prefix/bin/memplug check"
