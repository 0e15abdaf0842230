"""memplug: load memory allocators from shared libraries at run time, and use
them as NumPy's data-memory handler (NEP 49).

The package links the memplug library (the same loader and checks as the
``memplug`` command) and ships the bundled plugins (``system``,
``aligned``, ``tracking``, ``arena``, ...), so they load with no setup::

    import memplug
    memplug.load_search_path()        # MEMPLUG_PLUGIN_PATH, user dir, bundled, system dirs
    [h["name"] for h in memplug.handlers()]

    import numpy as np
    import memplug.numpy
    with memplug.numpy.allocator("tracking"):
        a = np.ones(1000)             # its data comes from the tracking plugin

Search path (:func:`search_path`), in order: the directories in
``MEMPLUG_PLUGIN_PATH`` (colon-separated), the user directory, the package's
own plugin directory (:data:`PLUGIN_DIR`), then the system directories --
memplug's own convention with the package's plugins in it. A plugin found
earlier wins a name; a later one with the same name is refused as
``duplicate-name``. :func:`load` adds files and
directories, and ``python -m memplug.numpy --plugin-path DIR`` does too.
Handlers are looked up lazily: the first call that needs one loads the
search path.

Allocators can also be defined at run time, with no plugin file
(:func:`from_library`: a library's C functions by symbol name;
:func:`from_functions`: ctypes functions, addresses or Python callables)::

    h = memplug.from_library("libmimalloc.so.2", malloc="mi_malloc", free="mi_free")
    with memplug.numpy.allocator(h):
        a = np.ones(1000)             # its data comes from mimalloc
"""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path
from typing import Any, Dict, List, Optional, Union

from . import _memplug as _native
from ._errors import Error, ForeignMemoryError, LoadError, NumpyError, ShareError, UnknownHandlerError
from ._define import Handler, from_functions, from_library, handler, library_name

__all__ = [
    "Error",
    "LoadError",
    "NumpyError",
    "ShareError",
    "UnknownHandlerError",
    "ForeignMemoryError",
    "PLUGIN_DIR",
    "PATH_ENV",
    "search_path",
    "search_path_origins",
    "load",
    "load_search_path",
    "handlers",
    "names",
    "stats",
    "Handler",
    "handler",
    "from_library",
    "from_functions",
    "library_name",
    "PROBE_ENV",
    "set_probe",
    "probe",
]

__version__ = "0.1.0"

#: The directory of the plugins shipped in this package.
PLUGIN_DIR: Path = Path(__file__).resolve().parent / "plugins"
#: The environment variable that turns the worker probe on at import
#: (``1``, ``on``, ``yes``, ``true``); see :func:`set_probe`.
PROBE_ENV = "MEMPLUG_PROBE"
#: The environment variable with extra plugin directories.
PATH_ENV = "MEMPLUG_PLUGIN_PATH"

PathLike = Union[str, "os.PathLike[str]"]
Outcome = Dict[str, Any]

_search_loaded = False
_lock = threading.Lock()


def search_path() -> List[Path]:
    """The plugin directories searched, in order: ``MEMPLUG_PLUGIN_PATH``'s
    entries, the user directory (``$XDG_DATA_HOME/memplug/plugins``, by
    default ``~/.local/share/memplug/plugins``), this package's
    :data:`PLUGIN_DIR`, then the system directories (``<the interpreter's
    prefix>/lib/memplug/plugins``, ``/usr/local/lib/memplug/plugins``,
    ``/usr/lib/memplug/plugins``, or ``MEMPLUG_SYSTEM_PLUGIN_PATH``'s
    entries when it is set) -- memplug's own search path with the package's
    plugins in it. See :func:`search_path_origins` for why each is there."""
    return [Path(p) for p, _ in _native.search_path(os.fspath(PLUGIN_DIR))]


def search_path_origins() -> List[Dict[str, Any]]:
    """:func:`search_path` with why each directory is there: dicts with
    ``path`` (a :class:`~pathlib.Path`) and ``origin`` (``"MEMPLUG_PLUGIN_PATH"``, ``"user"``,
    ``"package"``, ``"MEMPLUG_SYSTEM_PLUGIN_PATH"``, ``"system"``)."""
    return [{"path": p, "origin": o} for p, o in _native.search_path(os.fspath(PLUGIN_DIR))]


def _refused_message(refused: List[Outcome]) -> str:
    lines = [f"{o['path']}: [{o['reason']}] {o['message']}" for o in refused]
    return "; ".join(lines)


def load(*paths: PathLike, strict: bool = True) -> List[Outcome]:
    """Load plugin libraries (``*.so``), allocator manifests
    (``*.memplug.toml``) and directories of them into memplug's registry.

    Returns one outcome per candidate, as ``memplug check --json`` reports
    it: ``path``, ``symbol``, ``status`` (``"ok"``, ``"rejected"``, or
    ``"shadowed"``: a directory's plugin whose handler name a plugin from an
    earlier directory has, which is not a failure), ``reason`` (a reason
    code, or None), ``message``, ``name``, ``version``, ``abi``. A file
    named here whose handler name is taken already is rejected as
    ``duplicate-name``. A candidate loaded before reports its first outcome
    again.

    With ``strict`` (the default) a refused candidate raises
    :class:`LoadError` after every candidate was tried: its ``code`` is the
    first refusal's, its ``outcomes`` all of them. ``strict=False`` only
    returns the outcomes.
    """
    outcomes: List[Outcome] = _native.load([os.fspath(p) for p in paths])
    refused = [o for o in outcomes if o["status"] not in ("ok", "shadowed")]
    if strict and refused:
        first = refused[0]
        raise LoadError(_refused_message(refused), first["reason"], first["path"], outcomes)
    return outcomes


