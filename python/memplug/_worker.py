"""The worker process of memplug's probe, for Python programs.

``python -m memplug._worker __memplug-worker`` reads one probe request on
standard input, loads and checks the plugin (or the library spec) it names
in this expendable process, inside memplug's sandbox, and writes the answer
-- what the ``memplug`` executable does when it is the worker.
:func:`memplug.set_probe` runs it; nothing else should.
"""

from __future__ import annotations

import sys

#: The argument every memplug worker is started with.
WORKER_ARG = "__memplug-worker"


def main(argv: list) -> int:
    """Serve one request if ``argv`` is ``[WORKER_ARG]``; the exit status."""
    if argv != [WORKER_ARG]:
        print(
            "memplug._worker: this module is memplug's probe worker; it is started by "
            "memplug.set_probe(), with the single argument " + WORKER_ARG,
            file=sys.stderr,
        )
        return 2
    from . import _memplug as _native

    return _native.serve_worker()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
