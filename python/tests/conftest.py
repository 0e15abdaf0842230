"""Shared fixtures: the repository root (for examples/manifests), C-built
bad plugins, and a helper that runs `python -m memplug.numpy`."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import memplug

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session", autouse=True)
def _search_path_loaded():
    memplug.load_search_path()


@pytest.fixture(scope="session")
def repo() -> Path:
    return REPO


@pytest.fixture(scope="session")
def cc() -> str:
    path = shutil.which("cc") or shutil.which("gcc")
    if path is None:
        pytest.fail("a C compiler (cc) is needed to build the bad plugin fixtures")
    return path


@pytest.fixture(scope="session")
def bad_magic_plugin(tmp_path_factory, cc) -> Path:
    """A library whose entry returns a struct that does not start with
    MEMPLUG_MAGIC."""
    d = tmp_path_factory.mktemp("bad")
    src = d / "bad_magic.c"
    src.write_text(
        "static const unsigned int junk[128] = {0xdeadbeefu, 1u};\n"
        "const void *memplug_handler(void) { return junk; }\n"
    )
    out = d / "libbad_magic.so"
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(out), str(src)], check=True)
    return out


def run_bridge(*args: str, cwd: Path | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    """`python -m memplug.numpy ARGS...` in a child process."""
    return subprocess.run(
        [sys.executable, "-m", "memplug.numpy", *args],
        cwd=cwd, capture_output=True, text=True, timeout=timeout,
    )
