#!/usr/bin/env python3
"""Run pytest with NumPy's handler set, in every thread, to an allocator made
by `memplug.numpy.create_allocator` of the C library's malloc, calloc,
realloc and free as ctypes functions; write the bridge's report as JSON.

    python scripts/numpy-suite-created.py REPORT.json [PYTEST ARGS...]

scripts/numpy-suite.py runs it as its `created` configuration, beside
NumPy's default handler and `python -m memplug.numpy --handler tracking`.
The exit status is pytest's; 2 if the allocator cannot be made.
"""

from __future__ import annotations

import ctypes
import json
import sys
import threading

NAME = "libc-ctypes"


def libc_functions() -> dict:
    """The C library's allocation functions as ctypes functions with their
    C signatures."""
    libc = ctypes.CDLL(None)
    size, ptr = ctypes.c_size_t, ctypes.c_void_p
    sigs = {"malloc": (ptr, [size]), "calloc": (ptr, [size, size]), "realloc": (ptr, [ptr, size]), "free": (None, [ptr])}
    functions = {}
    for role, (restype, argtypes) in sigs.items():
        fn = getattr(libc, role)
        fn.restype, fn.argtypes = restype, argtypes
        functions[role] = fn
    return functions


def install_everywhere(allocator, set_allocator) -> None:
    """Set `allocator` now and in every thread started from now on."""
    set_allocator(allocator)
    original_start = threading.Thread.start

    def start(self: threading.Thread) -> None:
        run = self.run

        def run_with_handler() -> None:
            set_allocator(allocator)
            run()

        self.run = run_with_handler  # type: ignore[method-assign]
        original_start(self)

    threading.Thread.start = start  # type: ignore[method-assign]


def main(argv: list) -> int:
    report_path, pytest_args = argv[0], argv[1:]
    import pytest

    import memplug
    import memplug.numpy as mnp

    try:
        allocator = mnp.create_allocator(name=NAME, **libc_functions())
    except memplug.Error as e:
        print(f"numpy-suite-created: [{e.code}] {e}", file=sys.stderr)
        return 2
    install_everywhere(allocator, mnp.set_allocator)
    status = int(pytest.main(pytest_args))
    stats = memplug.stats(allocator.handler.name)
    with open(report_path, "w", encoding="utf-8") as f:
        json.dump({"handler": NAME, "exit_status": status, "bridge": stats["bridge"], "plugin": stats["plugin"]}, f, indent=2)
        f.write("\n")
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
