"""PEP 517 build backend for the memplug package: maturin, after building
the workspace's bundled plugins and copying them into the package.

`pip install ./python` (or `pip wheel ./python`, `maturin build`) calls
`build_wheel`; before maturin builds the extension module, this backend

1. asks `cargo metadata` for the workspace one directory up (the memplug
   repository) and picks every member under `plugins/` that builds a
   `cdylib` -- the bundled plugins, whatever their number;
2. builds them with `cargo build --release -p ...` (cargo's own caching makes
   this quick when `cargo build --release --workspace` ran before);
3. copies each `lib<name>.so` into `memplug/plugins/` (without its debug
   information, when `strip` is available), which maturin packs into the
   wheel (`[tool.maturin] include` in pyproject.toml).

Set MEMPLUG_PLUGINS_FROM=DIR to copy the `*.so` files of DIR instead of
building them (an offline or cross build that made them already, such as
scripts/build-wheel.sh's builds for glibc 2.17): they are copied as they
are, not stripped, since a host's `strip` may not read another
architecture's files. DIR is absolute or relative to python/; the build
fails if it holds no `*.so`.

`build_sdist` is this backend's own: maturin's source distribution holds
only the crates the extension module depends on, while the wheel also needs
the workspace's plugin crates (and cargo needs every workspace member to
load the workspace). The sdist is the repository's layout, cut down to what
`cargo package --list` names for each crate of the workspace and for
python/, plus a pyproject.toml at its top that points maturin and this
backend into python/ (`sdist_pyproject`) and the PKG-INFO maturin writes.
So `pip install memplug-<version>.tar.gz` builds like `pip install ./python`:
it needs a Rust toolchain (cargo) and a C linker, nothing else.

Everything else is maturin's backend unchanged.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import maturin
from maturin import (  # noqa: F401  (re-exported: the rest of PEP 517)
    get_requires_for_build_editable,
    get_requires_for_build_sdist,
    get_requires_for_build_wheel,
    prepare_metadata_for_build_editable,
    prepare_metadata_for_build_wheel,
)

# The same in a checkout and in an unpacked sdist, which keeps the layout.
HERE = Path(__file__).resolve().parent.parent  # python/
WORKSPACE = HERE.parent  # the memplug repository
DEST = HERE / "memplug" / "plugins"
SUFFIX = ".dylib" if sys.platform == "darwin" else ".so"


def _log(msg: str) -> None:
    print(f"memplug build: {msg}", file=sys.stderr, flush=True)


def plugin_crates(metadata: dict) -> list[tuple[str, str]]:
    """(package name, cdylib target name) of every workspace member under
    plugins/ that builds a cdylib."""
    root = Path(metadata["workspace_root"]).resolve()
    members = set(metadata["workspace_members"])
    found = []
    for pkg in metadata["packages"]:
        if pkg["id"] not in members:
            continue
        manifest = Path(pkg["manifest_path"]).resolve()
        if root / "plugins" not in manifest.parents:
            continue
        for target in pkg["targets"]:
            if "cdylib" in target["kind"]:
                found.append((pkg["name"], target["name"].replace("-", "_")))
    return sorted(found)


def build_plugins() -> list[Path]:
    """Build the bundled plugins and copy them into memplug/plugins/."""
    DEST.mkdir(parents=True, exist_ok=True)
    for old in DEST.glob(f"*{SUFFIX}"):
        old.unlink()
    prebuilt = os.environ.get("MEMPLUG_PLUGINS_FROM")
    if prebuilt:
        sources = sorted((HERE / prebuilt).glob(f"*{SUFFIX}"))
        if not sources:
            raise RuntimeError(
                f"MEMPLUG_PLUGINS_FROM={prebuilt}: no *{SUFFIX} in {HERE / prebuilt}; "
                "build the plugins there first, or unset it to build them here"
            )
    else:
        cargo = os.environ.get("CARGO", "cargo")
        out = subprocess.run(
            [cargo, "metadata", "--format-version", "1", "--no-deps"],
            cwd=WORKSPACE, check=True, capture_output=True, text=True,
        ).stdout
        metadata = json.loads(out)
        crates = plugin_crates(metadata)
        if not crates:
            raise RuntimeError(f"no plugin crates found under {WORKSPACE / 'plugins'}")
        args = [cargo, "build", "--release"]
        for name, _ in crates:
            args += ["-p", name]
        _log(" ".join(args))
        subprocess.run(args, cwd=WORKSPACE, check=True)
        release = Path(metadata["target_directory"]) / "release"
        sources = [release / f"lib{lib}{SUFFIX}" for _, lib in crates]
    copied = []
    for src in sources:
        if not src.is_file():
            raise RuntimeError(f"plugin {src} was not built")
        dst = DEST / src.name
        shutil.copy2(src, dst)
        strip = shutil.which("strip")
        if strip and not prebuilt:
            subprocess.run([strip, "--strip-debug", str(dst)], check=True)
        copied.append(dst)
    _log("bundled " + ", ".join(p.name for p in copied))
    return copied


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    build_plugins()
    return maturin.build_wheel(wheel_directory, config_settings, metadata_directory)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    build_plugins()
    return maturin.build_editable(wheel_directory, config_settings, metadata_directory)


# python/pyproject.toml's lines that name paths, and what they become in the
# sdist's top-level copy (whose directory is the workspace, not python/).
SDIST_PYPROJECT_EDITS = [
    ('backend-path = ["_build_backend"]', 'backend-path = ["python/_build_backend"]'),
    ('readme = "README.md"', 'readme = "python/README.md"'),
    ('[tool.maturin]\n', '[tool.maturin]\nmanifest-path = "python/Cargo.toml"\npython-source = "python"\n'),
    ('path = "memplug/plugins/*.so"', 'path = "python/memplug/plugins/*.so"'),
]


def sdist_pyproject(text: str) -> str:
    """The sdist's top-level pyproject.toml, made from python/pyproject.toml:
    every path in it made relative to the workspace. Raises if one of the
    lines it rewrites is missing (pyproject.toml changed: update the edits)."""
    for old, new in SDIST_PYPROJECT_EDITS:
        if text.count(old) != 1:
            raise RuntimeError(f"python/pyproject.toml: expected {old!r} exactly once")
        text = text.replace(old, new)
    return text


def _package_files(cargo: str, manifest: Path) -> list[Path]:
    """The files `cargo package --list` names for one crate, as paths
    relative to the workspace (Cargo.toml and Cargo.lock as they are in the
    tree, not cargo's normalised copies; built libraries and Python's byte
    code never, even where git does not ignore them)."""
    out = subprocess.run(
        [cargo, "package", "--list", "--allow-dirty", "--quiet", "--manifest-path", str(manifest)],
        cwd=WORKSPACE, check=True, capture_output=True, text=True,
    ).stdout
    crate = manifest.parent
    files = []
    for line in out.splitlines():
        path = crate / line
        if not path.is_file():  # .cargo_vcs_info.json, Cargo.toml.orig: cargo's own
            continue
        if path.suffix in (SUFFIX, ".pyc") or "__pycache__" in path.parts:
            continue
        files.append(path.relative_to(WORKSPACE))
    return files


def sdist_files() -> list[Path]:
    """Every file of the sdist, relative to the workspace: each crate of the
    workspace (the host, the ABI crate, the plugins, the interposer) and
    python/ with the package, its crate and this backend."""
    cargo = os.environ.get("CARGO", "cargo")
    out = subprocess.run(
        [cargo, "metadata", "--format-version", "1", "--no-deps"],
        cwd=WORKSPACE, check=True, capture_output=True, text=True,
    ).stdout
    metadata = json.loads(out)
    members = set(metadata["workspace_members"])
    manifests = [Path(p["manifest_path"]) for p in metadata["packages"] if p["id"] in members]
    files = {WORKSPACE / "Cargo.lock", HERE / "Cargo.lock"}
    files = {p.relative_to(WORKSPACE) for p in files if p.is_file()}
    for manifest in [*manifests, HERE / "Cargo.toml"]:
        files.update(_package_files(cargo, manifest))
    return sorted(files)


def _pkg_info(tmp: Path) -> tuple[str, str]:
    """(version, PKG-INFO text): the core metadata maturin writes for the
    wheel, which is what PKG-INFO holds."""
    cwd = os.getcwd()
    os.chdir(HERE)
    try:
        dist_info = maturin.prepare_metadata_for_build_wheel(str(tmp))
    finally:
        os.chdir(cwd)
    text = (tmp / dist_info / "METADATA").read_text()
    version = next(line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("Version:"))
    return version, text


def build_sdist(sdist_directory, config_settings=None):
    """The source distribution `memplug-<version>.tar.gz` (see the module's
    documentation for what it holds)."""
    with tempfile.TemporaryDirectory() as tmp:
        version, pkg_info = _pkg_info(Path(tmp))
        top = f"memplug-{version}"
        name = f"{top}.tar.gz"
        generated = {
            "PKG-INFO": pkg_info,
            "pyproject.toml": sdist_pyproject((HERE / "pyproject.toml").read_text()),
        }
        files = sdist_files()

        def normalise(info: tarfile.TarInfo) -> tarfile.TarInfo:
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            return info

        path = Path(sdist_directory) / name
        with tarfile.open(path, "w:gz", format=tarfile.PAX_FORMAT, dereference=True) as tar:
            for arcname, text in generated.items():
                data = text.encode()
                info = normalise(tarfile.TarInfo(f"{top}/{arcname}"))
                info.size, info.mode = len(data), 0o644
                info.mtime = int((HERE / "pyproject.toml").stat().st_mtime)
                tar.addfile(info, io.BytesIO(data))
            for rel in files:
                tar.add(WORKSPACE / rel, arcname=f"{top}/{rel.as_posix()}", filter=normalise)
    _log(f"sdist {name}: {len(files) + len(generated)} files")
    return name
