"""numpy-allocator's API on memplug: code written for ``numpy_allocator``
(1.2) runs by changing one line::

    from memplug import numpy_allocator      # was: import numpy_allocator

    class my_allocator(metaclass=numpy_allocator.type):
        _malloc_ = ctypes.addressof(my.malloc_func)
        _free_ = ctypes.addressof(my.free_func)

    with my_allocator:
        a = np.array([1, 2, 3])
    my_allocator.handles(a)                  # True

What is read from an allocator (a class made with :class:`type`, or an
instance of a subclass of :class:`object`), as numpy-allocator reads it:

- ``_malloc_``, ``_calloc_``, ``_realloc_``, ``_free_``: each an integer
  (the address of a C function pointer, as ``ctypes.addressof(lib.fn)``
  gives: it is read once, when the handler is made), a ctypes function, or a
  Python callable -- ``malloc(size)``, ``calloc(nelem, elsize)``,
  ``realloc(ptr, new_size)``, ``free(ptr, size)``, returning an integer
  address or None for NULL. C functions have the same signatures
  (``free`` is given the size too). A ``_malloc_`` or ``_free_`` that is
  missing or None is the C library's; a ``_calloc_`` or ``_realloc_``
  missing is made of the allocator's own malloc and free.
- ``_handler_``: a ``mem_handler`` capsule to use as it is (e.g.
  :data:`default_handler`). :meth:`handler` stores the capsule it makes
  there.
- memplug's own, optional: ``_thread_safe_`` (default True; False makes
  memplug call the functions one at a time, under a lock) and
  ``_alignment_`` (default 16: the alignment the functions' blocks have
  and NumPy's data keeps -- see below).

The handler is a memplug handler made of the functions
(:func:`memplug.from_functions`) and given to NumPy by memplug's bridge
(:func:`memplug.numpy.allocator`), so the functions get the true size of
every block on ``free`` and ``realloc``, never see ``free(NULL)``, are kept
alive as long as any array needs them, and an allocator declared not
thread-safe is locked. ``with`` restores the previous handler of the
thread (or asyncio task) that entered it.

Differences from numpy-allocator:

- The functions are checked when the handler is made (memplug's
  conformance pass, in this process: they are called a few thousand
  times); functions that fail raise :class:`RefusedError`, a
  ``MemoryError``.

- NumPy shows the handler as ``memplug:<name>``, where name is
  ``str(allocator)`` with every character outside ``[A-Za-z0-9_.-]``
  turned into ``-`` (and ``-2``, ``-3``... added when another handler has
  that name).
- The bridge puts a header in front of each block (16 bytes, or
  ``_alignment_`` if larger), so NumPy's data is aligned as the functions'
  blocks only up to ``_alignment_``: a page-aligning allocator sets
  ``_alignment_ = mmap.PAGESIZE``.
- A function that is neither an address, a ctypes function, a callable nor
  None raises :class:`FunctionError` (a ``TypeError``), as does an address
  of 0 or one holding NULL (numpy-allocator crashed or raised
  ``SystemError``); :func:`set_handler` of something that is not a
  ``mem_handler`` capsule raises :class:`NotAHandlerError` (a
  ``ValueError``, as NumPy's).
"""

from __future__ import annotations

import builtins
import contextvars
import ctypes
import re
import threading
from typing import Any, Callable, Dict, Optional, Tuple

import numpy

import memplug
import memplug.numpy as _mnp
from memplug import _memplug as _native

__all__ = [
    "type",
    "object",
    "default_handler",
    "get_handler",
    "set_handler",
    "FunctionError",
    "RefusedError",
    "NotAHandlerError",
]

#: A NumPy ``mem_handler`` capsule.
Capsule = Any

_ROLES = ("malloc", "calloc", "realloc", "free")
_lock = threading.RLock()
# The previous handlers of the `with` blocks entered in this context, the
# innermost last: a tuple, so each thread and task has its own.
_entered: contextvars.ContextVar[Tuple[Capsule, ...]] = contextvars.ContextVar(
    "memplug.numpy_allocator.entered", default=()
)
# Every allocator this module made, by its capsule's id (they live for the
# process, as their capsules do).
_made: Dict[int, Any] = {}


class FunctionError(memplug.Error, TypeError):
    """An allocator's ``_malloc_``, ``_calloc_``, ``_realloc_`` or ``_free_``
    cannot be used: ``code`` is ``"bad-function"`` (neither an address, a
    ctypes function, a callable nor None) or ``"null-function"`` (an
    address of 0, or one holding NULL)."""


class RefusedError(memplug.LoadError, MemoryError):
    """memplug checked the allocator's functions when it made the handler
    (a conformance pass: blocks of many sizes, zeroing, realloc keeping the
    bytes, no overlap, calls from several threads) and they failed; ``code``
    is ``"conformance-failed"`` and the message names each failed check. A
    ``MemoryError``, as allocating through functions that return NULL
    would have raised."""


