"""Foreign memory as an ndarray (:func:`from_pointer`): memory a C library
made, seen by NumPy without copying, and freed by the library's own
``free`` when the last array over it goes -- through the array's base
object (:class:`ForeignMemory`), never through NumPy's data-memory handler.
"""

from __future__ import annotations

import ctypes
import operator
import threading
from typing import Any, Callable, Dict, Optional, Sequence, Tuple, Union

from memplug._errors import ForeignMemoryError

ShapeLike = Union[int, Sequence[int]]


def _address(ptr: Any) -> int:
    """The address in ``ptr``: an int, a ``ctypes.c_void_p`` or a ctypes
    pointer."""
    if isinstance(ptr, bool):
        raise ForeignMemoryError("ptr must be an address (an int or a ctypes pointer), not a bool", "bad-pointer")
    if isinstance(ptr, int):
        if ptr < 0:
            raise ForeignMemoryError(f"ptr {ptr} is negative: pass the address as an unsigned int", "bad-pointer")
        return ptr
    if isinstance(ptr, ctypes.c_void_p):
        return ptr.value or 0
    if isinstance(ptr, ctypes._Pointer):
        return ctypes.cast(ptr, ctypes.c_void_p).value or 0
    raise ForeignMemoryError(
        f"ptr must be an int address, a ctypes.c_void_p or a ctypes pointer, not {type(ptr).__name__}",
        "bad-pointer",
    )


def _freer(free: Any) -> Optional[Callable[[int], Any]]:
    """``free`` as a Python function of the address."""
    if free is None:
        return None
    if isinstance(free, ctypes._CFuncPtr):
        return lambda address: free(ctypes.c_void_p(address))
    if isinstance(free, int) and not isinstance(free, bool):
        if free <= 0:
            raise ForeignMemoryError(f"free's address {free:#x} cannot be a function", "bad-free")
        c_free = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(free)
        return lambda address: c_free(ctypes.c_void_p(address))
    if callable(free):
        return free
    raise ForeignMemoryError(
        f"free must be a ctypes function, the int address of `void free(void *)`, or a Python callable taking the "
        f"address, not {type(free).__name__}",
        "bad-free",
    )


def _dims(name: str, value: Any) -> Tuple[int, ...]:
    try:
        items = (value,) if isinstance(value, int) else tuple(value)
        return tuple(operator.index(n) for n in items)
    except TypeError:
        raise ForeignMemoryError(f"{name} must be an int or a sequence of ints, not {value!r}", f"bad-{name}") from None


class ForeignMemory:
    """The base object of an array :func:`from_pointer` made: it shows
    NumPy the memory (``__array_interface__``) and, when the last array
    over it goes, calls ``free`` on it once (on the thread that dropped
    the last array) and then lets ``owner`` go.

    NumPy never frees this memory itself (the arrays do not own their data:
    ``flags.owndata`` is False), and it cannot be pickled (arrays over it
    pickle as copies of the data).
    """

    __slots__ = ("_address", "_nbytes", "_free", "_owner", "_interface", "_lock", "_freed", "__weakref__")

    def __init__(
        self,
        address: int,
        nbytes: int,
        interface: Dict[str, Any],
        free: Optional[Callable[[int], Any]],
        owner: Any,
    ) -> None:
        self._address = address
        self._nbytes = nbytes
        self._interface = interface
        self._free = free
        self._owner = owner
        self._lock = threading.Lock()
        self._freed = False

    @property
    def address(self) -> int:
        """The address given to :func:`from_pointer`."""
        return self._address

    @property
    def nbytes(self) -> int:
        """Bytes from the lowest to past the highest element reached."""
        return self._nbytes

    @property
    def owner(self) -> Any:
        """The object kept alive with the memory (``owner=``), or None."""
        return self._owner

    @property
    def freed(self) -> bool:
        """Whether ``free`` has run (only seen by code holding this object
        after the arrays went, e.g. through a weak reference's callback)."""
        return self._freed

    @property
    def __array_interface__(self) -> Dict[str, Any]:
        return self._interface

    def __del__(self) -> None:
        with self._lock:
            if self._freed:
                return
            self._freed = True
        try:
            if self._free is not None:
                self._free(self._address)
        finally:
            self._owner = None

    def __reduce__(self) -> Any:
        raise TypeError("foreign memory cannot be pickled: pickle the array, which copies its data")

    def __repr__(self) -> str:
        what = "freed" if self._freed else ("freed by free()" if self._free is not None else "borrowed")
        return f"<memplug.numpy.ForeignMemory {self._nbytes} bytes at {self._address:#x}, {what}>"


