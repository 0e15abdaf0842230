"""memplug.numpy_allocator: numpy-allocator 1.2's API on memplug.

numpy-allocator's own example allocators (numpy_allocator_examples/, their
import changed to memplug's) run, and the API behaves as numpy-allocator's:
arrays come from the allocator, handles/get_handler/set_handler, nested
``with`` blocks restore, and the functions outlive their class."""

from __future__ import annotations

import ctypes
import gc
import mmap
import re
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

import memplug
from memplug import numpy_allocator
from numpy_allocator_examples import aligned_allocator, debug_allocator, default_allocator, page_aligned_allocator

EXAMPLES = Path(__file__).resolve().parent / "numpy_allocator_examples"
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
libc_malloc, libc_free = libc.malloc, libc.free


def numpy_name(arr=None):
    get = np._core.multiarray.get_handler_name
    return get() if arr is None else get(arr)


def run_example(module: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-W", "ignore::DeprecationWarning", "-m", f"numpy_allocator_examples.{module}"],
        cwd=EXAMPLES.parent, capture_output=True, text=True, timeout=120,
    )


def test_the_examples_differ_from_numpy_allocators_only_in_the_import():
    for path in sorted(EXAMPLES.glob("*_allocator.py")):
        lines = path.read_text().splitlines()
        assert "from memplug import numpy_allocator  # changed from: import numpy_allocator" in lines, path
        assert "import numpy_allocator" not in lines, path


def test_debug_allocator_example_runs_and_its_functions_see_the_array():
    done = run_example("debug_allocator")
    assert done.returncode == 0, done.stderr
    # Its last lines: the array's malloc (np.arange(15) of int64 is 120
    # bytes; the plugin is asked for the bridge's header too), then its free
    # at exit. The lines before are memplug's check of the functions when
    # the handler was made (some printed from several threads at once).
    *_, made, freed = done.stdout.splitlines()
    allocated = re.fullmatch(r"(0x[0-9a-f]+) malloc\((\d+)\)", made)
    assert allocated and int(allocated[2]) >= 120, done.stdout[-500:]
    assert freed == f"free({allocated[1]})"


def test_default_allocator_example_shows_numpys_handler():
    done = run_example("default_allocator")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["default_allocator", "1"]


def test_null_allocator_example_raises_memory_error():
    done = run_example("null_allocator")
    assert done.returncode == 0, done.stderr


def test_page_aligned_allocator_example_makes_the_arrays():
    with page_aligned_allocator as entered:
        assert entered is page_aligned_allocator
        a = np.arange(10_000, dtype=np.float64)
        b = np.zeros(3000)
        a.resize(20_000, refcheck=False)
        assert numpy_name() == "memplug:page_aligned_allocator"
    assert page_aligned_allocator.handles(a) and page_aligned_allocator.handles(b)
    assert str(page_aligned_allocator) == "page_aligned_allocator"
    assert a[:10_000].sum() == sum(range(10_000)) and not b.any()
    assert numpy_name(a) == "memplug:page_aligned_allocator"
    assert numpy_name() == "default_allocator"


def test_an_allocator_instance_is_named_by_its_str():
    with aligned_allocator(mmap.PAGESIZE) as instance:
        a = np.ones(100)
    assert str(instance) == f"aligned_allocator({mmap.PAGESIZE})"
    assert numpy_name(a) == f"memplug:aligned_allocator-{mmap.PAGESIZE}"
    assert instance.handles(a) and not aligned_allocator(64).handles(a)
    assert numpy_allocator.get_handler(a) is instance.handler() is instance._handler_


def test_handles_and_get_handler_follow_views_to_the_owner():
    with debug_allocator:
        a = np.arange(15).reshape((3, 5))
    b = np.array([6, 7, 8])
    assert debug_allocator.handles(a) and debug_allocator.handles(a[1:, ::2])
    assert not debug_allocator.handles(b)
    assert numpy_allocator.get_handler(a.T) is debug_allocator.handler()
    assert numpy_allocator.get_handler(b) is numpy_allocator.default_handler
    foreign = np.frombuffer(b"abcd", dtype=np.uint8)
    assert numpy_allocator.get_handler(foreign) is None and not debug_allocator.handles(foreign)
    with pytest.raises(TypeError):
        debug_allocator.handles([1, 2])
    with pytest.raises(TypeError):
        numpy_allocator.get_handler(None)


def test_set_handler_returns_the_previous_handler():
    h = page_aligned_allocator.handler()
    assert numpy_allocator.get_handler() is numpy_allocator.default_handler
    assert numpy_allocator.set_handler(h) is numpy_allocator.default_handler
    try:
        assert numpy_allocator.get_handler() is h
        assert page_aligned_allocator.handles(np.ones(10))
    finally:
        assert numpy_allocator.set_handler(None) is h
    assert numpy_allocator.get_handler() is numpy_allocator.default_handler
    with pytest.raises(ValueError) as e:
        numpy_allocator.set_handler(5)
    assert e.value.code == "not-a-handler"


def test_nested_with_blocks_restore_the_handler_each_entered_over():
    with page_aligned_allocator:
        with default_allocator:
            assert numpy_allocator.get_handler() is numpy_allocator.default_handler
            with debug_allocator:
                assert numpy_allocator.get_handler() is debug_allocator.handler()
            assert numpy_allocator.get_handler() is numpy_allocator.default_handler
        assert numpy_allocator.get_handler() is page_aligned_allocator.handler()
    assert numpy_allocator.get_handler() is numpy_allocator.default_handler


