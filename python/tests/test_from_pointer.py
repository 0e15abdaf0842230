"""from_pointer: arrays over foreign memory, freed once by its own free
after the last view, on whichever thread drops it; never OWNDATA."""

from __future__ import annotations

import ctypes
import gc
import pickle
import threading
import weakref

import numpy as np
import pytest

import memplug
import memplug.numpy as mnp

from conftest import FREE_THREADED

libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]


class Freer:
    """A Python `free` that frees with libc and records each call."""

    def __init__(self):
        self.calls = []

    def __call__(self, ptr):
        self.calls.append((ptr, threading.get_ident()))
        libc.free(ptr)


def foreign(a):
    """The ForeignMemory under an array."""
    while not isinstance(a, mnp.ForeignMemory):
        a = a.base
    return a


def c_array(n, dtype=np.float64):
    ptr = libc.malloc(n * np.dtype(dtype).itemsize)
    assert ptr
    return ptr


def test_an_array_over_foreign_memory_never_owns_it():
    ptr, free = c_array(12), Freer()
    a = mnp.from_pointer(ptr, (3, 4), np.float64, free=free)
    a[...] = np.arange(12.0).reshape(3, 4)
    assert a.ctypes.data == ptr and a.shape == (3, 4) and a.dtype == np.float64
    assert a.flags.owndata is False and a.flags.writeable
    assert mnp.get_allocator(a) is None and mnp.get_allocator(a) is None
    assert not mnp.allocator(None).handles(a)
    assert a.sum() == 66.0
    del a
    assert free.calls == [(ptr, threading.get_ident())]


def test_free_runs_once_after_the_last_view():
    ptr, free = c_array(64), Freer()
    a = mnp.from_pointer(ptr, (8, 8), np.float64, free=free)
    views = [a[1:], a.T, a.T[::-1][:, 2:], a[::2].T[1:], a.reshape(64)[::3], a.view(np.int64)]
    base = weakref.ref(foreign(a))
    assert base().address == ptr and base().nbytes == 512
    del a
    while views:
        assert free.calls == []
        views.pop()
    gc.collect()
    assert len(free.calls) == 1 and base() is None


def test_free_runs_on_the_thread_dropping_the_last_view():
    ptr, free = c_array(100), Freer()
    box = [mnp.from_pointer(ptr, 100, np.float64, free=free)[10:20]]
    t = threading.Thread(target=box.clear)
    t.start()
    t.join()
    if FREE_THREADED:
        # Biased reference counting: the last reference dropped on a thread
        # that does not own the object goes back to its owner (this
        # thread), which frees it (at once here, or at the collection).
        gc.collect()
        assert free.calls == [(ptr, threading.get_ident())]
    else:
        assert free.calls == [(ptr, t.ident)]


def test_free_as_a_ctypes_function_or_its_address():
    calls = []
    c_free = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(lambda p: (calls.append(p), libc.free(p)))
    p1, p2 = c_array(8), c_array(8)
    a = mnp.from_pointer(p1, 8, np.float64, free=c_free)
    b = mnp.from_pointer(ctypes.c_void_p(p2), 8, np.float64, free=ctypes.cast(c_free, ctypes.c_void_p).value)
    del a, b
    assert calls == [p1, p2]
    p3 = c_array(4)
    c = mnp.from_pointer(ctypes.cast(p3, ctypes.POINTER(ctypes.c_double)), 4, np.float64, free=libc.free)
    assert c.ctypes.data == p3
    del c  # libc.free itself


def test_owner_lives_as_long_as_the_views_and_free_never_runs():
    class Owner:
        def __init__(self):
            self.buf = (ctypes.c_double * 16)()

    owner = Owner()
    alive = weakref.ref(owner)
    a = mnp.from_pointer(ctypes.addressof(owner.buf), (4, 4), np.float64, owner=owner)
    del owner
    view = a.T[1:]
    del a
    assert alive() is not None
    view[0, 0] = 5.0
    assert alive().buf[1] == 5.0
    del view
    assert alive() is None


