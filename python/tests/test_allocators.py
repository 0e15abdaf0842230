"""Allocator objects: allocator(), with blocks restoring their own previous
handler across threads and asyncio tasks, install/set_allocator, and the
allocator that made an array's data, for views of every kind."""

from __future__ import annotations

import asyncio
import ctypes
import pickle
import threading

import numpy as np
import pytest

import memplug
import memplug.numpy as mnp

DEFAULT = "default_allocator"


class FakeHandler:
    """Stands for memplug.Handler: only its .name is used."""

    def __init__(self, name):
        self.name = name


@pytest.fixture(autouse=True)
def _default_afterwards():
    yield
    mnp.set_allocator(None)


def current():
    return mnp.get_allocator().name


def test_one_allocator_per_handler_whatever_it_is_made_from():
    a = mnp.allocator("tracking")
    assert a is mnp.allocator("tracking")
    assert a is mnp.allocator(FakeHandler("tracking"))
    assert a is mnp.allocator(a.capsule)
    assert a is mnp.allocator(a)
    assert (a.name, a.handler) == ("memplug:tracking", memplug.Handler("tracking"))
    assert a is mnp.allocator(memplug.handler("tracking"))
    assert a.capsule is mnp.allocator("tracking").capsule
    d = mnp.allocator(None)
    assert (d.name, d.handler) == (DEFAULT, None)
    assert d is mnp.get_allocator() and d == mnp.get_allocator() and d != a
    assert repr(a) == "<memplug.numpy.Allocator 'memplug:tracking'>"
    assert pickle.loads(pickle.dumps(a)) is a
    with pytest.raises(TypeError):
        pickle.dumps(d)
    with pytest.raises(TypeError):
        mnp.Allocator()


def test_instances_and_unknown_names():
    inst = mnp.allocator("arena:region_size=1m")
    assert inst.handler == memplug.Handler("arena:region_size=1m") and inst is mnp.allocator("arena:region_size=1m")
    with pytest.raises(memplug.UnknownHandlerError):
        mnp.allocator("no-such-handler")
    for bad in (42, object(), FakeHandler(3)):
        with pytest.raises(memplug.NumpyError) as e:
            mnp.allocator(bad)
        assert e.value.code == "not-a-handler"


def test_with_and_set_allocator_return_what_they_replaced():
    t, s = mnp.allocator("tracking"), mnp.allocator("system")
    with t as entered:
        assert entered is t and current() == "memplug:tracking"
        with s:
            assert current() == "memplug:system"
            with t:
                assert current() == "memplug:tracking"
            assert current() == "memplug:system"
        assert current() == "memplug:tracking"
    assert current() == DEFAULT
    assert mnp.set_allocator(t) is mnp.allocator(None)
    assert mnp.set_allocator(s) is t
    assert mnp.set_allocator(None) is s
    assert mnp.set_allocator("tracking").name == DEFAULT
    assert mnp.set_allocator(FakeHandler("system")) is t
    assert mnp.set_allocator(None) is s and current() == DEFAULT


def test_with_restores_on_an_exception():
    with pytest.raises(KeyError):
        with mnp.allocator("tracking"):
            raise KeyError("x")
    assert current() == DEFAULT


def test_leaving_blocks_out_of_order_on_one_thread_restores_each_ones_previous():
    a, b = mnp.allocator("tracking"), mnp.allocator("system")
    a.__enter__()
    b.__enter__()
    a.__exit__(None, None, None)  # b stays current; b's exit restores a's previous
    assert current() == "memplug:system"
    b.__exit__(None, None, None)
    assert current() == DEFAULT


def test_leaving_in_a_context_where_it_was_not_entered_is_refused():
    a = mnp.allocator("tracking")
    a.__enter__()
    errors = []

    def leave():
        try:
            a.__exit__(None, None, None)
        except memplug.NumpyError as e:
            errors.append(e.code)

    t = threading.Thread(target=leave)
    t.start()
    t.join()
    assert errors == ["not-entered"]
    a.__exit__(None, None, None)
    assert current() == DEFAULT


