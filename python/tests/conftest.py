"""Shared fixtures: the repository root (for examples/manifests), C-built
bad plugins, and a helper that runs `python -m memplug.numpy`."""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

import memplug
import memplug.numpy  # noqa: F401  (imported before any test: the GIL must stay off)

REPO = Path(__file__).resolve().parents[2]


#: Whether this interpreter is a free-threaded build (3.13t, 3.14t).
FREE_THREADED = sysconfig.get_config_var("Py_GIL_DISABLED") == 1


@pytest.fixture(scope="session", autouse=True)
def _search_path_loaded():
    memplug.load_search_path()


@pytest.fixture(autouse=True)
def _gil_stays_off():
    """On a free-threaded build, every test runs with the GIL off (memplug
    and memplug.numpy imported) and leaves it off."""
    if FREE_THREADED:
        assert not sys._is_gil_enabled(), "the GIL is on after `import memplug, memplug.numpy`"
    yield
    if FREE_THREADED:
        assert not sys._is_gil_enabled(), "the GIL was turned on during the test"


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
