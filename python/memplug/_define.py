"""Allocators defined from Python at run time, and :class:`Handler`, the
object that names a registered handler.

- :func:`from_library` -- a library's C functions by symbol name: an
  allocator manifest (``*.memplug.toml``) given as a call;
- :func:`from_functions` -- C functions (ctypes function objects, integer
  addresses) or Python callables;
- :func:`handler` -- the :class:`Handler` of a name already registered.

The guide's chapter "Allocators defined from Python" has examples and the
rules (signatures, lifetimes, threads, exceptions).
"""

from __future__ import annotations

import ctypes
import itertools
import os
import threading
from typing import Any, Callable, Dict, List, Optional, Union

from . import _memplug as _native
from ._errors import LoadError

__all__ = ["Handler", "handler", "from_library", "from_functions", "library_name"]

#: Every object given to :func:`from_functions`, and every library opened
#: by ctypes for it: kept for the life of the process, because the
#: handler may call them until then.
_kept: List[Any] = []
_kept_lock = threading.Lock()
#: The numbers of the names :func:`from_functions` makes up.
_names = itertools.count(1)


class Handler:
    """A registered memplug handler (or an instance of one, ``name:options``).

    Compares and hashes by :attr:`name`. Its NumPy allocator is
    :func:`memplug.numpy.allocator` of it::

        h = memplug.handler("tracking")
        with memplug.numpy.allocator(h):
            a = np.ones(10)
    """

    __slots__ = ("_name",)

    def __init__(self, name: str) -> None:
        self._name = name

    @property
    def name(self) -> str:
        """The registered name (``name`` or ``name:options``), as
        :func:`memplug.stats` and :func:`memplug.numpy.allocator` take it."""
        return self._name

    @property
    def info(self) -> Dict[str, Any]:
        """The information dict :func:`memplug.handlers` gives for this
        handler (``name``, ``version``, ``abi``, ``alignment``,
        ``thread_safe``, ``source``, ...)."""
        return self.stats()["handler"]

    def stats(self) -> Dict[str, Any]:
        """:func:`memplug.stats` of this handler."""
        from . import stats

        return stats(self._name)

    def instantiate(self, options: str) -> "Handler":
        """The handler of the instance made with ``options`` (a
        ``key=value,...`` string, e.g. ``"region_size=1m"``), through the
        plugin's ABI 1.1 ``create``; raises :class:`LoadError` (``no-options``,
        ``bad-options``) if the plugin refuses."""
        return handler(f"{self._name}:{options}")

    def __repr__(self) -> str:
        return f"memplug.Handler({self._name!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Handler) and other._name == self._name

    def __hash__(self) -> int:
        return hash(("memplug.Handler", self._name))


def handler(name: str) -> Handler:
    """The :class:`Handler` registered under ``name`` (loading the search path
    first, once), or of the instance ``"name:options"`` (made now if it was
    not yet). Raises :class:`UnknownHandlerError` for an unknown name and
    :class:`LoadError` for options the plugin refuses."""
    from . import _ensure_loaded

    _ensure_loaded()
    if ":" in name:
        _native.stats(name)  # makes the instance, or raises why not
    elif name not in _native.names():
        _native.stats(name)  # raises UnknownHandlerError, naming the known ones
    return Handler(name)


def _handler_of(outcome: Dict[str, Any]) -> Handler:
    if outcome["status"] != "ok":
        raise LoadError(f"{outcome['source']}: [{outcome['reason']}] {outcome['message']}", outcome["reason"], outcome["source"], [outcome])
    return Handler(outcome["name"])


def library_name(library: Union[str, "os.PathLike[str]"]) -> str:
    """The handler name :func:`from_library` derives from a library (the
    same rule as ``memplug check --library`` without ``--name``): the file
    name (after the last ``/``) up to its first ``.so``, without a leading
    ``lib``; characters outside ``[A-Za-z0-9_.-]`` become ``_``; at most 127
    bytes; ``"symbols"`` if nothing is left. ``libmimalloc.so.2`` gives
    ``mimalloc``, ``/opt/lib/libtcmalloc_minimal.so.4`` gives
    ``tcmalloc_minimal``, ``libc.so.6`` gives ``c``."""
    return _native.library_name(os.fspath(library))


