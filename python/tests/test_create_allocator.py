"""memplug.numpy.create_allocator: an Allocator made of allocation
functions -- C functions or Python callables, as memplug.from_functions
takes them -- in one call, the spelling NumPy's NEP 49 discussion asked
for (``my_allocator = create_allocator(malloc=..., ...)``, then ``with
my_allocator:`` and ``set_allocator(my_allocator)``)."""

from __future__ import annotations

import gc
import inspect

import numpy as np
import pytest

import memplug
import memplug.numpy as mnp

from test_define import Counting, libc_functions


def test_c_functions_make_an_allocator_that_serves_numpy_and_gives_every_byte_back():
    _, malloc, calloc, realloc, free = libc_functions()
    my_allocator = mnp.create_allocator(malloc=malloc, calloc=calloc, realloc=realloc, free=free)
    assert isinstance(my_allocator, mnp.Allocator)
    name = my_allocator.handler.name
    assert name.startswith("python-"), "named like from_functions' handlers when no name is given"
    assert my_allocator.name == f"memplug:{name}"
    assert mnp.allocator(name) is my_allocator, "the allocator of its handler, one object per handler"
    with my_allocator:
        a = np.arange(100_000, dtype=np.int64)
        b = np.zeros(1000)
        a.resize(200_000, refcheck=False)  # NumPy's realloc
    assert mnp.get_allocator(a) is my_allocator and mnp.get_allocator(b[10:]) is my_allocator
    assert a[:100_000].sum() == 100_000 * 99_999 // 2 and b.sum() == 0.0
    bridge = memplug.stats(name)["bridge"]
    assert bridge["allocations"] >= 2 and bridge["reallocs"] >= 1, bridge
    del a, b
    gc.collect()
    bridge = memplug.stats(name)["bridge"]
    assert bridge["live_blocks"] == 0 and bridge["live_bytes"] == 0, bridge


def test_python_callables_with_a_name_and_set_allocator():
    c = Counting()
    my_allocator = mnp.create_allocator(
        malloc=c.malloc, calloc=c.calloc, realloc=c.realloc, free=c.free, name="created-counting"
    )
    assert my_allocator.handler == memplug.handler("created-counting")
    assert memplug.handler("created-counting").info["source"] == "<Python callables>"
    my_allocator.set_cache(False)  # every NumPy call reaches the callables
    previous = mnp.set_allocator(my_allocator)
    try:
        a = np.ones((300, 300))
        assert mnp.get_allocator() is my_allocator
    finally:
        mnp.set_allocator(previous)
    assert mnp.get_allocator(a) is my_allocator and a.sum() == 90_000.0
    assert c.live > 0
    del a
    gc.collect()
    assert c.live == 0, "every byte came back through the callables"


def test_malloc_and_free_alone_are_enough():
    _, malloc, _, _, free = libc_functions()
    alloc = mnp.create_allocator(malloc=malloc, free=free)
    with alloc:
        a = np.ones(5000)
        a.resize(10_000, refcheck=False)  # realloc derived from malloc and free
    assert a[:5000].sum() == 5000.0 and mnp.get_allocator(a) is alloc
    del a
    gc.collect()
    assert memplug.stats(alloc.handler.name)["bridge"]["live_blocks"] == 0


def test_refusals_are_from_functions_refusals():
    _, malloc, _, _, free = libc_functions()
    c = Counting()
    with pytest.raises(memplug.LoadError) as mixed:
        mnp.create_allocator(malloc=malloc, free=c.free)
    assert mixed.value.code == "mixed-function-kinds"
    mnp.create_allocator(malloc=malloc, free=free, name="created-once")
    with pytest.raises(memplug.LoadError) as taken:
        mnp.create_allocator(malloc=malloc, free=free, name="created-once")
    assert taken.value.code == "duplicate-name"
    with pytest.raises(TypeError):
        mnp.create_allocator(malloc="malloc", free=free)


def test_it_is_not_a_second_name_for_allocator():
    assert mnp.create_allocator is not mnp.allocator
    params = inspect.signature(mnp.create_allocator).parameters
    assert [p for p in params][:5] == ["malloc", "calloc", "realloc", "free", "name"]
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in params.values())
    assert params["name"].default is None
    with pytest.raises(TypeError):
        mnp.create_allocator("tracking")  # type: ignore[misc]  (an existing handler is allocator()'s)