class NotAHandlerError(memplug.NumpyError, ValueError):
    """An object given as a handler is not a NumPy ``mem_handler`` capsule;
    ``code`` is ``"not-a-handler"``."""


def _install(capsule: Optional[Capsule]) -> Capsule:
    """Make ``capsule`` (None: NumPy's default) current; the previous one."""
    try:
        return _native.numpy_set(capsule)
    except memplug.NumpyError as e:
        if e.code != "not-a-handler":
            raise
        raise NotAHandlerError(str(e), e.code, e.source) from None


def _current() -> Capsule:
    return _native.numpy_get()


def _find_default() -> Capsule:
    previous = _install(None)
    try:
        return _current()
    finally:
        _install(previous)


#: NumPy's own handler (``default_allocator``).
default_handler: Capsule = _find_default()


# --- reading an allocator's functions ---------------------------------------

_libc = ctypes.CDLL(None)


def _address(fn: Any) -> int:
    value = ctypes.cast(fn, ctypes.c_void_p).value
    assert value is not None
    return value


# The C library's functions, for the roles an allocator leaves out.
_LIBC = {role: _address(getattr(_libc, role)) for role in _ROLES}


def _c_function(allocator: Any, role: str, value: int) -> int:
    """The C function behind an address of a function pointer."""
    if value == 0:
        raise FunctionError(
            f"{allocator}: _{role}_ is the address 0: give ctypes.addressof(lib.{role}_function), "
            f"the address of a function pointer",
            "null-function",
            str(allocator),
        )
    fn = ctypes.c_void_p.from_address(value).value
    if not fn:
        raise FunctionError(
            f"{allocator}: _{role}_ = {value:#x} holds NULL: give the address of a pointer to a C function, "
            f"as ctypes.addressof(lib.{role}_function) is",
            "null-function",
            str(allocator),
        )
    return fn


# C signatures of numpy-allocator's functions, for calling C functions from
# Python when an allocator mixes both.
_C_TYPES = {
    "malloc": ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_size_t),
    "calloc": ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t),
    "realloc": ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t),
    "free": ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_size_t),
}


def _function(allocator: Any, role: str) -> Optional[Tuple[str, Any]]:
    """``("c", address)`` or ``("py", callable)`` for the allocator's
    ``role``, or None if it gives none."""
    attr = f"_{role}_"
    value = getattr(allocator, attr, None)
    if value is None:
        return None
    if isinstance(value, bool):
        pass  # an int, but no address: refused below
    elif isinstance(value, int):
        return "c", _c_function(allocator, role, value)
    elif isinstance(value, ctypes._CFuncPtr):  # type: ignore[attr-defined]
        return "c", _address(value)
    elif callable(value):
        return "py", value
    raise FunctionError(
        f"{allocator}: {attr} must be an integer address, a ctypes function or a callable, not "
        f"{builtins.type(value).__name__}",
        "bad-function",
        str(allocator),
    )


def _as_callable(role: str, kind: str, fn: Any) -> Callable[..., Any]:
    """A function of numpy-allocator's as a callable of memplug's signature
    (only ``realloc``'s differs: memplug passes the old size too)."""
    if kind == "c":
        c_function = _C_TYPES[role](fn)

        def fn(*args: Any) -> Any:  # a plain callable, never taken for a C function
            return c_function(*args)

    if role != "realloc":
        return fn  # type: ignore[no-any-return]

    def realloc(ptr: int, old_size: int, new_size: int) -> Any:
        return fn(ptr, new_size)

    return realloc


def _functions(allocator: Any) -> Dict[str, Any]:
    """memplug's ``from_functions`` arguments for the allocator's functions:
    all C addresses, or all Python callables when it gives any. ``malloc``
    and ``free`` left out are the C library's; ``calloc`` and ``realloc``
    left out are made by memplug of the allocator's malloc and free (the C
    library's own when those are the C library's)."""
    given = {role: _function(allocator, role) for role in _ROLES}
    for role in ("malloc", "free"):
        given[role] = given[role] or ("c", _LIBC[role])
    if all(given[r] == ("c", _LIBC[r]) for r in ("malloc", "free")):
        for role in ("calloc", "realloc"):
            given[role] = given[role] or ("c", _LIBC[role])
    if all(g is None or g[0] == "c" for g in given.values()):
        out: Dict[str, Any] = {role: None if g is None else g[1] for role, g in given.items()}
        # numpy-allocator's C free takes the size too (the C library's
        # ignores it): a ctypes function of two arguments says so.
        out["free"] = _C_TYPES["free"](out["free"])
        return out
    return {role: None if g is None else _as_callable(role, *g) for role, g in given.items()}


# --- making the handler ------------------------------------------------------


def _base_name(allocator: Any) -> str:
    name = re.sub(r"[^A-Za-z0-9_.-]+", "-", str(allocator)).strip("-")
    return (name or "numpy_allocator")[:100]


