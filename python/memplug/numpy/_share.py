"""NumPy arrays handed to other processes without copying.

:func:`share` turns an array whose data a *shareable* memplug handler made
(the bundled ``shm`` plugin: ``memplug.numpy.allocator("shm:name=...,size=...")``)
into a :class:`SharedArray`, a small picklable handle; :func:`attach` turns
the handle back into an ndarray over the same memory in another process.
See :mod:`memplug.numpy` for the rules (who frees, lifetimes, taking turns).
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

import memplug
from memplug import _memplug as _native
from memplug._errors import ShareError

__all__ = ["SharedArray", "share", "attach"]

_BLOCK_FIELDS = ("handler", "segment", "segment_size", "generation", "offset", "length", "attach", "plugin")


class SharedArray:
    """A handle to an array's memory that another process can
    :func:`attach`: plain data, picklable (send it through a
    ``multiprocessing`` pipe, queue or pool), a few hundred bytes whatever the
    array's size.

    It carries memplug's ``SharedBlock`` -- ``handler`` (the plugin's handler
    name, e.g. ``"shm"``), ``segment`` (e.g. ``"/memplug-work"``),
    ``segment_size``, ``generation`` (the segment's incarnation: a segment
    made again under the same name refuses old handles), ``offset`` and
    ``length`` (the bytes of the array's range in the segment), ``attach``
    (the options that attach a process to the segment, e.g.
    ``"name=work,create=0"``) -- plus ``plugin`` (the library the handler
    came from, loaded by :func:`attach` in a process that lacks the handler;
    None if unknown), and the array's ``dtype``, ``shape``, ``strides`` (in
    bytes, as NumPy's) and ``data_offset`` (where element ``[0, ..., 0]``
    lies in the range: not 0 for negative strides) and ``writeable``.
    """

    __slots__ = _BLOCK_FIELDS + ("dtype", "shape", "strides", "data_offset", "writeable")

    handler: str
    segment: str
    segment_size: int
    generation: int
    offset: int
    length: int
    attach: str
    plugin: Optional[str]
    dtype: Any
    shape: Tuple[int, ...]
    strides: Tuple[int, ...]
    data_offset: int
    writeable: bool

    def __init__(
        self,
        block: Dict[str, Any],
        dtype: Any,
        shape: Tuple[int, ...],
        strides: Tuple[int, ...],
        data_offset: int,
        writeable: bool = True,
    ) -> None:
        for k in _BLOCK_FIELDS:
            object.__setattr__(self, k, block.get(k))
        object.__setattr__(self, "dtype", dtype)
        object.__setattr__(self, "shape", tuple(int(n) for n in shape))
        object.__setattr__(self, "strides", tuple(int(s) for s in strides))
        object.__setattr__(self, "data_offset", int(data_offset))
        object.__setattr__(self, "writeable", bool(writeable))

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("a SharedArray is immutable")

    def block(self) -> Dict[str, Any]:
        """memplug's ``SharedBlock`` fields (and ``plugin``) as a dict."""
        return {k: getattr(self, k) for k in _BLOCK_FIELDS}

    @property
    def nbytes(self) -> int:
        """Bytes of the shared range."""
        return int(self.length)

    def __reduce__(self) -> Any:
        return (SharedArray, (self.block(), self.dtype, self.shape, self.strides, self.data_offset, self.writeable))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SharedArray):
            return NotImplemented
        return self.__reduce__()[1] == other.__reduce__()[1]

    def __hash__(self) -> int:
        return hash((self.segment, self.generation, self.offset, self.length, self.shape, self.strides))

    def __repr__(self) -> str:
        return (
            f"SharedArray(shape={self.shape}, dtype={self.dtype}, {self.handler} segment {self.segment} "
            f"offset {self.offset} length {self.length})"
        )


def _extent(ptr: int, shape: Tuple[int, ...], strides: Tuple[int, ...], itemsize: int) -> Tuple[int, int]:
    """The bytes ``[lo, hi)`` an array with these fields reaches."""
    if any(n == 0 for n in shape):
        return ptr, ptr
    lo = ptr + sum((n - 1) * s for n, s in zip(shape, strides) if s < 0)
    hi = ptr + sum((n - 1) * s for n, s in zip(shape, strides) if s > 0) + itemsize
    return lo, hi