def load_search_path() -> List[Outcome]:
    """Load every candidate on :func:`search_path`; the outcomes (never
    raises for a refused candidate: a plugin directory may hold anything)."""
    global _search_loaded
    with _lock:
        outcomes = _native.load([os.fspath(d) for d in search_path() if d.is_dir()])
        _search_loaded = True
    return outcomes


def _ensure_loaded() -> None:
    if not _search_loaded:
        load_search_path()


def handlers() -> List[Dict[str, Any]]:
    """Every registered handler (loading the search path first, once): dicts
    with ``name``, ``version``, ``abi``, ``alignment``, ``thread_safe``,
    ``memory_kind`` (its DLPack name, e.g. ``"kDLCPU"``), ``source``,
    ``flags``, ``takes_options``, ``has_stats``, ``deprecated``,
    ``options``."""
    _ensure_loaded()
    return _native.handlers()


def names() -> List[str]:
    """The registered handler names, sorted (loading the search path first,
    once)."""
    _ensure_loaded()
    return _native.names()


def stats(name: str) -> Dict[str, Any]:
    """Statistics of handler ``name`` (or ``"name:options"``).

    Returns a dict with ``name``, ``handler`` (its information dict),
    ``plugin`` -- the plugin's own statistics (``live_bytes``,
    ``peak_bytes``, ``total_allocations``, ``live_count``, ``bad_frees``,
    ``size_mismatches``), or None if it reports none -- and ``bridge`` --
    the NumPy bridge's counters, or None if NumPy was never given this
    handler: ``allocations``, ``frees``, ``reallocs``, ``bytes_allocated``,
    ``bytes_freed``, ``live_blocks``, ``live_bytes``, ``peak_bytes`` (checked
    whenever a thread's net growth reaches :data:`PEAK_CHECK_BYTES`: exact
    for large blocks, and short by at most that much, plus what the cache's
    small-block lists hold (``_native.CACHE_LISTS_MAX_BYTES``), per thread
    for small ones), ``null_frees`` (NumPy's ``free(NULL)``
    calls, filtered out), ``numpy_size_mismatches`` and
    ``numpy_size_mismatch_sites`` (frees where NumPy passed a size other
    than the block's, with the Python file, line and function), and
    ``foreign_pointers`` with its sites (pointers NumPy handed back that the
    bridge never made: never passed to the plugin), ``header_bytes`` and
    ``data_alignment`` (64 for shareable handlers, whose arrays the bridge
    pads), and the cache of freed blocks: ``cache`` (``"on"``, ``"off"`` or
    ``"never"``, then ``cache_refusal`` says why), ``cached_blocks`` and
    ``cached_bytes`` (blocks held for reuse, which the plugin counts as
    allocated; see :meth:`memplug.numpy.Allocator.set_cache`).

    Raises :class:`UnknownHandlerError` if no handler has that name.
    """
    _ensure_loaded()
    return _native.stats(name)


#: A thread's net growth, in bytes, between two checks of the peak.
PEAK_CHECK_BYTES: int = _native.PEAK_CHECK_BYTES


def set_probe(enabled: bool = True, *, timeout: float = 10.0, worker: Optional[PathLike] = None) -> None:
    """Check every plugin, manifest and :func:`from_library` spec in a worker
    process before it is loaded into this one -- what ``memplug check``
    does -- or stop doing so (``enabled=False``, the default state).

    A plugin is foreign code: its constructors run as soon as it is opened,
    before any check. With the probe on, a child process opens it first,
    inside memplug's sandbox, and runs the conformance pass; a plugin whose
    worker crashes, hangs past ``timeout`` seconds, exits, reports a failed
    check or makes a system call the sandbox forbids is refused
    (:class:`LoadError` with ``code`` ``crashed``, ``timed-out``,
    ``no-report``, ``conformance-failed``, ``fork-unsafe`` or
    ``forbidden-call``) and never opened here. Verdicts on plugin files go into memplug's verdict cache, so an
    unchanged file is probed once. The worker is this interpreter running
    :mod:`memplug._worker` unless ``worker`` names a ``memplug`` executable.
    Setting :data:`PROBE_ENV` (``MEMPLUG_PROBE=1``) turns it on at import.
    :func:`from_functions` is never probed: its functions exist only in
    this process (its conformance pass runs here).
    """
    if not enabled:
        _native.set_probe(None)
    elif worker is None:
        _native.set_probe((sys.executable, ["-m", "memplug._worker"]), timeout)
    else:
        _native.set_probe((os.fspath(worker), []), timeout)


def probe() -> Optional[Dict[str, Any]]:
    """The worker probe's settings (``program``, ``args``, ``timeout``), or
    None when plugins are loaded without one (see :func:`set_probe`)."""
    p = _native.probe()
    if p is None:
        return None
    program, args, timeout = p
    return {"program": program, "args": args, "timeout": timeout}


if os.environ.get(PROBE_ENV, "").strip().lower() in ("1", "on", "yes", "true"):
    set_probe(True)
