"""``python -m memplug.numpy``: run a program with NumPy's data-memory handler
set to a memplug handler.

    python -m memplug.numpy --handler NAME [--plugin-path DIR]... [--report]
        [--report-json FILE] [--all-threads] [--no-cache] (-m MODULE | SCRIPT) [ARGS...]

The handler is installed in the program's main context before it starts
(new threads start from NumPy's default unless ``--all-threads``). The exit
status is the program's; 2 if memplug cannot set up (an unknown handler, a
refused plugin, no NumPy).
"""

from __future__ import annotations

import argparse
import json
import os
import runpy
import sys
import threading
import traceback
from typing import List, Optional, Sequence, Tuple

import memplug
import memplug.numpy as mnp
from memplug import _memplug as _native

from . import _report

USAGE = (
    "python -m memplug.numpy --handler NAME [--plugin-path DIR]... [--report] [--report-json FILE] "
    "[--all-threads] [--no-cache] (-m MODULE | SCRIPT) [ARGS...]"
)
_VALUED = {"--handler", "--plugin-path", "--report-json"}


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m memplug.numpy",
        usage=USAGE,
        description="Run a Python program with NumPy's data-memory handler set to a memplug handler.",
        epilog="Handlers: the bundled plugins, MEMPLUG_PLUGIN_PATH, --plugin-path; NAME may carry instance "
        "options, e.g. arena:region_size=1m. The exit status is the program's.",
    )
    p.add_argument("--handler", required=True, metavar="NAME", help="the memplug handler (NAME or NAME:OPTIONS)")
    p.add_argument(
        "--plugin-path", action="append", default=[], metavar="DIR",
        help="a plugin file or directory to load first (repeatable; wins names over the search path)",
    )
    p.add_argument("--report", action="store_true", help="print a report to stderr at exit")
    p.add_argument("--report-json", metavar="FILE", help="write the report as JSON to FILE at exit")
    p.add_argument(
        "--all-threads", action="store_true",
        help="also install the handler in every threading.Thread the program starts",
    )
    p.add_argument(
        "--no-cache", action="store_true",
        help="no cache of freed blocks in the bridge (sets MEMPLUG_NUMPY_CACHE=0, also for child processes)",
    )
    return p


def split_argv(argv: Sequence[str]) -> Tuple[List[str], Optional[str], Optional[str], List[str]]:
    """(memplug options, module, script, program args): the options end at
    ``-m MODULE`` or at the first argument that is not an option."""
    i = 0
    while i < len(argv):
        tok = argv[i]
        if tok == "-m":
            if i + 1 >= len(argv):
                break
            return list(argv[:i]), argv[i + 1], None, list(argv[i + 2:])
        if tok == "--":
            if i + 1 < len(argv):
                return list(argv[:i]), None, argv[i + 1], list(argv[i + 2:])
            break
        if tok in _VALUED:
            i += 2
            continue
        if tok.startswith("-"):
            i += 1
            continue
        return list(argv[:i]), None, tok, list(argv[i + 1:])
    return list(argv), None, None, []


def patch_threads(alloc: mnp.Allocator) -> None:
    """Make every ``threading.Thread`` started from now on set ``alloc``
    as NumPy's allocator before its ``run`` (subclasses' too)."""
    original_start = threading.Thread.start

    def start(self: threading.Thread) -> None:
        run = self.run

        def run_with_handler() -> None:
            mnp.set_allocator(alloc)
            run()

        self.run = run_with_handler  # type: ignore[method-assign]
        original_start(self)

    threading.Thread.start = start  # type: ignore[method-assign]


def _exit_code(e: SystemExit) -> int:
    if e.code is None:
        return 0
    if isinstance(e.code, int):
        return e.code
    print(e.code, file=sys.stderr)
    return 1


def _fail(error: Exception) -> int:
    code = getattr(error, "code", None)
    print(f"memplug.numpy: [{code}] {error}" if code else f"memplug.numpy: {error}", file=sys.stderr)
    return 2


def main(argv: Optional[Sequence[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    opts, module, script, rest = split_argv(argv)
    parser = _parser()
    args = parser.parse_args(opts)
    if module is None and script is None:
        parser.error("give the program to run: -m MODULE or SCRIPT")

    if args.no_cache:
        os.environ[_native.CACHE_ENV] = "0"
    try:
        if args.plugin_path:
            memplug.load(*args.plugin_path, strict=False)
        memplug.load_search_path()
        alloc = mnp.allocator(args.handler)
    except (memplug.Error, ImportError) as e:
        return _fail(e)

    mnp.set_allocator(alloc)
    if args.all_threads:
        patch_threads(alloc)

    status = 0
    try:
        if module is not None:
            sys.argv = [module, *rest]
            runpy.run_module(module, run_name="__main__", alter_sys=True)
        else:
            assert script is not None
            sys.argv = [script, *rest]
            sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
            runpy.run_path(script, run_name="__main__")
    except SystemExit as e:
        status = _exit_code(e)
    except KeyboardInterrupt:
        status = 130
    except BaseException:
        traceback.print_exc()
        status = 1

    if args.report or args.report_json:
        report = _report.build(args.handler, status, args.all_threads)
        if args.report:
            print(_report.format_text(report), file=sys.stderr)
        if args.report_json:
            with open(args.report_json, "w", encoding="utf-8") as f:
                json.dump(report, f, indent=2)
                f.write("\n")
    return status


if __name__ == "__main__":
    sys.exit(main())
