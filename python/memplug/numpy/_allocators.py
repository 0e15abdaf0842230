"""Allocator objects: NumPy data-memory handlers as Python values
(:class:`Allocator`, :func:`allocator`, :func:`create_allocator`,
:func:`get_allocator`, :func:`set_allocator`, :func:`hooked`,
:func:`owner_of`).

An :class:`Allocator` wraps one NumPy ``mem_handler`` capsule -- memplug's,
NumPy's own ``default_allocator``, or another library's -- and there is one
:class:`Allocator` per handler (equal capsules give the same object). The
``with`` statement's bookkeeping lives in a context variable, as NumPy's
current handler does: each ``__enter__`` records the handler it replaced in
the current context (thread or asyncio task), and its ``__exit__`` puts that
one back.
"""

from __future__ import annotations

import contextvars
import threading
from typing import Any, Callable, Dict, Optional, Tuple, Union

import memplug
from memplug import _memplug as _native
from memplug._define import Function

#: A NumPy ``mem_handler`` capsule (a ``PyCapsule``).
Capsule = Any

#: One level of ``with``: the allocator entered and the capsule it replaced.
_Entry = Tuple["Allocator", Capsule]

_entered: contextvars.ContextVar[Tuple[_Entry, ...]] = contextvars.ContextVar("memplug_numpy_entered", default=())
_cache: Dict[int, "Allocator"] = {}
_cache_lock = threading.Lock()
#: Bounds the walk from a view to the array owning its data.
_MAX_BASE_DEPTH = 10_000


