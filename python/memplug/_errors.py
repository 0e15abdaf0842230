"""memplug's exceptions. Each carries a stable kebab-case reason code in
``.code`` -- the same codes ``memplug check`` prints -- and a message that
says what to do."""

from __future__ import annotations

from typing import Any, Dict, List, Optional

__all__ = ["Error", "LoadError", "UnknownHandlerError", "NumpyError", "ShareError", "ForeignMemoryError"]


class Error(Exception):
    """Base class of memplug's exceptions.

    Attributes:
        code: the stable reason code, e.g. ``"bad-magic"``.
        source: what the error is about (a plugin path, a handler name), or None.
    """

    code: str
    source: Optional[str]

    def __init__(self, message: str, code: str, source: Optional[str] = None) -> None:
        super().__init__(message)
        self.code = code
        self.source = source

    def __reduce__(self) -> Any:
        return (type(self), (str(self), self.code, self.source))


class LoadError(Error):
    """A plugin (or an instance of one) was refused.

    ``code`` is memplug's reason code (``"not-a-library"``, ``"bad-magic"``,
    ``"abi-major-mismatch"``, ``"duplicate-name"``, ``"bad-options"``, ...).
    Raised by :func:`memplug.load` for a refused candidate, with every
    outcome in ``outcomes``.
    """

    outcomes: List[Dict[str, Any]]

    def __init__(self, message: str, code: str, source: Optional[str] = None, outcomes: Optional[List[Dict[str, Any]]] = None) -> None:
        super().__init__(message, code, source)
        self.outcomes = list(outcomes or [])

    def __reduce__(self) -> Any:
        return (type(self), (str(self), self.code, self.source, self.outcomes))


class UnknownHandlerError(Error, LookupError):
    """No handler is registered under the name asked for; the message names
    the ones that are. ``code`` is ``"unknown-handler"``."""


class NumpyError(Error):
    """NumPy cannot take a handler: ``"numpy-unavailable"`` (not installed or
    not importable), ``"numpy-too-old"`` (data-memory handlers need NumPy
    1.22 or later), ``"not-a-handler"`` (an object that is not a handler
    capsule), ``"not-an-instance"`` (:meth:`memplug.numpy.Allocator.close`
    of a registered handler, which lives for the process, or of an
    allocator that is not a memplug handler's), ``"not-cacheable"``
    (:meth:`memplug.numpy.Allocator.set_cache` for an allocator the bridge
    never caches for), ``"allocator-closed"`` (``set_cache`` after
    ``close``), ``"numpy-layout"`` (a NumPy whose array objects memplug
    cannot read), ``"not-entered"`` (an :class:`memplug.numpy.Allocator`'s
    ``with`` block left in another thread or task than it was entered
    in)."""


class ShareError(Error):
    """An array cannot be shared with another process, or a handle cannot be
    attached (:func:`memplug.numpy.share`, :func:`memplug.numpy.attach`).

    ``code`` is memplug's reason code: ``"not-shareable"`` (the array's data
    was not made by a shareable memplug handler -- NumPy's default handler,
    or a handler without ABI 1.2 ``locate``/``resolve``: allocate it under
    ``memplug.numpy.allocator("shm:...")``), ``"foreign-memory"`` (the array views
    memory no handler made, e.g. ``np.frombuffer(bytes)``),
    ``"object-dtype"`` (object arrays hold pointers, meaningless in another
    process), ``"locate-refused"``, ``"bad-handle"``, ``"unknown-handler"``
    (the plugin is not loaded in this process), ``"attach-failed"`` (e.g.
    the segment no longer exists), ``"other-segment"``, ``"stale-handle"``
    (the segment was made again since), ``"segment-size-mismatch"``,
    ``"out-of-range"``, ``"instance-gone"``.
    """


class ForeignMemoryError(Error, ValueError):
    """:func:`memplug.numpy.from_pointer` cannot make an array over the
    memory given. ``code``: ``"bad-pointer"`` (not an address),
    ``"null-pointer"`` (NULL for a non-empty array), ``"bad-free"`` (not a
    ctypes function, a function address or a callable), ``"bad-shape"``,
    ``"bad-strides"`` (not ints, or not one per dimension),
    ``"object-dtype"`` (foreign memory cannot hold Python objects)."""
