"""The bridge's cache of freed blocks, small ones and two spares (only for
handlers no plugin statistics can tell about), and the 64-byte alignment of
shareable handlers' arrays."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import memplug
import memplug.numpy as mnp


def bridge(name):
    return memplug.stats(name)["bridge"]


@pytest.fixture
def system_cache():
    """The `system` bridge with its cache on, emptied before and after."""
    mnp.allocator("system")
    mnp.allocator("system").set_cache(False)
    mnp.allocator("system").set_cache(True)
    yield
    mnp.allocator("system").set_cache(False)
    mnp.allocator("system").set_cache(True)


def test_small_blocks_are_reused_and_still_counted(system_cache):
    before = bridge("system")
    with mnp.allocator("system"):
        for _ in range(1000):
            np.empty(8)  # one block, taken from the cache and put back each time
        looped = bridge("system")
        kept = [np.empty(n) for n in (1, 5, 8, 30)]  # 8, 40, 64 and 240 bytes
    after = bridge("system")
    assert looped["cache"] == "on" and looped["cache_refusal"] is None
    assert looped["cached_blocks"] == before["cached_blocks"] + 1
    assert after["allocations"] - before["allocations"] == 1004, "every NumPy allocation is counted"
    assert after["frees"] - before["frees"] == 1000, "every NumPy free is counted"
    assert after["live_blocks"] - before["live_blocks"] == 4
    assert after["cached_blocks"] == looped["cached_blocks"] - 1, "the 64-byte array took the cached block"
    del kept
    assert bridge("system")["cached_blocks"] == after["cached_blocks"] + 4


def test_each_size_class_keeps_a_bounded_number_of_blocks(system_cache):
    depth = memplug._native.CACHE_DEPTH
    with mnp.allocator("system"):
        arrays = [np.empty(8) for _ in range(3 * depth)]
        del arrays  # 24 blocks of the 64-byte class freed at once
        large = [np.empty(200) for _ in range(3)]  # 1600 bytes: in no class
        del large
    s = bridge("system")
    assert s["cached_blocks"] == depth + 2, "one class, at most DEPTH blocks, and two spares"
    assert s["cached_bytes"] == depth * 64 + 2 * 1600


def test_two_larger_blocks_per_thread_are_kept_for_requests_of_their_exact_sizes(system_cache):
    mib = 1 << 20
    before = bridge("system")
    with mnp.allocator("system"):
        a = np.empty(mib, dtype=np.uint8)
        first = a.ctypes.data
        del a
        kept = bridge("system")
        assert (kept["cached_blocks"], kept["cached_bytes"]) == (before["cached_blocks"] + 1, before["cached_bytes"] + mib)
        b = np.empty(mib // 8, dtype=np.int64)  # the same size: the same block
        c = np.empty(mib + 16, dtype=np.uint8)  # another size: from the plugin
        assert (b.ctypes.data, c.ctypes.data != first) == (first, True)
        assert bridge("system")["cached_blocks"] == before["cached_blocks"]
        b[:] = 7  # NumPy's now, whole (read back without an array)
        view = memoryview(b)
        assert (view[0], view[len(view) // 2], view[-1]) == (7, 7, 7)
        view.release()
        mid = bridge("system")
        del b
        del c  # both kept
        s = bridge("system")
        assert (s["cached_blocks"], s["cached_bytes"]) == (mid["cached_blocks"] + 2, mid["cached_bytes"] + 2 * mib + 16)
        e = np.empty(mib + 16, dtype=np.uint8)  # both from the spares
        f = np.empty(mib, dtype=np.uint8)
        assert f.ctypes.data == first
        assert bridge("system")["cached_blocks"] == mid["cached_blocks"]
        del e
        del f
        d = np.empty(mib + 32, dtype=np.uint8)
        del d  # both places taken: a third size goes back to the plugin
        s = bridge("system")
        assert (s["cached_blocks"], s["cached_bytes"]) == (mid["cached_blocks"] + 2, mid["cached_bytes"] + 2 * mib + 16)
        for _ in range(memplug._native.CACHE_SPARE_PATIENCE - 2):
            np.empty(mib + 32, dtype=np.uint8)
        assert bridge("system")["cached_bytes"] == s["cached_bytes"], "the spares are kept a while unused"
        np.empty(mib + 32, dtype=np.uint8)  # then they are stale: it replaces the older (1 MiB + 16, freed first)
        s = bridge("system")
        assert (s["cached_blocks"], s["cached_bytes"]) == (mid["cached_blocks"] + 2, mid["cached_bytes"] + 2 * mib + 32)
        huge = np.empty(memplug._native.CACHE_SPARE_MAX_BYTES + 1, dtype=np.uint8)
        del huge  # above the bound: never kept
        assert bridge("system")["cached_bytes"] == s["cached_bytes"]
    after = bridge("system")
    assert after["allocations"] - before["allocations"] >= 70, "every NumPy allocation is counted"
    assert after["frees"] - before["frees"] == after["allocations"] - before["allocations"]
    assert after["live_blocks"] == before["live_blocks"]
    assert after["foreign_pointers"] == 0
    mnp.allocator("system").set_cache(False)
    assert bridge("system")["cached_blocks"] == 0, "off: the spares go back too"


def test_turning_the_cache_off_gives_the_blocks_back(system_cache):
    with mnp.allocator("system"):
        arrays = [np.ones(k) for k in range(1, 20)]
        del arrays
    assert bridge("system")["cached_blocks"] > 0
    assert mnp.allocator("system").set_cache(False) is True
    s = bridge("system")
    assert (s["cache"], s["cached_blocks"]) == ("off", 0)
    with mnp.allocator("system"):
        a = np.arange(5.0)
        del a
    assert bridge("system")["cached_blocks"] == 0, "off: nothing is kept"
    assert mnp.allocator("system").set_cache(True) is False


def test_blocks_cached_by_an_ended_thread_are_given_back(system_cache):
    def work():
        with mnp.allocator("system"):
            arrays = [np.zeros(4) for _ in range(6)]
            del arrays
            spare = np.empty(100_000, dtype=np.uint8)
            del spare

    t = threading.Thread(target=work)
    t.start()
    t.join()
    assert bridge("system")["cached_blocks"] >= 7, "the thread's cache outlives it, bounded"
    # Python's join returns a moment before the thread gives its line up.
    for _ in range(200):
        mnp.allocator("system").set_cache(False)
        if bridge("system")["cached_blocks"] == 0:
            break
        time.sleep(0.01)
    assert bridge("system")["cached_blocks"] == 0


def test_reused_blocks_hold_what_numpy_writes(system_cache):
    rng = np.random.default_rng(7)
    with mnp.allocator("system"):
        for _ in range(200):
            n = int(rng.integers(0, 40))
            a = np.arange(n, dtype=np.float64)
            z = np.zeros(n)  # zeroed, even from the cache
            assert (z == 0).all() and (a == np.arange(n)).all()
            grown = np.fromiter((i for i in range(n)), dtype=np.int64)  # grows by realloc
            assert (grown == np.arange(n)).all()
    assert bridge("system")["foreign_pointers"] == 0


def test_handlers_a_plugin_could_tell_about_are_never_cached():
    for name, why in [("tracking", "statistics"), ("arena", "not thread-safe"), ("shm", "statistics")]:
        mnp.allocator(name)
        s = bridge(name)
        assert s["cache"] == "never" and why in s["cache_refusal"], (name, s["cache_refusal"])
        with pytest.raises(memplug.NumpyError) as info:
            mnp.allocator(name).set_cache(True)
        assert info.value.code == "not-cacheable"
    before = memplug.stats("tracking")["plugin"]
    with mnp.allocator("tracking"):
        for _ in range(100):
            np.empty(8)
            np.empty(1 << 20, dtype=np.uint8)
    after = memplug.stats("tracking")["plugin"]
    assert after["live_count"] == before["live_count"], "tracking sees every free"


def test_the_cache_can_be_kept_off_from_the_start():
    code = (
        "import numpy as np, memplug, memplug.numpy as mnp\n"
        "with mnp.allocator('system'):\n"
        "    [np.empty(8) for _ in range(10)]\n"
        "s = memplug.stats('system')['bridge']\n"
        "print(s['cache'], s['cached_blocks'], s['cache_refusal'])\n"
    )
    env = dict(os.environ, MEMPLUG_NUMPY_CACHE="0")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("never 0 MEMPLUG_NUMPY_CACHE=0"), out.stdout


def test_shareable_handlers_arrays_are_64_byte_aligned():
    key = "shm:size=8m"
    with mnp.allocator(key):
        arrays = [np.empty(n, dtype=np.uint8) for n in (1, 3, 17, 64, 1000, 100_000)]
        grown = np.fromiter((i * 0.5 for i in range(50_000)), dtype=float)  # moved by realloc
    for a in arrays + [grown]:
        assert a.ctypes.data % 64 == 0, hex(a.ctypes.data)
    np.testing.assert_array_equal(grown, np.arange(50_000) * 0.5)
    s = bridge(key)
    assert (s["data_alignment"], s["cache"]) == (64, "never")
    del arrays, grown, a
    gc.collect()
    assert memplug.stats(key)["plugin"]["live_count"] == 0
    assert bridge(key)["live_blocks"] == 0


def test_the_peak_follows_small_arrays_through_the_cache():
    """Cached blocks count as live for the headroom (the cache's paths check
    nothing): the peak may then be short by the check step and what the
    small-block lists hold, never more, and never above the true peak."""
    import ctypes

    lib = ctypes.CDLL("libc.so.6")
    lib.malloc.restype, lib.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
    lib.free.restype, lib.free.argtypes = None, [ctypes.c_void_p]
    h = memplug.from_functions("peak-through-the-cache", malloc=lib.malloc, free=lib.free)
    bound = memplug.PEAK_CHECK_BYTES + memplug._native.CACHE_LISTS_MAX_BYTES
    highs = []
    with mnp.allocator(h):
        for k in range(1, 5):
            # Every class, more arrays each round: the first of each come
            # from the cache the last round filled.
            arrays = [np.empty(n) for n in range(1, 129) for _ in range(4 * k)]
            highs.append(bridge(h.name)["live_bytes"])
            peak = bridge(h.name)["peak_bytes"]
            assert highs[-1] - bound <= peak <= highs[-1], (k, highs[-1], peak)
            del arrays
    s = bridge(h.name)
    assert s["cache"] == "on" and s["cached_blocks"] > 0
    assert max(highs) - bound <= s["peak_bytes"] <= max(highs)