def share(arr: Any) -> SharedArray:
    """A picklable handle to ``arr``'s memory for another process
    (:func:`attach` there gives an ndarray over the same bytes).

    ``arr`` is an array whose data a shareable memplug handler made -- made
    inside ``with memplug.numpy.allocator("shm:name=NAME,size=SIZE"):`` -- or any
    view of one (a slice, a transposed or reversed view, a reshaped one):
    the handle names just the bytes the view reaches, inside the block. A
    view of an attached array can be shared on, too. Nothing is copied;
    sharing costs a few microseconds whatever the size.

    The array stays owned by this process: keep it (do not delete or
    ``resize`` it) until the other processes are done with the memory.

    Raises :class:`memplug.ShareError`: ``"not-shareable"`` for data made
    by NumPy's default handler (arrays made before entering the ``with`` block) or by
    a memplug handler that cannot share (no ABI 1.2 ``locate``/``resolve``,
    e.g. ``system``); ``"foreign-memory"`` for arrays over memory no handler
    made (``np.frombuffer``, memory maps); ``"object-dtype"`` for arrays of
    Python objects.
    """
    import numpy as np

    if not isinstance(arr, np.ndarray):
        raise TypeError(f"memplug.numpy.share needs a numpy.ndarray, not {type(arr).__name__}")
    if arr.dtype.hasobject:
        raise ShareError(
            f"an array of dtype {arr.dtype} holds pointers to Python objects of this process, meaningless in "
            "another: share arrays of plain data (numbers, fixed-size strings, structs of them)",
            "object-dtype",
        )
    ptr = arr.__array_interface__["data"][0]
    lo, hi = _extent(ptr, arr.shape, arr.strides, arr.itemsize)
    base: Any = arr
    while True:
        if isinstance(base, np.ndarray):
            if base.flags.owndata:
                block = _native.share_array(base, base.__array_interface__["data"][0], base.ndim, lo, hi - lo)
                break
            following = base.base
        elif isinstance(base, memoryview):
            following = base.obj
        elif isinstance(base, _native.Attachment):
            block = base.share(lo, hi - lo)
            break
        else:
            following = None
        if following is None:
            what = "no owner" if base is arr or base is None else f"a {type(base).__name__}"
            raise ShareError(
                f"the array's memory belongs to {what}, not to an array a memplug handler made, so no handler can "
                "share it: copy it into an array made under a shareable handler, e.g. "
                '`with memplug.numpy.allocator("shm:name=NAME,size=SIZE"): b = np.array(a)`',
                "foreign-memory",
            )
        base = following
    return SharedArray(block, arr.dtype, arr.shape, arr.strides, ptr - lo, bool(arr.flags.writeable))


def _make_loadable(handle: SharedArray) -> None:
    """Load the handle's plugin here if its handler is not registered yet."""
    memplug._ensure_loaded()
    if handle.handler in _native.names() or not handle.plugin:
        return
    outcomes = memplug.load(handle.plugin, strict=False)
    if handle.handler not in _native.names():
        why = "; ".join(f"{o['path']}: [{o['reason']}] {o['message']}" for o in outcomes if o["status"] != "ok")
        raise ShareError(
            f"no handler named `{handle.handler}` is loaded in this process, and loading {handle.plugin} did not "
            f"register one ({why or 'it registers another name'}): load the plugin that made the array first "
            "(memplug.load(PATH) or MEMPLUG_PLUGIN_PATH)",
            "unknown-handler",
            handle.plugin,
        )


def attach(handle: SharedArray) -> Any:
    """An ndarray over the memory ``handle`` names, in this process: the
    same bytes the sharing process sees, not a copy. Writes are seen by
    every process attached (read-write unless the shared array was
    read-only).

    The array's ``base`` is an attachment object owning memplug's attached
    buffer: it keeps the segment mapped in this process for as long as
    any array over it lives, and never frees the memory (the process that
    made the array does). Attaching the first block of a segment maps it
    (some microseconds); further blocks of a mapped segment reuse the
    mapping.

    The processes take turns, as with any shared memory: a worker writes
    its part while no other process touches that part, and the owner reads
    it after the worker is done (e.g. after ``pool.map`` returns).

    Raises :class:`memplug.ShareError`: ``"attach-failed"`` when the
    segment is gone (its owner exited or closed it) or cannot be opened,
    ``"other-segment"``, ``"stale-handle"`` (the segment was made again
    since the handle), ``"segment-size-mismatch"``, ``"out-of-range"``,
    ``"bad-handle"`` (a damaged handle), ``"unknown-handler"``.
    """
    import numpy as np

    if not isinstance(handle, SharedArray):
        raise TypeError(f"memplug.numpy.attach needs a SharedArray (from memplug.numpy.share), not {type(handle).__name__}")
    _make_loadable(handle)
    attachment = _native.attach_block(handle.block())
    raw = np.asarray(attachment)  # the block's bytes; its base is the attachment
    arr = np.ndarray(handle.shape, handle.dtype, buffer=raw, offset=handle.data_offset, strides=handle.strides)
    if not handle.writeable:
        arr.flags.writeable = False
    return arr