def from_library(
    library: Union[str, "os.PathLike[str]"],
    *,
    name: Optional[str] = None,
    malloc: str = "malloc",
    free: str = "free",
    calloc: Optional[str] = None,
    realloc: Optional[str] = None,
    sized_free: Optional[str] = None,
    aligned_alloc: Optional[str] = None,
    thread_safe: bool = True,
    alignment: int = 16,
    version: str = "0.0.0",
) -> Handler:
    """Register a library's C allocation functions, taken by symbol name, as
    a handler: the allocator manifest (``*.memplug.toml``) as a call.

    ``library`` is a path (anything with a ``/``; its file is checked as any
    plugin file is) or a soname the dynamic loader finds (``"libc.so.6"``,
    ``"libmimalloc.so.2"``). The library stays loaded for the process. The
    functions have plain C signatures: ``malloc(size)``, ``free(ptr)``,
    ``calloc(nelem, size)``, ``realloc(ptr, size)``, ``sized_free(ptr,
    size)`` (used instead of ``free`` when given),
    ``aligned_alloc(alignment, size)``; ``calloc`` and ``realloc`` are
    derived from ``malloc`` and ``free`` when not given. ``name`` defaults to
    :func:`library_name` of the library.

    Checked exactly as a manifest is -- the same rules, the worker probe
    and verdict cache when the registry's policy asks for them --
    and refused with the same reason codes: :class:`LoadError` with
    ``.code`` ``"missing-symbol"``, ``"not-a-library"``, ``"bad-name"``,
    ``"bad-alignment"``, ``"duplicate-name"``, ``"conformance-failed"``, ...
    The same arguments again give the same handler.
    """
    lib = os.fspath(library)
    symbols = {
        "malloc": malloc,
        "free": free,
        "calloc": calloc,
        "realloc": realloc,
        "sized_free": sized_free,
        "aligned_alloc": aligned_alloc,
    }
    handler_name = library_name(lib) if name is None else name
    return _handler_of(_native.define_library(handler_name, lib, symbols, thread_safe, alignment, version))


#: A function as :func:`from_functions` takes it.
Function = Union[int, Callable[..., Any]]


def _is_c_function(f: Any) -> bool:
    return isinstance(f, ctypes._CFuncPtr)  # type: ignore[attr-defined]


def _runs_python(f: Any) -> bool:
    """Whether a ctypes function object was made from a Python callable
    (``CFUNCTYPE(...)(python_function)``): calling it runs Python code.
    ctypes keeps such a function's thunk in its ``_objects``."""
    kept = getattr(f, "_objects", None)
    values = kept.values() if isinstance(kept, dict) else ()
    return any(type(v).__name__ == "CThunkObject" for v in values)


def _address(role: str, f: Any) -> int:
    """The address of a C function given as a ctypes function object or an
    integer."""
    if isinstance(f, bool) or not (isinstance(f, int) or _is_c_function(f)):
        raise TypeError(f"{role}: expected a ctypes function or an integer address, got {type(f).__name__}")
    if isinstance(f, int):
        return f
    return ctypes.cast(f, ctypes.c_void_p).value or 0


def _kind(role: str, f: Any) -> str:
    if isinstance(f, bool):
        raise TypeError(f"{role}: expected a function, got a bool")
    if isinstance(f, int) or _is_c_function(f):
        return "c"
    if callable(f):
        return "python"
    raise TypeError(f"{role}: expected a ctypes function, an integer address or a callable, got {type(f).__name__}")


def _fresh_name() -> str:
    """``"python-N"``, the first ``N`` (from 1) not registered yet."""
    taken = set(_native.names())
    while True:
        name = f"python-{next(_names)}"
        if name not in taken:
            return name


