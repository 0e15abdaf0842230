#!/usr/bin/env python3
"""Run part of NumPy's own test suite three times -- with NumPy's default
handler (the baseline), through `python -m memplug.numpy --handler tracking`
(`bridged`), and with an allocator made by `memplug.numpy.create_allocator`
of the C library's functions as ctypes functions, installed in every thread
(`created`, scripts/numpy-suite-created.py) -- and compare each with the
baseline.

Passes when every run has the baseline's outcome for every test (so the same
pass, fail, skip and xfail counts) -- tests that skipped themselves in one
run for want of free memory are listed, not counted -- and each memplug
run's report shows zero `bad_frees` and zero `size_mismatches` from the
plugin and no foreign pointers. NumPy's own size mismatches (a `free` given another size than was
allocated) are printed with where they happened; they are NumPy's, and the
bridge gave the plugin the right size each time.

    python scripts/numpy-suite.py                 # test_multiarray + test_numeric
    python scripts/numpy-suite.py --handler arena --modules numpy._core.tests.test_numeric
    python scripts/numpy-suite.py --runs bridged  # the baseline and one of the others
    python scripts/numpy-suite.py --parallel      # the runs at once
    python scripts/numpy-suite.py --runs created --baseline DIR/default.xml   # reuse a default run
    python scripts/numpy-suite.py --runs interposed --memplug target/release/memplug
        # the whole interpreter under `memplug run --handler guard:sample=1000`
        # (--run-handler): the same outcomes and no heap error reported
    python scripts/numpy-suite.py --all-threads --runs bridged --modules numpy._core.tests.test_multithreading
                                                  # the bridged run's threads allocate through it too

Run it with the Python that has numpy, pytest, hypothesis and memplug
installed (scripts/python-tests.sh makes such a virtual environment). The
runs go one after the other (about 2 minutes each on 2 idle cores). With
--parallel they run at once, which is quicker but can change outcomes: some of
NumPy's tests skip themselves when free memory is short, and the other runs
take memory.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

DEFAULT_MODULES = ["numpy._core.tests.test_multiarray", "numpy._core.tests.test_numeric"]
COMPARED = ["bridged", "created"]
EVERY_RUN = COMPARED + ["interposed"]
CREATED = Path(__file__).resolve().parent / "numpy-suite-created.py"


# NumPy's tests that need more memory than is free skip themselves with this
# message: an outcome of the machine at the time, not of the handler.
MEMORY_SKIP = re.compile(r"memory required, but .* available")


def memory_skips(junit: Path) -> set[str]:
    """The tests that skipped themselves for want of free memory."""
    return {
        f"{case.get('classname')}::{case.get('name')}"
        for case in ET.parse(junit).getroot().iter("testcase")
        for child in case
        if child.tag == "skipped" and MEMORY_SKIP.search(child.get("message") or "")
    }


def outcomes(junit: Path) -> dict[str, str]:
    """Test id -> passed | failed | error | skipped | xfailed, from JUnit XML."""
    result = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        tid = f"{case.get('classname')}::{case.get('name')}"
        kinds = [child.tag for child in case]
        if "failure" in kinds:
            kind = "failed"
        elif "error" in kinds:
            kind = "error"
        elif "skipped" in kinds:
            skipped = case.find("skipped")
            kind = "xfailed" if skipped is not None and skipped.get("type") == "pytest.xfail" else "skipped"
        else:
            kind = "passed"
        # A test can appear twice (e.g. an error in teardown): keep the worst.
        if result.get(tid) not in ("failed", "error"):
            result[tid] = kind
    return result


def check_run_report(report: Path) -> list[str]:
    """The problems `memplug run --report-json` shows: heap errors found."""
    if not report.exists():
        return ["the interposed run wrote no report"]
    data = json.loads(report.read_text())
    errors = data.get("errors", [])
    print(f"   interposed: {len(errors)} heap errors reported by {data.get('handler')} ({data.get('options')})")
    return [f"interposed: {e['kind']} at {e['address']:#x}: {[f['function'] for f in e['stack']][:4]}" for e in errors]


def check_report(name: str, report: Path) -> list[str]:
    """The problems a memplug run's report shows; prints its counters."""
    if name == "interposed":
        return check_run_report(report)
    if not report.exists():
        return [f"the {name} run wrote no report"]
    problems = []
    data = json.loads(report.read_text())
    plugin, bridge = data["plugin"], data["bridge"]
    if bridge is None or bridge["allocations"] == 0:
        problems.append(f"NumPy allocated nothing through the bridge in the {name} run")
    if plugin is not None:
        for key in ("bad_frees", "size_mismatches"):
            if plugin[key] != 0:
                problems.append(f"{name}: plugin {key} = {plugin[key]} (must be 0)")
    if bridge is not None:
        if bridge["foreign_pointers"]:
            problems.append(f"{name}: {bridge['foreign_pointers']} foreign pointers reached the bridge")
        print(
            f"   {name} bridge: {bridge['allocations']} allocations, {bridge['reallocs']} reallocs, "
            f"{bridge['null_frees']} free(NULL) filtered, {bridge['numpy_size_mismatches']} NumPy size mismatches"
        )
        for site in bridge["numpy_size_mismatch_sites"]:
            print(
                f"     {site['count']}x {site['file']}:{site['line']} in {site['function']} "
                f"(allocated {site['allocated']}, NumPy passed {site['passed']})"
            )
    return problems


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--handler", default="tracking")
    ap.add_argument("--modules", nargs="+", default=DEFAULT_MODULES)
    ap.add_argument("--runs", nargs="+", choices=EVERY_RUN, default=COMPARED, help="the runs compared with the baseline")
    ap.add_argument("--memplug", type=Path, help="the memplug command, for the interposed run")
    ap.add_argument("--run-handler", default="guard:sample=1000", help="the interposed run's handler")
    ap.add_argument("--parallel", action="store_true", help="run the suites at once (see above)")
    ap.add_argument("--workdir", type=Path, help="keep the JUnit XML and report here")
    ap.add_argument("--baseline", type=Path, help="a default run's JUnit XML to compare with, instead of running it")
    ap.add_argument("--all-threads", action="store_true",
                    help="the bridged run sets the handler in every thread the tests start (--all-threads)")
    args = ap.parse_args()

    work = (args.workdir or Path(tempfile.mkdtemp(prefix="numpy-suite-"))).resolve()
    work.mkdir(parents=True, exist_ok=True)
    pytest_args = ["-m", "pytest", "--pyargs", *args.modules, "-q", "-p", "no:cacheprovider", "-W", "ignore"]
    reports = {name: work / f"{name}-report.json" for name in args.runs}
    every = {
        "default": [sys.executable, *pytest_args, f"--junitxml={work / 'default.xml'}"],
        "bridged": [
            sys.executable, "-m", "memplug.numpy", "--handler", args.handler, "--report",
            *(["--all-threads"] if args.all_threads else []),
            "--report-json", str(work / "bridged-report.json"), *pytest_args, f"--junitxml={work / 'bridged.xml'}",
        ],
        "created": [
            sys.executable, str(CREATED), str(work / "created-report.json"),
            *pytest_args[2:], f"--junitxml={work / 'created.xml'}",
        ],
    }
    if "interposed" in args.runs:
        if args.memplug is None:
            ap.error("--runs interposed needs --memplug")
        every["interposed"] = [
            str(args.memplug.resolve()), "run", "--handler", args.run_handler, "--report-json",
            str(work / "interposed-report.json"), "--", sys.executable, *pytest_args,
            f"--junitxml={work / 'interposed.xml'}",
        ]
    runs = {name: cmd for name, cmd in every.items() if (name == "default" and not args.baseline) or name in args.runs}
    start = time.monotonic()
    procs = {}
    for name, cmd in runs.items():
        print(f"== {name}: {' '.join(cmd[1:])}", flush=True)
        log = open(work / f"{name}.log", "w")
        procs[name] = (subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=work), log)
        if not args.parallel:
            procs[name][0].wait()
    for name, (proc, log) in procs.items():
        proc.wait()
        log.close()
        tail = (work / f"{name}.log").read_text().strip().splitlines()
        summary = [line for line in tail if re.search(r"\b\d+ (passed|failed)\b.* in [\d.]+s", line)]
        print(f"   {name}: exit {proc.returncode}, {summary[-1] if summary else 'no summary'}")
    print(f"   all done in {time.monotonic() - start:.0f} s")

    problems = []
    xmls = {name: work / f"{name}.xml" for name in runs}
    if args.baseline:
        xmls["default"] = args.baseline
    got = {}
    short_of_memory: set[str] = set()
    for name, xml in xmls.items():
        if not xml.exists():
            problems.append(f"the {name} run wrote no JUnit XML (see {work / (name + '.log')})")
            continue
        got[name] = outcomes(xml)
        short_of_memory |= memory_skips(xml)
    base = got.get("default")
    if base is not None:
        print(f"   default: {dict(sorted(Counter(base.values()).items()))}")
        if not base:
            problems.append("no test ran")
    for name in args.runs:
        if base is None or name not in got:
            continue
        other = got[name]
        print(f"   {name}: {dict(sorted(Counter(other.values()).items()))}")
        differ = sorted(t for t in set(base) | set(other) if base.get(t) != other.get(t))
        for t in [t for t in differ if t in short_of_memory]:
            print(f"   note: {t}: default {base.get(t)}, {name} {other.get(t)} (skipped for want of free memory)")
        differ = [t for t in differ if t not in short_of_memory]
        for t in differ[:30]:
            problems.append(f"{t}: default {base.get(t, 'absent')}, {name} {other.get(t, 'absent')}")
        if len(differ) > 30:
            problems.append(f"... and {len(differ) - 30} more tests differ in the {name} run")
    for name, report in reports.items():
        problems += check_report(name, report)
    if problems:
        print("numpy-suite: FAILED")
        for p in problems:
            print(f"   {p}")
        return 1
    print(f"numpy-suite: ok: the same outcome for all {len(got['default'])} tests in runs {', '.join(args.runs)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