def _register(allocator: Any) -> Tuple[Any, str]:
    """A memplug handler made of the allocator's functions, under a free
    name; and the name."""
    functions = _functions(allocator)
    thread_safe = bool(getattr(allocator, "_thread_safe_", True))
    alignment = int(getattr(allocator, "_alignment_", 16))
    base = _base_name(allocator)
    taken = set(memplug.names())
    for n in range(1, 1000):
        name = base if n == 1 else f"{base}-{n}"
        if name in taken:
            continue
        try:
            return memplug.from_functions(name, thread_safe=thread_safe, alignment=alignment, **functions), name
        except memplug.Error as e:
            if e.code == "conformance-failed":
                raise RefusedError(f"{allocator}: {e}", e.code, str(allocator), getattr(e, "outcomes", None)) from None
            if e.code != "duplicate-name":
                raise
    raise memplug.Error(f"{allocator}: no free handler name from {base!r}", "duplicate-name", base)


def _handler(allocator: Any) -> Capsule:
    if hasattr(allocator, "_handler_"):
        return allocator._handler_
    with _lock:
        if hasattr(allocator, "_handler_"):
            return allocator._handler_
        handler, name = _register(allocator)
        made = _mnp.allocator(handler)
        try:
            # The functions see every call NumPy makes, as numpy-allocator's
            # do: no freed block is kept back for reuse.
            made.set_cache(False)
        except memplug.NumpyError as e:
            if e.code != "not-cacheable":
                raise
        capsule = made.capsule
        _made[id(capsule)] = made
        setattr(allocator, "_handler_", capsule)
        return capsule


# --- arrays -------------------------------------------------------------------


def _owner(array: Any) -> Optional[Any]:
    """The array that owns ``array``'s data (itself or a base), or None."""
    while isinstance(array, numpy.ndarray):
        if array.flags.owndata:
            return array
        array = array.base
    return None


def _array_capsule(owner: Any) -> Optional[Capsule]:
    """The handler capsule of an array that owns its data."""
    made_by = _mnp.get_allocator(owner)
    return None if made_by is None else made_by.capsule


def _handles(allocator: Any, array: Any) -> bool:
    if not isinstance(array, numpy.ndarray):
        raise TypeError("argument must be an ndarray")
    owner = _owner(array)
    if owner is None:
        return False
    return _array_capsule(owner) is _handler(allocator)


def _enter(allocator: Any) -> Any:
    previous = _install(_handler(allocator))
    _entered.set(_entered.get() + (previous,))
    return allocator


def _exit(allocator: Any) -> None:
    entered = _entered.get()
    if not entered:
        raise RuntimeError(f"{allocator}: __exit__ without __enter__ in this context")
    _entered.set(entered[:-1])
    _install(entered[-1])


class _Methods:
    """The methods numpy-allocator's ``type`` and ``object`` share."""

    def handler(self) -> Capsule:
        """This allocator's ``mem_handler`` capsule: ``_handler_`` if set,
        else one made of its functions (once; stored in ``_handler_``)."""
        return _handler(self)

    def handles(self, array: Any) -> bool:
        """Whether this allocator's handler made the data of ``array`` (or
        of the array whose data it views). Raises ``TypeError`` if
        ``array`` is not an ndarray."""
        return _handles(self, array)

    def __enter__(self) -> Any:
        """Make this allocator NumPy's handler in the current context;
        returns the allocator."""
        return _enter(self)

    def __exit__(self, *exc: Any) -> None:
        """Restore the handler that was current when the matching
        ``__enter__`` ran in this context."""
        _exit(self)


class type(_Methods, builtins.type):
    """Metaclass of allocator classes: ``class a(metaclass=type)`` makes a
    class that is an allocator (``with a:``, ``a.handler()``,
    ``a.handles(arr)``), with its functions as plain functions in the class
    body. ``str(a)`` is the class's name."""

    def __str__(cls) -> str:
        return cls.__name__


class object(_Methods):
    """Base class of allocators made as instances: subclass it, give the
    functions as methods, and use an instance (``with a(4096):``).
    ``str()`` is ``__name__`` if set, else the class's name; define
    ``__str__`` to name instances apart."""

    def __str__(self) -> str:
        name = getattr(self, "__name__", None)
        return str(name) if name is not None else builtins.type(self).__name__


_NO_ARRAY = builtins.object()


def get_handler(array: Any = _NO_ARRAY) -> Optional[Capsule]:
    """NumPy's current handler capsule in this context; or, given an array,
    the capsule of the handler that made its data (None if neither it nor
    its bases own data). Raises ``TypeError`` if ``array`` is not an
    ndarray."""
    if array is _NO_ARRAY:
        return _current()
    if not isinstance(array, numpy.ndarray):
        raise TypeError("if supplied, argument must be an ndarray")
    owner = _owner(array)
    return None if owner is None else _array_capsule(owner)


def set_handler(handler: Optional[Capsule]) -> Capsule:
    """Make ``handler`` (a ``mem_handler`` capsule, or None for NumPy's
    default) NumPy's handler in the current context; returns the previous
    one. Raises :class:`NotAHandlerError` for anything else."""
    return _install(handler)