def test_a_with_block_in_one_thread_leaves_the_others_alone():
    entered, leave = threading.Event(), threading.Event()
    seen = {}

    def other():
        with page_aligned_allocator:
            entered.set()
            leave.wait(10)
            seen["other"] = numpy_allocator.get_handler()
        seen["after"] = numpy_allocator.get_handler()

    t = threading.Thread(target=other)
    t.start()
    entered.wait(10)
    with default_allocator:
        with debug_allocator:
            leave.set()
            t.join(10)
            assert numpy_allocator.get_handler() is debug_allocator.handler()
    assert seen == {"other": page_aligned_allocator.handler(), "after": numpy_allocator.default_handler}


def test_functions_are_kept_alive_and_given_true_sizes_never_null():
    calls = []

    def make():
        class counted(metaclass=numpy_allocator.type):
            def _malloc_(size):
                p = libc_malloc(size)
                calls.append(("malloc", p, size))
                return p

            def _free_(ptr, size):
                calls.append(("free", ptr, size))
                libc_free(ptr)

        return counted

    cls = make()
    cls.handler()  # made now: what memplug may call to check the functions is not counted
    calls.clear()
    with cls:
        arrays = [np.empty(n) for n in (1, 7, 100, 5000)]
    name = numpy_name(arrays[0])
    del cls
    gc.collect()
    del arrays
    gc.collect()
    assert name == "memplug:counted"
    allocated = {p: size for kind, p, size in calls if kind == "malloc"}
    frees = [(p, size) for kind, p, size in calls if kind == "free"]
    assert len(frees) == 4 and all(p for p, _ in frees)
    assert all(allocated[p] == size for p, size in frees)



def test_functions_given_as_addresses_of_function_pointers():
    std = ctypes.CDLL(None)

    class by_address(metaclass=numpy_allocator.type):
        _calloc_ = ctypes.addressof(std.calloc)
        _free_ = ctypes.addressof(std.free)
        _malloc_ = ctypes.addressof(std.malloc)
        _realloc_ = ctypes.addressof(std.realloc)

    with by_address:
        a = np.arange(1000)
        z = np.zeros(1000)
        a.resize(100_000, refcheck=False)
    assert by_address.handles(a) and by_address.handles(z)
    assert a[:1000].sum() == sum(range(1000)) and not z.any()


def test_an_allocator_declared_not_thread_safe_is_called_one_call_at_a_time():
    inside = [0]
    most = [0]

    class single(metaclass=numpy_allocator.type):
        _thread_safe_ = False

        def _malloc_(size):
            inside[0] += 1
            most[0] = max(most[0], inside[0])
            p = libc_malloc(size)  # ctypes lets go of the GIL here
            inside[0] -= 1
            return p

        def _free_(ptr, size):
            libc_free(ptr)

    single.handler()
    most[0] = 0
    errors = []

    def work():
        try:
            with single:
                for n in range(300):
                    assert np.full(n + 300, 2.0).sum() == 2.0 * (n + 300)
        except BaseException as e:  # noqa: BLE001 (reported below)
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors and most[0] == 1


def test_c_functions_declared_not_thread_safe_are_locked_by_memplug():
    std = ctypes.CDLL(None)

    class locked(metaclass=numpy_allocator.type):
        _thread_safe_ = False
        _malloc_ = ctypes.addressof(std.malloc)
        _free_ = ctypes.addressof(std.free)

    with locked:
        a = np.ones(1000)
    assert locked.handles(a)
    info = {h["name"]: h for h in memplug.handlers()}["locked"]
    assert info["thread_safe"] is False


@pytest.mark.parametrize(
    "value, code", [("libc.malloc", "bad-function"), (0, "null-function"), (True, "bad-function")]
)
def test_unusable_functions_are_refused_with_a_type_error(value, code):
    cls = numpy_allocator.type("refused", (), {"_malloc_": value})
    with pytest.raises(TypeError) as e:
        cls.handler()
    assert isinstance(e.value, memplug.Error) and e.value.code == code
    assert numpy_allocator.get_handler() is numpy_allocator.default_handler


def test_an_address_holding_null_is_refused():
    null = ctypes.c_void_p(None)
    cls = numpy_allocator.type("holds_null", (), {"_free_": ctypes.addressof(null)})
    with pytest.raises(numpy_allocator.FunctionError) as e:
        cls.handler()
    assert e.value.code == "null-function"


def test_missing_functions_are_the_c_librarys():
    class only_malloc(metaclass=numpy_allocator.type):
        def _malloc_(size):
            return libc_malloc(size)

    with only_malloc:
        a = np.ones(64)
        b = np.zeros(64)
    assert only_malloc.handles(a) and only_malloc.handles(b) and not b.any()
    del a, b


def test_functions_that_cannot_allocate_are_refused_with_a_memory_error():
    from numpy_allocator_examples import null_allocator

    with pytest.raises(MemoryError) as e:
        with null_allocator:
            np.ndarray(())
    assert isinstance(e.value, numpy_allocator.RefusedError) and e.value.code == "conformance-failed"
    assert numpy_allocator.get_handler() is numpy_allocator.default_handler


def test_a_declared_alignment_is_kept_by_numpys_data():
    std = ctypes.CDLL(None)
    std.memalign.restype = ctypes.c_void_p
    std.memalign.argtypes = [ctypes.c_size_t, ctypes.c_size_t]

    class paged(metaclass=numpy_allocator.type):
        _alignment_ = mmap.PAGESIZE

        def _malloc_(size):
            return std.memalign(mmap.PAGESIZE, size)

        def _free_(ptr, size):
            libc_free(ptr)

    with paged:
        arrays = [np.ones(n) for n in (1, 100, 10_000)]
    assert all(paged.handles(a) and a.ctypes.data % mmap.PAGESIZE == 0 for a in arrays)
