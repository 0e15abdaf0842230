"""NumPy on many threads at once through memplug's allocators -- on a
free-threaded build truly in parallel (conftest checks that the GIL stays
off), on a default build taking turns on the GIL.

- A stress: 8 threads, each inside its own ``with alloc:`` of one of five
  allocators -- ``system``, ``arena`` (not thread-safe: the host locks it),
  one of C functions, one of Python callables and a hooked one --
  allocate, grow (NumPy's realloc) and free arrays, and hand some to other
  threads to free. The results are right, every array names its
  allocator, every block comes back to the bridge that made it (no
  foreign pointer anywhere), and the statistics are exact at the end: the
  callables' and the hook's own ledgers agree with the bridges' counts
  call for call.
- StringDType arrays made, sorted and changed from threads under a memplug
  handler, one of them shared by all.

Bounded by iterations, not time."""

from __future__ import annotations

import ctypes
import gc
import queue
import threading

import numpy as np
import pytest

import memplug
import memplug.numpy as mnp

from test_define import libc_functions

THREADS = 8
ROUNDS = 150


class Ledger:
    """Blocks live by address, kept by Python callables or a hook: every
    block freed must be one it saw made."""

    def __init__(self):
        self.lock = threading.Lock()
        self.live = {}
        self.calls = {"malloc": 0, "calloc": 0, "realloc": 0, "free": 0}
        self.errors = []

    def made(self, event, ptr, size, old=None):
        with self.lock:
            self.calls[event] += 1
            if old is not None and self.live.pop(old, None) is None:
                self.errors.append(f"realloc of {old:#x}, which was not live")
            self.live[ptr] = size

    def freed(self, ptr):
        with self.lock:
            self.calls["free"] += 1
            if self.live.pop(ptr, None) is None:
                self.errors.append(f"free of {ptr:#x}, which was not live")


class Callables:
    """Thread-safe Python callables over libc's allocator, with a ledger."""

    def __init__(self):
        _, self._malloc, self._calloc, self._realloc, self._free = libc_functions()
        self.ledger = Ledger()

    def malloc(self, size):
        p = self._malloc(max(size, 1))
        if p:
            self.ledger.made("malloc", p, size)
        return p

    def calloc(self, nelem, size):
        p = self._calloc(max(nelem, 1), max(size, 1))
        if p:
            self.ledger.made("calloc", p, nelem * size)
        return p

    def realloc(self, ptr, old, new):
        q = self._realloc(ptr, max(new, 1))
        if q:
            self.ledger.made("realloc", q, new, old=ptr)
        return q

    def free(self, ptr, size):
        self.ledger.freed(ptr)
        self._free(ptr)


def hook_into(ledger):
    def hook(event, ptr, size, old_ptr):
        if ptr == 0:
            return  # a failed call, or free(NULL)
        if event == "free":
            ledger.freed(ptr)
        else:
            ledger.made(event, ptr, size, old=old_ptr if event == "realloc" else None)

    return hook


def bridge_stats(alloc):
    return memplug.stats(alloc.handler.name)["bridge"]


COUNTED = ("allocations", "frees", "reallocs", "bytes_allocated", "bytes_freed", "live_blocks", "live_bytes",
           "foreign_pointers")


def work(alloc, seed, handoff, errors):
    """ROUNDS rounds of making, checking, growing and freeing arrays inside
    `with alloc:`; some arrays go to `handoff` for another thread to free,
    and the thread frees some of the others'."""
    try:
        with alloc:
            for i in range(ROUNDS):
                n = 1 + (seed * 7919 + i * 104729) % 6000
                a = np.arange(n, dtype=np.int64)
                z = np.zeros(n)
                o = np.ones((3, n))
                assert a.sum() == n * (n - 1) // 2 and z.sum() == 0.0 and o.sum() == 3.0 * n
                a.resize(2 * n, refcheck=False)  # NumPy's realloc through the handler
                assert a[:n].sum() == n * (n - 1) // 2 and not a[n:].any()
                b = np.concatenate([a, a])[::3] + seed
                assert b[0] == seed
                owner = mnp.get_allocator(o[1:, 2:])  # a view: its owner's allocator
                assert owner is alloc and mnp.get_allocator(a) is alloc and mnp.get_allocator(b) is alloc, owner
                if i % 5 == 0:
                    handoff.put(a)
                    try:
                        other = handoff.get_nowait()  # another thread's array, most likely
                        assert other.shape[0] % 2 == 0
                        del other
                    except queue.Empty:
                        pass
                del a, z, o, b
    except BaseException as e:  # noqa: BLE001 (reported to the main thread)
        errors.append(f"thread {seed}: {e!r}")