class Allocator:
    """A NumPy data-memory handler (NEP 49) as a Python object.

    Get one from :func:`allocator` (a memplug handler name, a
    ``memplug.Handler``, or a capsule), :func:`get_allocator` (the current
    one, or the one that made an array's data) or :func:`hooked`; never
    construct it directly. Allocators of the same handler are the same
    object, so ``==`` and ``is`` agree.

    ``with alloc:`` makes it NumPy's handler in the current context (thread
    or asyncio task) for the block and then restores the handler it
    replaced there -- also when blocks of several allocators interleave
    across threads and tasks, or one allocator is entered on several
    threads at once. It gives the allocator to ``as``.
    """

    __slots__ = ("_capsule", "_key", "_name", "_memplug_name", "_closed", "__weakref__")

    _capsule: Capsule
    _key: int
    _name: str
    _memplug_name: Optional[str]
    _closed: bool

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("use memplug.numpy.allocator(name_or_handler_or_capsule) to get an Allocator")

    @classmethod
    def _of(cls, capsule: Capsule) -> "Allocator":
        key = _native.capsule_key(capsule)
        if key is None:
            raise memplug.NumpyError(
                f"{capsule!r} is not a NumPy `mem_handler` capsule: pass a memplug handler name, a memplug.Handler, "
                "an Allocator, or a capsule from NumPy or a library that makes handlers",
                "not-a-handler",
            )
        with _cache_lock:
            found = _cache.get(key)
            if found is None:
                numpy_name, memplug_name = _native.describe_capsule(capsule)
                found = object.__new__(cls)
                found._capsule = capsule
                found._key = key
                found._name = numpy_name
                found._memplug_name = memplug_name
                found._closed = False
                _cache[key] = found
        return found

    @property
    def name(self) -> str:
        """The name NumPy shows for this handler (``get_handler_name``):
        ``"memplug:tracking"``, ``"default_allocator"``, ..."""
        return self._name

    @property
    def capsule(self) -> Capsule:
        """NumPy's ``mem_handler`` capsule of this handler: the low-level
        escape for C code that takes or gives NumPy's capsules (NumPy's
        ``PyDataMem_SetHandler``, another library's handler). The way back
        is :func:`allocator` of a capsule."""
        return self._capsule

    @property
    def handler(self) -> Optional["memplug.Handler"]:
        """The :class:`memplug.Handler` behind it (its ``name``, e.g.
        ``"tracking"`` or ``"arena:region_size=1m"``, is what
        :func:`memplug.stats` takes), or None for NumPy's default, hooked
        allocators and other libraries' handlers."""
        return None if self._memplug_name is None else memplug.Handler(self._memplug_name)

    def _instance_name(self, what: str, code: str) -> str:
        if self._memplug_name is None:
            raise memplug.NumpyError(
                f"{self!r} is not a memplug handler's allocator, so it has no bridge to {what}: "
                "only allocators of memplug handlers (memplug.numpy.allocator(name)) have one",
                code,
            )
        return self._memplug_name

    def close(self) -> bool:
        """Close this allocator's bridge, for an instance of a handler
        (``allocator("shm:name=work,size=1g,unlink=1")``): memplug lets the
        instance go once the arrays it made are freed -- at once if none is
        left. For ``shm`` that unmaps the segment here and, with
        ``unlink=1``, removes its name.

        Arrays still alive keep working and free as before; NumPy
        allocating through the closed allocator (still current somewhere,
        by ``with`` or :func:`set_allocator`) succeeds while any of its
        arrays lives and raises ``MemoryError`` after. :func:`allocator` of
        the same name afterwards makes a new instance (a new Allocator).
        ``memplug.stats(name)`` still reports the closed bridge until then.

        Returns False if it was closed already. Raises
        :class:`memplug.NumpyError` ``"not-an-instance"`` for a registered
        handler (``"shm"``, ``"system"``), which lives for the process, and
        for allocators that are not memplug handlers'.
        """
        name = self._instance_name("close", "not-an-instance")
        with _cache_lock:
            if self._closed:
                return False
            self._closed = True
        try:
            closed: bool = _native.numpy_close(name)
        except BaseException:
            self._closed = False
            raise
        return closed

    def set_cache(self, enabled: bool) -> bool:
        """Turn the bridge's cache of freed blocks (the small blocks and
        each thread's spares) on or off; returns whether it was on. Turning
        it off frees the blocks cached by this thread and by threads that
        ended at once, and those of other live threads at their next free
        of a block of at most 2 MiB through this allocator.

        Raises :class:`memplug.NumpyError` ``"not-cacheable"`` (with the
        reason) for an allocator the bridge never caches for: not
        thread-safe, reporting statistics, shareable, made while
        ``MEMPLUG_NUMPY_CACHE=0``, or not a memplug handler's; and
        ``"allocator-closed"`` after :meth:`close`.
        """
        name = self._instance_name("cache for", "not-cacheable")
        if self._closed:
            raise memplug.NumpyError(
                f"{self!r} is closed (its instance goes once its arrays are freed): get the instance's new "
                f"allocator with memplug.numpy.allocator({name!r})",
                "allocator-closed",
            )
        memplug._ensure_loaded()
        was: bool = _native.numpy_set_cache(name, enabled)
        return was

    def handles(self, arr: Any) -> bool:
        """Whether this allocator made ``arr``'s data: that of the array
        owning it, for a view (see :func:`get_allocator`)."""
        return get_allocator(arr) is self

    def __enter__(self) -> "Allocator":
        previous = _native.numpy_set(self._capsule)
        _entered.set(_entered.get() + ((self, previous),))
        return self

    def __exit__(self, *exc: Any) -> None:
        stack = _entered.get()
        for i in range(len(stack) - 1, -1, -1):
            if stack[i][0] is self:
                break
        else:
            raise memplug.NumpyError(
                f"{self!r} is left in a context where it was not entered: enter and leave an allocator's `with` "
                "block in the same thread or asyncio task",
                "not-entered",
            )
        previous = stack[i][1]
        if i == len(stack) - 1:
            _native.numpy_set(previous)
            _entered.set(stack[:i])
        else:
            # Left before a block entered after it (no `with` statement does
            # that; explicit __enter__/__exit__ calls can): the handler of
            # the later block stays current, and that block will restore
            # what this one replaced.
            later, _ = stack[i + 1]
            _entered.set(stack[:i] + ((later, previous),) + stack[i + 2 :])

    def __reduce__(self) -> Any:
        if self._memplug_name is None:
            raise TypeError(f"{self!r} cannot be pickled: only memplug handlers' allocators can (by name)")
        return (allocator, (self._memplug_name,))

    def __repr__(self) -> str:
        return f"<memplug.numpy.Allocator {self._name!r}>"