def test_free_then_owner_when_both_are_given():
    order = []

    class Owner:
        def __del__(self):
            order.append("owner")

    ptr = c_array(4)
    a = mnp.from_pointer(ptr, 4, np.float64, free=lambda p: (order.append("free"), libc.free(p)), owner=Owner())
    del a
    assert order == ["free", "owner"]


def test_pickling_copies_the_data():
    ptr, free = c_array(6), Freer()
    a = mnp.from_pointer(ptr, (2, 3), np.float64, free=free)
    a[...] = [[1, 2, 3], [4, 5, 6]]
    for proto in (2, pickle.HIGHEST_PROTOCOL):
        b = pickle.loads(pickle.dumps(a.T, protocol=proto))
        assert not ptr <= b.ctypes.data < ptr + a.nbytes and (b == a.T).all()
        a[0, 0] = 9.0
        assert b[0, 0] == 1.0
        a[0, 0] = 1.0
    with pytest.raises(TypeError):
        pickle.dumps(foreign(a))
    del a
    assert len(free.calls) == 1


def test_strides_dtypes_and_readonly():
    ptr, free = c_array(12), Freer()
    full = mnp.from_pointer(ptr, (3, 4), np.float64)  # borrowed
    full[...] = np.arange(12.0).reshape(3, 4)
    column = mnp.from_pointer(ptr + 8, 3, np.float64, strides=(32,), readonly=True, free=lambda p: free(p - 8))
    assert column.tolist() == [1.0, 5.0, 9.0] and not column.flags.writeable
    with pytest.raises(ValueError):
        column[0] = 1.0
    backwards = mnp.from_pointer(ptr + 88, 12, np.float64, strides=[-8])
    assert backwards[0] == 11.0 and backwards[-1] == 0.0
    pairs = mnp.from_pointer(ptr, 6, np.dtype([("x", "<f8"), ("y", "<f8")]))
    assert pairs["y"].tolist() == [1.0, 3.0, 5.0, 7.0, 9.0, 11.0]
    rows = mnp.from_pointer(ptr, 3, np.dtype(("<f8", (4,))))
    assert rows.shape == (3, 4) and rows[2, 3] == 11.0
    del full, backwards, pairs, rows
    assert free.calls == []
    del column
    assert len(free.calls) == 1


@pytest.mark.parametrize(
    "args, kwargs, code",
    [
        ((0, 4, np.float64), {}, "null-pointer"),
        ((None, 4, np.float64), {}, "bad-pointer"),
        ((True, 4, np.float64), {}, "bad-pointer"),
        ((-8, 4, np.float64), {}, "bad-pointer"),
        ((4096, (2, -1), np.float64), {}, "bad-shape"),
        ((4096, "four", np.float64), {}, "bad-shape"),
        ((4096, (2, 2), np.float64), {"strides": (8,)}, "bad-strides"),
        ((4096, 2, object), {}, "object-dtype"),
        ((4096, 2, np.float64), {"free": "libc.free"}, "bad-free"),
        ((4096, 2, np.float64), {"free": 0}, "bad-free"),
    ],
)
def test_refusals(args, kwargs, code):
    with pytest.raises(memplug.ForeignMemoryError) as e:
        mnp.from_pointer(*args, **kwargs)
    assert e.value.code == code and isinstance(e.value, ValueError)


def test_an_empty_array_may_have_a_null_pointer_and_a_refusal_frees_nothing():
    calls = []
    e = mnp.from_pointer(0, (0, 3), np.float64, free=calls.append)
    assert e.shape == (0, 3)
    del e
    assert calls == [0]
    with pytest.raises(memplug.ForeignMemoryError):
        mnp.from_pointer(4096, 2, object, free=calls.append)
    gc.collect()
    assert calls == [0]
