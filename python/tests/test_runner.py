"""`python -m memplug.numpy`: running programs under a handler."""

from __future__ import annotations

import json
import textwrap

from conftest import run_bridge

SCRIPT = """
import sys, threading
import numpy as np
from numpy._core.multiarray import get_handler_name

import builtins
builtins.kept_by_test = np.ones(1000)    # outlives the program's module
grown = np.fromstring("", sep=" ")       # a NumPy size mismatch
del grown
seen = []
t = threading.Thread(target=lambda: seen.append(get_handler_name()))
t.start(); t.join()
print("main", get_handler_name(), "thread", seen[0], "args", sys.argv[1:])
sys.exit(int(sys.argv[1]))
"""


def test_runs_a_script_with_its_exit_status_and_writes_the_report(tmp_path):
    script = tmp_path / "prog.py"
    script.write_text(SCRIPT)
    report = tmp_path / "report.json"
    r = run_bridge("--handler", "tracking", "--report", "--report-json", str(report), str(script), "3", "--flag")
    assert r.returncode == 3, r.stderr
    assert "main memplug:tracking thread default_allocator args ['3', '--flag']" in r.stdout
    assert "memplug.numpy: handler tracking" in r.stderr
    assert "NumPy size mismatches: 1" in r.stderr
    data = json.loads(report.read_text())
    assert data["handler"] == "tracking" and data["exit_status"] == 3
    assert data["plugin"]["bad_frees"] == 0 and data["plugin"]["size_mismatches"] == 0
    b = data["bridge"]
    assert b["live_blocks"] >= 1 and b["live_bytes"] >= 8000  # `kept_by_test` is alive at exit
    assert b["peak_bytes"] >= b["live_bytes"]
    [site] = b["numpy_size_mismatch_sites"]
    assert site["file"] == str(script) and site["line"] == 9


def test_all_threads_installs_in_new_threads(tmp_path):
    script = tmp_path / "prog.py"
    script.write_text(SCRIPT)
    r = run_bridge("--handler", "system", "--all-threads", str(script), "0")
    assert r.returncode == 0, r.stderr
    assert "main memplug:system thread memplug:system" in r.stdout


def test_runs_a_module(tmp_path):
    (tmp_path / "progmod.py").write_text(textwrap.dedent("""
        import numpy as np
        from numpy._core.multiarray import get_handler_name
        print(__name__, get_handler_name(np.zeros(3)))
    """))
    r = run_bridge("--handler", "arena:region_size=256k", "-m", "progmod", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "__main__ memplug:arena:region_size=256k"


def test_an_uncaught_exception_exits_1_with_the_traceback(tmp_path):
    script = tmp_path / "boom.py"
    script.write_text("raise ValueError('boom')\n")
    r = run_bridge("--handler", "system", str(script))
    assert r.returncode == 1
    assert "ValueError: boom" in r.stderr


def test_an_unknown_handler_is_a_setup_error(tmp_path):
    script = tmp_path / "prog.py"
    script.write_text("print('ran')\n")
    r = run_bridge("--handler", "nope", str(script))
    assert r.returncode == 2
    assert "[unknown-handler]" in r.stderr and "tracking" in r.stderr
    assert "ran" not in r.stdout


def test_plugin_path_adds_plugins(tmp_path, bad_magic_plugin):
    script = tmp_path / "prog.py"
    script.write_text("print('ran')\n")
    r = run_bridge("--plugin-path", str(bad_magic_plugin.parent), "--handler", "bad", str(script))
    assert r.returncode == 2 and "[unknown-handler]" in r.stderr
    r = run_bridge("--handler", "tracking", "--plugin-path", str(bad_magic_plugin.parent), str(script))
    assert r.returncode == 0 and r.stdout.strip() == "ran"


def test_usage_errors_exit_2():
    r = run_bridge("--handler", "tracking")
    assert r.returncode == 2 and "-m MODULE or SCRIPT" in r.stderr
    r = run_bridge("-m", "json.tool")
    assert r.returncode == 2 and "--handler" in r.stderr


def test_options_end_at_the_program():
    from memplug.numpy.__main__ import split_argv

    assert split_argv(["--handler", "x", "-m", "mod", "-q", "--handler", "y"]) == (
        ["--handler", "x"], "mod", None, ["-q", "--handler", "y"],
    )
    assert split_argv(["--handler=x", "--report", "s.py", "-m", "z"]) == (
        ["--handler=x", "--report"], None, "s.py", ["-m", "z"],
    )
    assert split_argv(["--plugin-path", "d", "--handler", "x", "--", "-odd.py"]) == (
        ["--plugin-path", "d", "--handler", "x"], None, "-odd.py", [],
    )
