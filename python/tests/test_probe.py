"""The worker probe from Python: plugins and library specs checked in a
child process (``python -m memplug._worker``) before they are loaded."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import memplug

ROOT = Path(__file__).resolve().parents[2]


def run(code: str, **env) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh interpreter (the probe setting is
    process-wide, and a refused plugin must not touch this one)."""
    e = dict(os.environ, **env)
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=e, timeout=120
    )


def test_probe_is_off_by_default_and_set_probe_turns_it_on_and_off():
    r = run(
        """
        import memplug
        assert memplug.probe() is None
        memplug.set_probe(timeout=5)
        p = memplug.probe()
        assert p["args"] == ["-m", "memplug._worker"] and p["timeout"] == 5.0, p
        memplug.set_probe(False)
        assert memplug.probe() is None
        print("ok")
        """
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ok"


def test_the_environment_variable_turns_it_on():
    r = run("import memplug; print(memplug.probe() is not None)", MEMPLUG_PROBE="1")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "True"


def test_a_probed_library_spec_loads_and_serves():
    r = run(
        """
        import memplug
        memplug.set_probe()
        h = memplug.from_library("libc.so.6", name="libc-probed")
        import numpy as np, memplug.numpy as mnp
        with mnp.allocator(h.name):
            a = np.arange(1000)
        print(mnp.get_allocator(a).name, int(a.sum()))
        """
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["memplug:libc-probed", str(sum(range(1000)))]


def test_a_plugin_that_crashes_in_the_worker_is_refused_and_this_process_lives(tmp_path):
    src = tmp_path / "crash.c"
    src.write_text(
        '#include <stdlib.h>\n__attribute__((constructor)) static void boom(void) { abort(); }\n'
        "void *my_malloc(size_t n) { return malloc(n); }\nvoid my_free(void *p) { free(p); }\n"
    )
    lib = tmp_path / "libcrash.so"
    cc = subprocess.run(["cc", "-shared", "-fPIC", "-o", str(lib), str(src)], capture_output=True, text=True)
    if cc.returncode != 0:
        pytest.skip(f"no C compiler: {cc.stderr.strip()}")
    r = run(
        f"""
        import memplug
        memplug.set_probe()
        try:
            memplug.from_library({str(lib)!r}, malloc="my_malloc", free="my_free")
        except memplug.LoadError as e:
            print("refused", e.code)
        """,
        MEMPLUG_TRUST="any",
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "refused crashed", r.stdout + r.stderr


def test_the_worker_module_refuses_to_run_by_hand():
    r = subprocess.run([sys.executable, "-m", "memplug._worker"], capture_output=True, text=True)
    assert r.returncode == 2
    assert "set_probe" in r.stderr