def run_threads(*targets):
    failures = []

    def wrap(f):
        def run():
            try:
                f()
            except BaseException as e:  # reported to the test below
                failures.append(e)
        return run

    threads = [threading.Thread(target=wrap(f)) for f in targets]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if failures:
        raise failures[0]


@pytest.mark.parametrize("same", [False, True], ids=["two-allocators", "one-allocator-on-both"])
def test_blocks_interleaved_across_threads_each_restore_their_own(same):
    a = mnp.allocator("tracking")
    b = a if same else mnp.allocator("system")
    step = threading.Barrier(2)
    seen = {}

    def first():
        mnp.set_allocator("guard")  # this thread's handler before its block
        with a:
            step.wait()  # 1: both inside
            seen["first inside"] = current()
            step.wait()  # 2
        seen["first after"] = current()  # left first
        step.wait()  # 3
        step.wait()  # 4: the second has left too
        seen["first at end"] = current()

    def second():
        step.wait()  # 1
        with b:
            step.wait()  # 2
            step.wait()  # 3: the first has left
            seen["second inside"] = current()
        seen["second after"] = current()
        step.wait()  # 4

    run_threads(first, second)
    assert seen == {
        "first inside": "memplug:tracking",
        "first after": "memplug:guard",
        "first at end": "memplug:guard",
        "second inside": b.name,
        "second after": DEFAULT,
    }
    assert current() == DEFAULT


def test_blocks_interleaved_across_asyncio_tasks_each_restore_their_own():
    a, b = mnp.allocator("tracking"), mnp.allocator("system")
    seen = {}

    async def main():
        a_in, b_in, a_out = asyncio.Event(), asyncio.Event(), asyncio.Event()

        async def task_a():
            with a:
                a_in.set()
                await b_in.wait()
                seen["a inside"] = current()
            seen["a after"] = current()
            a_out.set()

        async def task_b():
            await a_in.wait()
            with b:
                b_in.set()
                await a_out.wait()  # a leaves while b is inside
                seen["b inside"] = current()
            seen["b after"] = current()

        async def inherits():
            seen["child of a block"] = current()

        with mnp.allocator("guard"):
            child = asyncio.ensure_future(inherits())  # copies this context
        await asyncio.gather(task_a(), task_b(), child)
        seen["main"] = current()

    asyncio.run(main())
    assert seen == {
        "a inside": "memplug:tracking",
        "a after": DEFAULT,
        "b inside": "memplug:system",
        "b after": DEFAULT,
        "child of a block": "memplug:guard",
        "main": DEFAULT,
    }


def views(a):
    """Views of a 2-D array: slices, transposes, views of views."""
    return [
        a[1:],
        a[:, ::2],
        a.T,
        a.T[::-1],
        a[1:].T[:, 1:][::2],
        a.reshape(-1),
        a.view(np.uint8),
        a[np.newaxis],
        np.lib.stride_tricks.as_strided(a, shape=(2, 2), strides=(8, 8)),
        np.asarray(memoryview(a)),
    ]


@pytest.mark.parametrize("name", ["tracking", "arena:region_size=1m", None])
def test_the_allocator_of_a_view_is_its_owners(name):
    alloc = mnp.allocator(name)
    other = mnp.allocator("system" if name else "tracking")
    with alloc:
        a = np.ones((8, 8))
    assert a.flags.owndata and mnp.get_allocator(a) is alloc and alloc.handles(a)
    for v in views(a):
        assert not v.flags.owndata
        assert mnp.get_allocator(v) is alloc, v
        assert alloc.handles(v) and not other.handles(v)
        assert mnp.get_allocator(v).name == alloc.name
        assert mnp.owner_of(v) is a