@pytest.fixture
def no_gc():
    """The hook does not report the calls made while it runs (a collection
    inside it freeing arrays would go unreported): collect now, and not
    during the stress."""
    gc.collect()
    gc.disable()
    yield
    gc.enable()


def test_eight_threads_allocate_grow_and_free_through_five_allocators(no_gc):
    _, malloc, calloc, realloc, free = libc_functions()
    callables = Callables()
    hook_ledger = Ledger()
    c_functions = mnp.create_allocator(malloc=malloc, calloc=calloc, realloc=realloc, free=free)
    python_callables = mnp.create_allocator(
        malloc=callables.malloc, calloc=callables.calloc, realloc=callables.realloc, free=callables.free
    )
    python_callables.set_cache(False)  # every NumPy call reaches the callables' ledger
    assert not callables.ledger.live, "the conformance pass gave back what it took"
    callables.ledger.calls = dict.fromkeys(callables.ledger.calls, 0)  # (it called them too)
    tracking = mnp.allocator("tracking")
    allocators = {
        "system": mnp.allocator("system"),
        "arena": mnp.allocator("arena"),
        "C functions": c_functions,
        "Python callables": python_callables,
        "hooked tracking": mnp.hooked(tracking, hook_into(hook_ledger)),
    }
    assert not memplug.handler("arena").info["thread_safe"], "arena is the not-thread-safe one, locked by the host"
    # The bridges whose counts are compared (the hooked one's are tracking's).
    bridges = {label: (tracking if label == "hooked tracking" else a) for label, a in allocators.items()}
    before = {label: bridge_stats(a) or {} for label, a in bridges.items()}
    arena_before = memplug.stats("arena")["plugin"]
    tracking_before = memplug.stats("tracking")["plugin"]

    order = list(allocators.values())
    handoff: queue.SimpleQueue = queue.SimpleQueue()
    errors: list = []
    threads = [threading.Thread(target=work, args=(order[k % len(order)], k + 1, handoff, errors))
               for k in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    while True:  # the arrays no thread took: freed here, under NumPy's default
        try:
            arr = handoff.get_nowait()
        except queue.Empty:
            break
        assert mnp.get_allocator() is not mnp.get_allocator(arr)
        del arr
    gc.collect()

    after = {label: bridge_stats(a) for label, a in bridges.items()}
    delta = {label: {k: after[label][k] - before[label].get(k, 0) for k in COUNTED} for label in bridges}
    for label, d in delta.items():
        assert d["allocations"] > 0, f"{label}: nothing allocated through it"
        assert d["live_blocks"] == 0 and d["live_bytes"] == 0, f"{label}: not every block came back: {d}"
        assert d["allocations"] == d["frees"] and d["bytes_allocated"] == d["bytes_freed"], f"{label}: {d}"
        assert d["foreign_pointers"] == 0, f"{label}: a block came back to a bridge that did not make it: {d}"

    # The callables saw exactly the bridge's calls (its cache is off).
    assert not callables.ledger.errors, callables.ledger.errors[:5]
    assert not callables.ledger.live, f"{len(callables.ledger.live)} blocks never freed through the callables"
    calls, d = callables.ledger.calls, delta["Python callables"]
    assert calls["malloc"] + calls["calloc"] == d["allocations"], (calls, d)
    assert calls["free"] == d["frees"] and calls["realloc"] == d["reallocs"], (calls, d)

    # The hook saw exactly the calls tracking's bridge counted.
    assert not hook_ledger.errors, hook_ledger.errors[:5]
    assert not hook_ledger.live, f"{len(hook_ledger.live)} blocks the hook saw made were never freed"
    calls, d = hook_ledger.calls, delta["hooked tracking"]
    assert calls["malloc"] + calls["calloc"] == d["allocations"], (calls, d)
    assert calls["free"] == d["frees"] and calls["realloc"] == d["reallocs"], (calls, d)

    # The plugins that count agree: nothing live, nothing freed wrongly.
    for name, was in (("arena", arena_before), ("tracking", tracking_before)):
        now = memplug.stats(name)["plugin"]
        assert now["live_bytes"] == was["live_bytes"] and now["live_count"] == was["live_count"], (name, now)
        assert now["bad_frees"] == was["bad_frees"] and now["size_mismatches"] == was["size_mismatches"], (name, now)


def test_stringdtype_arrays_made_sorted_and_changed_from_threads():
    StringDType = getattr(getattr(np, "dtypes", None), "StringDType", None)
    if StringDType is None or not hasattr(np, "strings"):
        pytest.skip(f"NumPy {np.__version__} has no StringDType (NumPy 2.0 and later)")
    alloc = mnp.allocator("tracking")
    live_before = bridge_stats(alloc) or {"live_blocks": 0}
    slots = 8 * 64
    with alloc:
        shared = np.array([f"slot {i}" for i in range(slots)], dtype=StringDType())
    errors: list = []
    start = threading.Barrier(THREADS)

    def strings(k):
        try:
            start.wait()
            with alloc:
                for i in range(ROUNDS // 3):
                    words = [f"{(k * 31 + j * 17 + i) % 97:03d}" + "x" * ((j * 7 + k) % 40) for j in range(64)]
                    arr = np.array(words, dtype=StringDType())
                    assert mnp.get_allocator(arr) is alloc
                    assert np.sort(arr).tolist() == sorted(words)
                    arr[::2] = np.strings.upper(arr[::2])  # changed in place, strings of new lengths
                    arr[1::2] = np.strings.add(arr[1::2], "-" + "y" * (i % 30))
                    assert arr[0] == words[0].upper() and arr[1] == words[1] + "-" + "y" * (i % 30)
                    mine = shared[k::THREADS]  # a view: this thread's slots of the shared array
                    mine[:] = np.strings.add(f"t{k} r{i} ", arr[: len(mine)])
                    assert np.strings.startswith(mine, f"t{k} r{i} ").all()
                    seen = shared.copy()  # others write their slots meanwhile
                    assert all(s.startswith(("slot ", "t")) for s in seen.tolist())
        except BaseException as e:  # noqa: BLE001
            errors.append(f"thread {k}: {e!r}")

    threads = [threading.Thread(target=strings, args=(k,)) for k in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    last = ROUNDS // 3 - 1
    for k in range(THREADS):
        assert all(s.startswith(f"t{k} r{last} ") for s in shared[k::THREADS].tolist())
    del shared
    gc.collect()
    assert bridge_stats(alloc)["live_blocks"] == live_before["live_blocks"]


def test_create_allocator_of_a_c_function_pointer_from_threads():
    """The allocator of integer addresses (C functions by address) used from
    threads at once, each with its own `with`."""
    lib = ctypes.CDLL("libc.so.6")
    addr = {r: ctypes.cast(getattr(lib, r), ctypes.c_void_p).value for r in ("malloc", "calloc", "realloc", "free")}
    alloc = mnp.create_allocator(**addr, thread_safe=False)  # the host takes turns
    errors: list = []
    threads = [threading.Thread(target=work, args=(alloc, k + 100, queue.SimpleQueue(), errors)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    gc.collect()
    s = bridge_stats(alloc)
    assert s["live_blocks"] == 0 and s["foreign_pointers"] == 0, s