def _capsule_of(name: str) -> Capsule:
    """NumPy's capsule of memplug handler ``name``: made once, kept for the
    process (until :meth:`Allocator.close` of an instance)."""
    try:
        import numpy  # noqa: F401  (the capsule is for NumPy)
    except ImportError as e:
        raise memplug.NumpyError(
            f"NumPy is not importable ({e}): install numpy>=1.22", "numpy-unavailable"
        ) from e
    memplug._ensure_loaded()
    return _native.numpy_capsule(name)


def _wrap(capsule: Optional[Capsule]) -> Optional[Allocator]:
    return None if capsule is None else Allocator._of(capsule)


def _default_capsule() -> Capsule:
    previous = _native.numpy_set(None)
    try:
        return _native.numpy_get()
    finally:
        _native.numpy_set(previous)


AllocatorLike = Union[Allocator, str, "memplug.Handler", Capsule, None]


def allocator(handler_or_name: AllocatorLike) -> Allocator:
    """The :class:`Allocator` of a handler.

    ``handler_or_name`` is a memplug handler name (``"tracking"``), an
    instance's (``"arena:region_size=1m"``: made with those options by the
    plugin's ABI 1.1 ``create``, one per distinct string, kept until
    :meth:`Allocator.close`), a ``memplug.Handler`` (by its ``name``), a
    NumPy ``mem_handler`` capsule (memplug's, NumPy's or another
    library's: the way in for C code's capsules), an :class:`Allocator`
    (returned as is), or None for NumPy's own ``default_allocator``.

    Raises :class:`memplug.UnknownHandlerError` (naming the loaded
    handlers) for an unknown name, :class:`memplug.LoadError` if the plugin
    refuses the options (``"bad-options"``, ``"no-options"``),
    :class:`memplug.NumpyError` if NumPy is missing or older than 1.22, and
    :class:`memplug.NumpyError` ``"not-a-handler"`` for any other object.
    """
    if isinstance(handler_or_name, Allocator):
        return handler_or_name
    if handler_or_name is None:
        return Allocator._of(_default_capsule())
    if isinstance(handler_or_name, str):
        return Allocator._of(_capsule_of(handler_or_name))
    if _native.capsule_key(handler_or_name) is not None:
        return Allocator._of(handler_or_name)
    name = getattr(handler_or_name, "name", None)
    if isinstance(name, str):  # a memplug.Handler
        return Allocator._of(_capsule_of(name))
    return Allocator._of(handler_or_name)  # raises not-a-handler


def create_allocator(
    *,
    malloc: Function,
    calloc: Optional[Function] = None,
    realloc: Optional[Function] = None,
    free: Function,
    name: Optional[str] = None,
    thread_safe: bool = True,
    alignment: int = 16,
) -> Allocator:
    """A new :class:`Allocator` made of allocation functions: the way to
    make an allocator from functions in ``memplug.numpy``::

        libc = ctypes.CDLL("libc.so.6")
        my_allocator = mnp.create_allocator(malloc=libc.malloc, calloc=libc.calloc,
                                            realloc=libc.realloc, free=libc.free)
        with my_allocator:
            a = np.ones(1000)

    The functions are C functions (ctypes function objects, integer
    addresses) or Python callables, all of one kind, exactly as
    :func:`memplug.from_functions` takes them (signatures, ``free(ptr,
    size)``, ``thread_safe``, ``alignment``, what is derived when
    ``calloc`` or ``realloc`` is not given). They are checked by the
    conformance pass and registered as the memplug handler ``name`` (by
    default ``"python-N"``), which :attr:`Allocator.handler` names and
    :func:`memplug.stats` reports on; the allocator is that handler's, so
    :func:`allocator` of the name gives the same object. Raises
    :class:`memplug.LoadError` as :func:`memplug.from_functions` does
    (``"conformance-failed"``, ``"duplicate-name"``,
    ``"mixed-function-kinds"``, ...) and :class:`memplug.NumpyError` if
    NumPy is missing or older than 1.22.
    """
    made = memplug.from_functions(
        name,
        malloc=malloc,
        calloc=calloc,
        realloc=realloc,
        free=free,
        thread_safe=thread_safe,
        alignment=alignment,
    )
    return allocator(made)


