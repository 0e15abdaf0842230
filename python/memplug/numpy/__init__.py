"""Any memplug handler as NumPy's data-memory handler (NEP 49), as
:class:`Allocator` objects.

::

    import numpy as np
    import memplug
    import memplug.numpy as mnp

    tracking = mnp.allocator("tracking")   # or a memplug.Handler, a capsule, None (NumPy's default)
    with tracking:                          # this thread or task only; restores what it replaced
        a = np.arange(10**6)                # data from the tracking plugin
    mnp.get_allocator(a.T[10:]) is tracking # True: a view's allocator is its owner's
    tracking.name                           # 'memplug:tracking', as NumPy shows it
    del a                                   # freed through tracking, wherever
    memplug.stats("tracking")["plugin"]["live_bytes"]
    previous = mnp.set_allocator(tracking)  # until changed; returns the previous Allocator

How it behaves:

- **Context-local, as NEP 49 says.** NumPy keeps its current handler in a
  context variable: ``with`` and :func:`set_allocator` set it for the
  current thread (or asyncio task) only. An asyncio task started inside a
  ``with`` block copies the context and so inherits the allocator; **a new
  thread starts from NumPy's default**, not from its parent's. ``python -m
  memplug.numpy --all-threads`` installs the handler in every
  ``threading.Thread`` too. ``with`` blocks of allocators interleaved
  across threads and tasks each restore their own previous handler.
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
  ``arena``, ``shm``) sees every free. :meth:`Allocator.set_cache` turns it
  off (``MEMPLUG_NUMPY_CACHE=0`` or ``python -m memplug.numpy --no-cache``
  before a bridge is made: never, not even the rounding), and
  :func:`memplug.stats` shows ``cache``, ``cached_blocks`` and
  ``cached_bytes``; the bridge's counters count every NumPy call either way.
- **Shareable handlers' arrays are aligned to 64 bytes** (a cache line),
  whatever the plugin's own alignment, so that worker processes run on
  aligned data and never write a cache line another process writes.
- **Names.** ``"tracking"`` is a registered handler; ``"arena:region_size=1m"``
  is an instance of ``arena`` made with those options (the plugin's ABI 1.1
  ``create``), one per distinct string, kept until :meth:`Allocator.close`.
  NumPy shows ``memplug:<name>`` (:attr:`Allocator.name`);
  :attr:`Allocator.handler` is the :class:`memplug.Handler`.
- **Capsules.** NumPy passes handlers around as ``mem_handler`` capsules;
  :attr:`Allocator.capsule` is an allocator's, and :func:`allocator` of a
  capsule (from NumPy, a C extension, another library) its allocator:
  the one way between the two.

Hooks and foreign memory::

    def show(event, ptr, size, old_ptr):    # "malloc", "calloc", "realloc", "free"
        print(event, hex(ptr), size)
    with mnp.hooked(tracking, show):        # serves from tracking, then calls show
        b = np.fromstring("1 2 3", sep=" ")

    arr = mnp.from_pointer(ptr, (n,), np.float64, free=lib.free)   # C memory, freed once by
                                                                    # lib.free after the last view

- :func:`get_allocator` and :meth:`Allocator.handles` follow a view's
  ``.base`` to the array owning the data (:func:`owner_of`; None for memory
  no handler made). An allocator of C functions or Python callables is
  ``create_allocator(malloc=..., calloc=..., realloc=..., free=...)``.
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
        shm = mnp.allocator("shm:name=work,size=1g,create=1,unlink=1")
        with shm:                          # this array's data is in a shared segment
            a = np.arange(10**7, dtype=np.float64)
        halves = [mnp.share(a[:5 * 10**6]), mnp.share(a[5 * 10**6:])]   # small picklable handles
        with mp.get_context("spawn").Pool(2) as pool:
            sums = pool.map(work, halves)
        assert a[1] == 2.0                 # the workers wrote the parent's array
        del a, halves
        shm.close()                        # the segment goes now (it would at exit)

- **What can be shared.** Arrays whose data a *shareable* handler made (the
  bundled ``shm``: ``allocator("shm:name=NAME,size=SIZE")``), and any view of
  one (the handle names the bytes the view reaches inside the block), and
  views of attached arrays. Arrays made before the ``with`` or by NumPy's
  default handler raise :class:`memplug.ShareError` ``"not-shareable"``.
- **Who frees.** The array belongs to the process that made it and is freed
  there, as any array. An attached array's ``base`` owns memplug's attached
  buffer: it keeps the segment mapped in that process while any array
  over it lives, and never frees the memory. So the owner keeps its array
  (and must not ``resize`` it) until the workers are done.
- **Lifetime of a segment.** A segment made with ``unlink=1`` is removed
  when its instance goes: :meth:`Allocator.close` (once its arrays are freed) or the
  process's exit. A worker's attachment never removes it. Without
  ``unlink=1`` a named segment stays until removed (``rm
  /dev/shm/memplug-NAME``), so that other processes can attach later.
- **Taking turns.** Shared memory is shared: arrange that a process does
  not read bytes another is writing (give each worker its own slice; read
  the results after the workers are done).
"""

from __future__ import annotations

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
    "create_allocator",
    "get_allocator",
    "set_allocator",
    "hooked",
    "owner_of",
    "from_pointer",
    "ForeignMemory",
    "share",
    "attach",
    "SharedArray",
]

# The array layout this interpreter and NumPy use, verified now: a NumPy or
# a Python (default or free-threaded build) whose arrays memplug cannot read
# is refused here, with NumpyError("numpy-layout"), not misread later.
try:
    import numpy as _numpy  # noqa: F401
except ImportError:
    pass
else:
    from memplug import NumpyError as _NumpyError
    from memplug import _memplug as _native

    try:
        _native.numpy_check_layout()
    except _NumpyError as _e:
        # A NumPy too old for handlers is said when one is asked for.
        if _e.code == "numpy-layout":
            raise
    del _native, _numpy, _NumpyError
