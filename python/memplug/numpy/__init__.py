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
- **Names.** ``"tracking"`` is a registered handler; ``"arena:region_size=1m"``
  is an instance of ``arena`` made with those options (the plugin's ABI 1.1
  ``create``), one per distinct string. NumPy shows ``memplug:<name>``.
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator, Optional, Union

import memplug
from memplug import _memplug as _native

__all__ = ["handler", "use", "install", "current", "get_handler_name", "memplug_name"]

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
    if h is None or not isinstance(h, str):
        return h
    return handler(h)


def install(h: HandlerLike) -> Capsule:
    """Make ``h`` NumPy's handler in the current context and return the
    previous handler's capsule (pass it back to :func:`install` to restore).

    ``h`` is a memplug handler name, a capsule (from :func:`handler`,
    :func:`current`, or another library), or None for NumPy's default.
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
    ``arr``'s data (None if ``arr`` does not own its data): NumPy's own
    ``get_handler_name``. memplug handlers show as ``memplug:<name>``."""
    import numpy

    multiarray = getattr(numpy, "_core", None) or numpy.core  # NumPy 2 / 1.x
    get = multiarray.multiarray.get_handler_name
    name: Optional[str] = get() if arr is None else get(arr)
    return name


def memplug_name(capsule: Capsule) -> Optional[str]:
    """The memplug handler name behind a capsule (``"tracking"``,
    ``"arena:region_size=1m"``), or None for NumPy's default and other
    libraries' handlers."""
    described = _native.describe_capsule(capsule)
    return None if described is None else described[1]
