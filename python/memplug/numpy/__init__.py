"""Any memplug handler as NumPy's data-memory handler (NEP 49).

::

    import numpy as np
    import memplug.numpy as mnp

    with mnp.use("tracking"):
        a = np.arange(10**6)               # data from the tracking plugin
    mnp.get_handler_name(a)                # 'memplug:tracking'
    del a                                  # freed through tracking, wherever
    memplug.stats("tracking")["plugin"]["live_bytes"]

How it behaves:

- **Context-local, as NEP 49 says.** NumPy keeps its current handler in a
  context variable: :func:`use` and :func:`install` set it for the current
  thread (or asyncio task) only. An asyncio task started inside ``use``
  copies the context and so inherits the handler; **a new thread starts
  from NumPy's default**, not from its parent's. ``python -m memplug.numpy
  --all-threads`` installs the handler in every ``threading.Thread`` too.
- **Every array frees through the handler that made it**, whatever is
  current later and on whichever thread it dies: arrays keep a reference to
  their handler's capsule, and capsules (and the plugins behind them) live
  for the rest of the process.
- **The plugin gets the true size.** Each block carries a small header (16
  bytes, or the handler's alignment if larger, so array data keeps that
  alignment) holding its size: the plugin's ``realloc`` and ``free`` get the
  size the block was allocated with, whatever NumPy passes. When NumPy
  passes another size to ``free``, the bridge counts it and records the
  Python file, line and function (see :func:`memplug.stats`). NumPy's
  ``free(NULL)`` calls are filtered out (and counted).
- **Handlers that are not thread-safe are locked.** NumPy calls the handler
  without the GIL in places; memplug serialises every call into a plugin
  that does not declare itself thread-safe.
- **Freed blocks are reused, where no plugin can tell.** Like NumPy's own
  handler, the bridge keeps blocks of up to 1 KiB that NumPy freed and
  hands them out again -- per thread (no GIL needed), 8 per size class
  (16, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024 bytes; a small
  request is given its class's room) -- and two spares per thread: freed
  blocks of more than 1 KiB and at most 2 MiB, each for a request of
  exactly its size -- but only for a handler that is thread-safe and reports no
  statistics (``system``, allocators by symbol name, ``aligned``): a plugin
  that counts, checks or shares its blocks (``tracking``, ``guard``,
  ``arena``, ``shm``) sees every free. :func:`set_cache` turns it off
  (``MEMPLUG_NUMPY_CACHE=0`` or ``python -m memplug.numpy --no-cache``
  before a bridge is made: never, not even the rounding), and
  :func:`memplug.stats` shows ``cache``, ``cached_blocks`` and
  ``cached_bytes``; the bridge's counters count every NumPy call either way.
- **Shareable handlers' arrays are aligned to 64 bytes** (a cache line),
  whatever the plugin's own alignment, so that worker processes run on
  aligned data and never write a cache line another process writes.
- **Names.** ``"tracking"`` is a registered handler; ``"arena:region_size=1m"``
  is an instance of ``arena`` made with those options (the plugin's ABI 1.1
  ``create``), one per distinct string, kept until :func:`close`. NumPy
  shows ``memplug:<name>``.

Handlers as objects (:class:`Allocator`), hooks and foreign memory::

    tracking = mnp.allocator("tracking")   # or a memplug.Handler, a capsule, None (NumPy's default)
    with tracking:                          # this thread or task only; restores what it replaced
        a = np.zeros((100, 100))
    mnp.get_allocator(a.T[10:]) is tracking # True: a view's allocator is its owner's
    previous = mnp.set_allocator(tracking)  # until changed; returns the previous Allocator

    def show(event, ptr, size, old_ptr):    # "malloc", "calloc", "realloc", "free"
        print(event, hex(ptr), size)
    with mnp.hooked(tracking, show):        # serves from tracking, then calls show
        b = np.fromstring("1 2 3", sep=" ")

    arr = mnp.from_pointer(ptr, (n,), np.float64, free=lib.free)   # C memory, freed once by
                                                                    # lib.free after the last view

- :func:`allocator` gives one :class:`Allocator` per handler (memplug's,
  NumPy's ``default_allocator``, other libraries'); ``with`` blocks of
  allocators interleaved across threads and asyncio tasks each restore
  their own previous handler; :func:`get_allocator` and
  :meth:`Allocator.handles` follow a view's ``.base`` to the array owning
  the data (None for memory no handler made); :func:`create_allocator`
  makes one from C functions or Python callables
  (:func:`memplug.from_functions`).
- :func:`hooked` calls a Python function after every call into a handler,
  with the GIL, whatever thread NumPy calls from; a failing callback is
  reported as unraisable and changes no result.
- :func:`from_pointer` never sets ``OWNDATA``: its base object
  (:class:`ForeignMemory`) frees the memory, so NumPy never frees it
  through a handler that did not allocate it.

Arrays handed to other processes without copying (:func:`share`,
:func:`attach`)::

    import multiprocessing as mp
    import numpy as np
    import memplug.numpy as mnp

    def work(h):                           # in a worker process
        part = mnp.attach(h)               # the parent's memory, not a copy
        part *= 2.0
        return float(part.sum())

    if __name__ == "__main__":
        key = "shm:name=work,size=1g,create=1,unlink=1"
        with mnp.use(key):                 # this array's data is in a shared segment
            a = np.arange(10**7, dtype=np.float64)
        halves = [mnp.share(a[:5 * 10**6]), mnp.share(a[5 * 10**6:])]   # small picklable handles
        with mp.get_context("spawn").Pool(2) as pool:
            sums = pool.map(work, halves)
        assert a[1] == 2.0                 # the workers wrote the parent's array
        del a, halves
        mnp.close(key)                     # the segment goes now (it would at exit)

- **What can be shared.** Arrays whose data a *shareable* handler made (the
  bundled ``shm``: ``use("shm:name=NAME,size=SIZE")``), and any view of
  one (the handle names the bytes the view reaches inside the block), and
  views of attached arrays. Arrays made before the ``with`` or by NumPy's
  default handler raise :class:`memplug.ShareError` ``"not-shareable"``.
- **Who frees.** The array belongs to the process that made it and is freed
  there, as any array. An attached array's ``base`` owns memplug's attached
  buffer: it keeps the segment mapped in that process while any array
  over it lives, and never frees the memory. So the owner keeps its array
  (and must not ``resize`` it) until the workers are done.
- **Lifetime of a segment.** A segment made with ``unlink=1`` is removed
  when its instance goes: :func:`close` (once its arrays are freed) or the
  process's exit. A worker's attachment never removes it. Without
  ``unlink=1`` a named segment stays until removed (``rm
  /dev/shm/memplug-NAME``), so that other processes can attach later.
- **Taking turns.** Shared memory is shared: arrange that a process does
  not read bytes another is writing (give each worker its own slice; read
  the results after the workers are done).
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator, Optional, Union

import memplug
from memplug import _memplug as _native

from memplug.numpy._allocators import (
    Allocator,
    allocator,
    create_allocator,
    get_allocator,
    hooked,
    owner_of,
    set_allocator,
)
from memplug.numpy._foreign import ForeignMemory, from_pointer
from memplug.numpy._share import SharedArray, attach, share

__all__ = [
    "Allocator",
    "allocator",
    "get_allocator",
    "set_allocator",
    "create_allocator",
    "hooked",
    "owner_of",
    "from_pointer",
    "ForeignMemory",
    "handler",
    "use",
    "install",
    "current",
    "close",
    "set_cache",
    "get_handler_name",
    "memplug_name",
    "share",
    "attach",
    "SharedArray",
]

#: A NumPy ``mem_handler`` capsule (a ``PyCapsule``).
Capsule = Any
HandlerLike = Union[str, Capsule, None]


def handler(name: str) -> Capsule:
    """NumPy's ``mem_handler`` capsule for memplug handler ``name`` (or
    ``"name:options"``), made once and kept for the process; the same object
    every time.

    Raises :class:`memplug.UnknownHandlerError` (naming the loaded handlers)
    if there is no such handler, :class:`memplug.LoadError` if the plugin
    refuses the options (``"bad-options"``, ``"no-options"``), and
    :class:`memplug.NumpyError` if NumPy is missing or older than 1.22.
    """
    try:
        import numpy  # noqa: F401  (the capsule is for NumPy)
    except ImportError as e:
        raise memplug.NumpyError(
            f"NumPy is not importable ({e}): install numpy>=1.22", "numpy-unavailable"
        ) from e
    memplug._ensure_loaded()
    return _native.numpy_capsule(name)


def _capsule(h: HandlerLike) -> Optional[Capsule]:
    if h is None:
        return None
    if isinstance(h, str):
        return handler(h)
    if isinstance(h, Allocator):
        return h.capsule
    if isinstance(h, memplug.Handler):
        return handler(h.name)
    return h


def install(h: HandlerLike) -> Capsule:
    """Make ``h`` NumPy's handler in the current context and return the
    previous handler's capsule (pass it back to :func:`install` to restore).

    ``h`` is a memplug handler name, a :class:`memplug.Handler`, an
    :class:`Allocator`, a capsule (from :func:`handler`, :func:`current`,
    or another library), or None for NumPy's default.
    """
    cap = _capsule(h)
    return _native.numpy_set(cap)


@contextlib.contextmanager
def use(h: HandlerLike) -> Iterator[Capsule]:
    """Use ``h`` as NumPy's handler in the current context for the body of a
    ``with`` block; the previous handler comes back on exit (also on an
    exception). Yields the capsule installed. Blocks nest.

    Arrays made inside keep freeing through ``h`` after the block ends.
    """
    cap = _capsule(h)
    previous = _native.numpy_set(cap)
    try:
        yield _native.numpy_get()
    finally:
        _native.numpy_set(previous)


def current() -> Capsule:
    """NumPy's handler capsule in the current context."""
    return _native.numpy_get()


