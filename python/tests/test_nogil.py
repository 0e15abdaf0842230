"""Handlers called without the GIL, as NumPy does in its sections that
release it: the C functions of a handler capsule are called through ctypes,
which releases the GIL for the call, from several threads at once. Python
callables (from_functions) and hooks must take the GIL themselves."""

from __future__ import annotations

import ctypes
import threading

import memplug
import memplug.numpy as mnp

from test_define import Counting

VOIDP = ctypes.c_void_p
SIZE = ctypes.c_size_t
MALLOC = ctypes.CFUNCTYPE(VOIDP, VOIDP, SIZE)
CALLOC = ctypes.CFUNCTYPE(VOIDP, VOIDP, SIZE, SIZE)
REALLOC = ctypes.CFUNCTYPE(VOIDP, VOIDP, VOIDP, SIZE)
FREE = ctypes.CFUNCTYPE(None, VOIDP, VOIDP, SIZE)


class Allocator(ctypes.Structure):
    """NumPy's PyDataMemAllocator."""

    _fields_ = [("ctx", VOIDP), ("malloc", MALLOC), ("calloc", CALLOC), ("realloc", REALLOC), ("free", FREE)]


class Handler(ctypes.Structure):
    """NumPy's PyDataMem_Handler (NEP 49)."""

    _fields_ = [("name", ctypes.c_char * 127), ("version", ctypes.c_uint8), ("allocator", Allocator)]


def c_functions(capsule):
    """The allocator struct inside a `mem_handler` capsule."""
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype = VOIDP
    get.argtypes = [ctypes.py_object, ctypes.c_char_p]
    return Handler.from_address(get(capsule, b"mem_handler")).allocator


def hammer(allocator, threads=4, rounds=300):
    """Allocate, grow and free from `threads` threads at once, each call
    made without the GIL; the errors seen."""
    errors = []
    start = threading.Barrier(threads)

    def work(seed):
        try:
            start.wait()
            for i in range(rounds):
                n = 8 + (seed * 131 + i * 17) % 4000
                p = allocator.malloc(allocator.ctx, n)
                assert p, "malloc gave NULL"
                ctypes.memset(p, seed, n)
                q = allocator.realloc(allocator.ctx, p, 2 * n)
                assert q, "realloc gave NULL"
                assert ctypes.string_at(q, n) == bytes([seed]) * n, "realloc lost the contents"
                allocator.free(allocator.ctx, q, 2 * n)
                z = allocator.calloc(allocator.ctx, n, 1)
                assert ctypes.string_at(z, n) == bytes(n), "calloc not zeroed"
                allocator.free(allocator.ctx, z, n)
        except Exception as e:  # noqa: BLE001 (reported to the main thread)
            errors.append(repr(e))

    ts = [threading.Thread(target=work, args=(k + 1,)) for k in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return errors


def test_python_callables_are_called_with_the_gil_taken_from_threads_without_it():
    counting = Counting()
    h = memplug.from_functions(
        "nogil-callables",
        malloc=counting.malloc,
        calloc=counting.calloc,
        realloc=counting.realloc,
        free=counting.free,
    )
    mnp.allocator(h.name).set_cache(False)  # every free reaches the callables
    calls = counting.calls
    assert hammer(c_functions(mnp.allocator(h).capsule)) == []
    assert counting.calls > calls
    assert counting.live == 0
    bridge = memplug.stats(h.name)["bridge"]
    assert bridge["live_blocks"] == 0 and bridge["live_bytes"] == 0, bridge


def test_a_hook_is_called_with_the_gil_taken_from_threads_without_it():
    seen = []
    hooked = mnp.hooked(mnp.allocator("system"), lambda event, ptr, size, old: seen.append((event, ptr)))
    assert hammer(c_functions(hooked.capsule), rounds=100) == []
    events = {e for e, _ in seen}
    assert events == {"malloc", "calloc", "realloc", "free"}, events
    made = sum(1 for e, _ in seen if e in ("malloc", "calloc"))
    freed = sum(1 for e, _ in seen if e == "free")
    assert made == freed == 4 * 100 * 2