def owner_of(arr: Any) -> Optional[Any]:
    """The ndarray that owns ``arr``'s data, found by following ``.base``
    from a view (slices, transposes, reshapes, views of views), or None if
    no array owns it: the memory came from elsewhere (``bytes``, ``mmap``,
    a ctypes buffer, :func:`memplug.numpy.from_pointer`).

    Besides arrays, the walk goes through a ``memoryview``'s ``obj`` and
    through objects whose ``base`` is an array or a memoryview (such as
    the ones ``np.lib.stride_tricks.as_strided`` makes)."""
    import numpy as np

    obj = arr
    for _ in range(_MAX_BASE_DEPTH):
        if isinstance(obj, np.ndarray):
            if obj.flags.owndata:
                return obj
            following = obj.base
        elif isinstance(obj, memoryview):
            following = obj.obj
        else:
            following = getattr(obj, "base", None)
            if not isinstance(following, (np.ndarray, memoryview)):
                return None
        if following is None:
            return None
        obj = following
    return None


def get_allocator(arr: Any = None) -> Optional[Allocator]:
    """The current context's allocator, or (given ``arr``) the allocator
    that made ``arr``'s data.

    For a view, that is the allocator of the array owning the data,
    however many views away (see :func:`owner_of`). None when no handler
    made the data: an array over memory from elsewhere (``np.frombuffer``
    of bytes, a memory map, :func:`memplug.numpy.from_pointer`), or an
    owning array NumPy gave no handler. Handlers memplug did not make
    (NumPy's ``default_allocator``, other libraries') get an Allocator too.
    """
    if arr is None:
        return _wrap(_native.numpy_get())
    import numpy as np

    if not isinstance(arr, np.ndarray):
        raise TypeError(f"get_allocator needs a numpy.ndarray (or nothing), not {type(arr).__name__}")
    owner = owner_of(arr)
    if owner is None:
        return None
    capsule = _native.array_handler(owner, owner.__array_interface__["data"][0], owner.ndim)
    return _wrap(capsule)


def set_allocator(alloc: AllocatorLike) -> Allocator:
    """Make ``alloc`` NumPy's handler in the current context (None: NumPy's
    default); returns the previous :class:`Allocator`. ``alloc`` is
    anything :func:`allocator` takes."""
    cap = None if alloc is None else allocator(alloc).capsule
    return Allocator._of(_native.numpy_set(cap))


Callback = Callable[[str, int, int, Optional[int]], Any]


def hooked(alloc: AllocatorLike, callback: Callback) -> Allocator:
    """An allocator that serves every call from ``alloc`` (anything
    :func:`allocator` takes: a memplug handler, NumPy's default, another
    library's) and then calls ``callback(event, ptr, size, old_ptr)``.

    ``event`` is ``"malloc"``, ``"calloc"``, ``"realloc"`` or ``"free"``;
    ``ptr`` the block's address (the new one for ``realloc``; 0 when the
    allocation failed or NumPy frees NULL); ``size`` the bytes asked for
    (``nelem * elsize`` for calloc; for ``free``, the size NumPy passes);
    ``old_ptr`` the block given to ``realloc``, else None.

    The callback runs with the GIL held (taken if NumPy called without it),
    on the thread that made the call, after the call. An exception it
    raises is reported as unraisable (``sys.unraisablehook``) and changes
    nothing else. Calls made by NumPy while the callback runs on that
    thread (arrays the callback makes) are served but not reported, and
    none is reported once the interpreter is finalizing.

    Arrays made under it free through it, so the hook sees their frees
    whenever they happen. Each call makes a new handler, kept (with
    ``callback``) for the rest of the process; it is named
    ``memplug:hooked(<alloc's name>)``.
    """
    inner = allocator(alloc)
    if not callable(callback):
        raise TypeError(f"the hook's callback must be callable, not {type(callback).__name__}")
    return Allocator._of(_native.numpy_hooked(inner.capsule, callback))
