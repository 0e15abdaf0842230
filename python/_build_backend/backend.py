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
building them (an offline or cross build that made them already).
Everything else is maturin's backend unchanged.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import maturin
from maturin import (  # noqa: F401  (re-exported: the rest of PEP 517)
    build_sdist,
    get_requires_for_build_editable,
    get_requires_for_build_sdist,
    get_requires_for_build_wheel,
    prepare_metadata_for_build_editable,
    prepare_metadata_for_build_wheel,
)

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
        sources = sorted(Path(prebuilt).glob(f"*{SUFFIX}"))
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
        if strip:
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