def from_pointer(
    ptr: Any,
    shape: ShapeLike,
    dtype: Any,
    *,
    free: Any = None,
    owner: Any = None,
    strides: Optional[Sequence[int]] = None,
    readonly: bool = False,
) -> Any:
    """An ndarray over memory at ``ptr`` that NumPy did not allocate,
    without copying it.

    ``ptr`` is an int address, a ``ctypes.c_void_p`` or a ctypes pointer
    (NULL only if the array is empty); ``shape``, ``dtype`` and ``strides``
    (bytes; C order if None; negative ones count from ``ptr``) as for
    ``np.ndarray``. The caller vouches that every element these reach lies
    in the memory -- nothing can check it.

    Who lets the memory go, once the last array (view, slice, transpose)
    over it is gone, on the thread that drops it:

    - ``free``: a ctypes function (``libc.free``), the int address of a C
      ``void free(void *)``, or a Python callable; called with the address,
      exactly once (an exception it raises is reported as unraisable);
    - ``owner``: any object, kept alive as long as an array over the memory
      is (e.g. the object the memory belongs to);
    - both: ``free`` runs first, then ``owner`` goes;
    - neither: the memory is borrowed; keep it valid while any array over
      it lives.

    The array does not own its data (``flags.owndata`` is False): its base
    is a :class:`ForeignMemory`, so NumPy never frees the memory through
    its data-memory handler, and :func:`get_allocator` says None. Never
    set ``NPY_ARRAY_OWNDATA`` on such an array from C instead: NumPy would
    then free memory it did not allocate with whatever handler the array
    names. ``readonly=True`` makes the array read-only. Pickling the array
    copies the data.

    Raises :class:`memplug.ForeignMemoryError`: ``"bad-pointer"``,
    ``"null-pointer"``, ``"bad-free"``, ``"bad-shape"``, ``"bad-strides"``,
    ``"object-dtype"``.
    """
    import numpy as np

    address = _address(ptr)
    dims = _dims("shape", shape)
    if any(n < 0 for n in dims):
        raise ForeignMemoryError(f"shape {dims} has a negative dimension", "bad-shape")
    dt = np.dtype(dtype)
    if dt.hasobject:
        raise ForeignMemoryError(
            f"dtype {dt} holds Python objects: foreign memory holds no object references NumPy could own",
            "object-dtype",
        )
    itemsize = dt.itemsize
    if strides is None:
        steps = []
        step = itemsize
        for n in reversed(dims):
            steps.append(step)
            step *= max(n, 1)
        byte_strides = tuple(reversed(steps))
    else:
        byte_strides = _dims("strides", strides)
        if len(byte_strides) != len(dims):
            raise ForeignMemoryError(
                f"strides {byte_strides} has {len(byte_strides)} entries for {len(dims)} dimensions", "bad-strides"
            )
    empty = any(n == 0 for n in dims)
    if empty:
        nbytes = 0
    else:
        lo = sum((n - 1) * s for n, s in zip(dims, byte_strides) if s < 0)
        hi = sum((n - 1) * s for n, s in zip(dims, byte_strides) if s > 0) + itemsize
        nbytes = hi - lo
    if address == 0 and not empty:
        raise ForeignMemoryError(f"ptr is NULL for an array of shape {dims}: pass the memory's address", "null-pointer")
    freer = _freer(free)
    interface = {
        "version": 3,
        "shape": dims,
        "typestr": f"|V{itemsize}",
        "data": (address, bool(readonly)),
        "strides": None if strides is None else byte_strides,
    }
    memory = ForeignMemory(address, nbytes, interface, None, None)
    raw = np.asarray(memory)
    arr = raw if dt == raw.dtype else raw.view(dt)
    # Only now that the arrays are made: a refusal above leaves the memory
    # to its caller, unfreed.
    memory._free = freer
    memory._owner = owner
    return arr