def test_memory_no_handler_made_has_no_allocator():
    buf = bytearray(64)
    for a in (np.frombuffer(b"12345678", dtype=np.uint8), np.frombuffer(buf)[2:], np.ctypeslib.as_array((ctypes.c_int * 4)())):
        assert mnp.get_allocator(a) is None and mnp.owner_of(a) is None
        assert not mnp.allocator(None).handles(a)
    with pytest.raises(TypeError):
        mnp.get_allocator([1, 2])


def test_hooked_and_foreign_capsules_have_allocators():
    h = mnp.hooked(None, lambda *args: None)
    assert h.name == "memplug:hooked(default_allocator)" and h.handler is None
    assert mnp.allocator(h.capsule) is h
    with h:
        a = np.ones((4, 4))
    assert mnp.get_allocator(a.T[1:]) is h


def test_an_allocator_over_c_functions():
    libc = ctypes.CDLL(None)
    alloc = mnp.allocator(memplug.from_functions(malloc=libc.malloc, free=libc.free, calloc=libc.calloc, realloc=libc.realloc))
    assert alloc.handler.name.startswith("python-") and alloc.name == f"memplug:{alloc.handler.name}"
    with alloc:
        a = np.arange(1000.0)
        z = np.zeros(100)
    assert alloc.handles(a[10:]) and alloc.handles(z)
    assert a.sum() == 499500.0 and z.sum() == 0.0
    named = mnp.allocator(memplug.from_functions("libc-by-hand", malloc=libc.malloc, free=libc.free))
    assert named.handler == memplug.Handler("libc-by-hand")


class PyDataMemAllocator(ctypes.Structure):
    _fields_ = [("ctx", ctypes.c_void_p), ("malloc", ctypes.c_void_p), ("calloc", ctypes.c_void_p),
                ("realloc", ctypes.c_void_p), ("free", ctypes.c_void_p)]


class PyDataMemHandler(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char * 127), ("version", ctypes.c_uint8), ("allocator", PyDataMemAllocator)]


CAPSULE_NAME = ctypes.create_string_buffer(b"mem_handler")
_foreign_handlers = []  # kept for the process, as NumPy's arrays keep them


def foreign_capsule(name):
    """A handler capsule no memplug code made: NumPy's default functions
    under another name, as another library would make one."""
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    new = ctypes.pythonapi.PyCapsule_New
    new.restype, new.argtypes = ctypes.py_object, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
    default = PyDataMemHandler.from_address(get(mnp.allocator(None).capsule, b"mem_handler"))
    h = PyDataMemHandler(name.encode(), 1, default.allocator)
    _foreign_handlers.append(h)
    return new(ctypes.addressof(h), ctypes.cast(CAPSULE_NAME, ctypes.c_char_p), None)


def test_a_foreign_libraries_handler_is_an_allocator_too():
    cap = foreign_capsule("someone_elses")
    alloc = mnp.allocator(cap)
    assert (alloc.name, alloc.handler) == ("someone_elses", None) and mnp.allocator(cap) is alloc
    with alloc:
        a = np.arange(100.0)
        assert mnp.get_allocator() is alloc
    assert mnp.get_allocator(a[::-1]) is alloc and mnp.get_allocator(a.T).name == "someone_elses"
    seen = []
    with mnp.hooked(alloc, lambda *e: seen.append(e[0])) as h:
        b = np.empty(10)
    assert h.name == "memplug:hooked(someone_elses)" and mnp.get_allocator(b) is h
    del a, b
    assert seen == ["malloc", "free"]


def test_with_and_set_allocator_take_handler_and_allocator_objects_too():
    h = memplug.handler("tracking")
    with mnp.allocator(h):
        a = np.ones(100)
    with mnp.allocator(mnp.allocator("system")):
        b = np.ones(100)
    previous = mnp.set_allocator(h)
    try:
        c = np.ones(100)
    finally:
        mnp.set_allocator(previous)
    assert [mnp.get_allocator(x).name for x in (a, b, c)] == ["memplug:tracking", "memplug:system", "memplug:tracking"]