def from_functions(
    name: Optional[str] = None,
    *,
    malloc: Function,
    free: Function,
    calloc: Optional[Function] = None,
    realloc: Optional[Function] = None,
    thread_safe: bool = True,
    alignment: int = 16,
) -> Handler:
    """Register allocation functions as handler ``name`` (by default
    ``"python-N"``, the first ``N`` from 1 not registered yet). Its NumPy
    allocator is ``memplug.numpy.allocator(memplug.from_functions(...))``.

    The functions are all of one kind:

    - **C functions**: ctypes function objects (``ctypes.CDLL("libc.so.6").malloc``,
      ``CFUNCTYPE`` instances) or integer addresses, with plain C
      signatures: ``malloc(size)``, ``free(ptr)``, ``calloc(nelem, size)``,
      ``realloc(ptr, size)``. A ``free`` that takes the block's size as well
      (``free(ptr, size)``) is given as a ctypes function whose ``argtypes``
      has two entries (wrap an address: ``CFUNCTYPE(None, c_void_p,
      c_size_t)(address)``).
    - **Python callables**: ``malloc(size)``, ``calloc(nelem, size)`` and
      ``realloc(ptr, old_size, new_size)`` return the block's address as an
      ``int`` (``None`` for no memory); ``free(ptr, size)``. They run with
      the GIL, taken for them from whatever thread NumPy calls on. An
      exception goes to :func:`sys.unraisablehook` and the call gives NULL
      (NumPy raises :class:`MemoryError`).

    ``calloc`` and ``realloc`` are derived from ``malloc`` and ``free`` when
    not given. Every object given is kept alive for the life of the process.
    ``thread_safe=False`` makes the calls one at a time (for C functions,
    under a lock of the host's, in which no Python code may run: ``CFUNCTYPE``
    instances made from Python functions are then refused,
    ``"python-under-lock"``; give the Python functions themselves).

    The functions exist only in this process, so no worker process can
    probe them: the conformance pass runs on them here, before they are
    registered, and a failure raises :class:`LoadError` with ``.code``
    ``"conformance-failed"`` (nothing is registered). Functions of both
    kinds mixed are refused (``"mixed-function-kinds"``); other refusals
    are the host's (``"bad-name"``, ``"bad-alignment"``,
    ``"duplicate-name"``, ``"null-function"``), and ``"python-under-lock"``
    (above).

    The functions are trusted as ctypes trusts what it calls: a ``malloc``
    returning an address that is not a block of the size asked for
    corrupts memory, possibly during the conformance pass.
    """
    if name is None:
        from . import _ensure_loaded

        _ensure_loaded()
        name = _fresh_name()
    roles = {"malloc": malloc, "free": free, "calloc": calloc, "realloc": realloc}
    given = {role: f for role, f in roles.items() if f is not None}
    kinds = {role: _kind(role, f) for role, f in given.items()}
    with _kept_lock:
        _kept.extend(given.values())
    if len(set(kinds.values())) > 1:
        which = ", ".join(f"{role} is {'a C function' if k == 'c' else 'a Python callable'}" for role, k in kinds.items())
        raise LoadError(
            f"{name}: [mixed-function-kinds] the functions must all be C functions (ctypes functions or addresses) or "
            f"all Python callables, but {which}: wrap the C ones in Python callables, or give C functions only",
            "mixed-function-kinds",
            name,
        )
    if not thread_safe and kinds["malloc"] == "c":
        thunks = [role for role, f in given.items() if _is_c_function(f) and _runs_python(f)]
        if thunks:
            raise LoadError(
                f"{name}: [python-under-lock] {', '.join(thunks)} "
                f"{'is a ctypes function' if len(thunks) == 1 else 'are ctypes functions'} made from a Python "
                "function: with thread_safe=False memplug calls C functions under its lock, and Python code must "
                "never run there (it waits for the interpreter while holding the lock, and can deadlock). Give the "
                "Python functions themselves (called one at a time, without a lock), or thread_safe=True",
                "python-under-lock",
                name,
            )
    if kinds["malloc"] == "python":
        outcome = _native.define_callables(name, malloc, free, calloc, realloc, thread_safe, alignment)
    else:
        sized = _is_c_function(free) and len(getattr(free, "argtypes", None) or ()) == 2
        addresses = {role: _address(role, f) for role, f in given.items()}
        outcome = _native.define_addresses(
            name,
            addresses["malloc"],
            addresses["free"],
            addresses.get("calloc"),
            addresses.get("realloc"),
            sized,
            thread_safe,
            alignment,
        )
    return _handler_of(outcome)