def get_handler_name(arr: Any = None) -> Optional[str]:
    """The name of NumPy's current handler, or of the handler that made
    ``arr``'s data: NumPy's own ``get_handler_name``, asked of the array
    that owns the data when ``arr`` is a view (NumPy's says None for a
    view). None if no handler made the data (see :func:`get_allocator`).
    memplug handlers show as ``memplug:<name>``."""
    import numpy

    multiarray = getattr(numpy, "_core", None) or numpy.core  # NumPy 2 / 1.x
    get = multiarray.multiarray.get_handler_name
    if arr is None:
        current: Optional[str] = get()
        return current
    owner = owner_of(arr) if isinstance(arr, numpy.ndarray) else None
    name: Optional[str] = get(arr if owner is None else owner)
    return name


def memplug_name(capsule: Capsule) -> Optional[str]:
    """The memplug handler name behind a capsule (``"tracking"``,
    ``"arena:region_size=1m"``), or None for NumPy's default and other
    libraries' handlers."""
    described = _native.describe_capsule(capsule)
    return None if described is None else described[1]


def close(name: str) -> bool:
    """Close the bridge of instance ``name`` (``"name:options"``, e.g.
    ``"shm:name=work,size=1g,unlink=1"``): memplug lets its instance go once
    the arrays it made are freed -- at once if none is left. For ``shm``
    that unmaps the segment here and, with ``unlink=1``, removes its name.

    Arrays still alive keep working and free as before; NumPy allocating
    through the closed handler (still installed somewhere by :func:`use`
    or :func:`install`) succeeds while any of its arrays lives and raises
    ``MemoryError`` after. Asking for ``name`` again makes a new instance.
    ``memplug.stats(name)`` still reports the closed bridge until then.

    Returns False if no bridge of that name is open. Raises
    :class:`memplug.NumpyError` ``"not-an-instance"`` for a registered
    handler (``"shm"``, ``"system"``), which lives for the process.
    """
    closed: bool = _native.numpy_close(name)
    return closed


def set_cache(name: str, enabled: bool) -> bool:
    """Turn the bridge's cache of freed blocks (the small blocks and each
    thread's spares) for handler ``name`` on or off; returns whether it was
    on. Turning it off frees the blocks cached by this thread and by
    threads that ended at once, and those of other live threads at their
    next free of a block of at most 2 MiB through this handler.

    Raises :class:`memplug.NumpyError` ``"not-cacheable"`` (with the
    reason) for a handler the bridge never caches for: not thread-safe,
    reporting statistics, shareable, or made while ``MEMPLUG_NUMPY_CACHE=0``.
    """
    memplug._ensure_loaded()
    was: bool = _native.numpy_set_cache(name, enabled)
    return was
