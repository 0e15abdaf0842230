"""memplug handlers serving NumPy's array data."""

from __future__ import annotations

import ctypes
import ctypes.util
import inspect
import io
import threading

import numpy as np
import pytest

import memplug
import memplug.numpy as mnp


def plugin(name):
    return memplug.stats(name)["plugin"]


def bridge(name):
    return memplug.stats(name)["bridge"]


def test_arrays_made_under_an_allocator_name_the_handler_and_return_every_byte():
    before = plugin("tracking")
    with mnp.allocator("tracking") as alloc:
        assert mnp.get_allocator().name == "memplug:tracking"
        assert alloc.handler == memplug.Handler("tracking")
        arrays = [np.ones(n) for n in (1, 10, 1000, 100_000)]
        assert all(mnp.get_allocator(a).name == "memplug:tracking" for a in arrays)
    during = plugin("tracking")
    assert during["live_count"] >= before["live_count"] + 4
    assert during["live_bytes"] >= before["live_bytes"] + 8 * (1 + 10 + 1000 + 100_000)
    del arrays
    after = plugin("tracking")
    assert (after["live_count"], after["live_bytes"]) == (before["live_count"], before["live_bytes"])
    assert after["bad_frees"] == 0 and after["size_mismatches"] == 0


def test_arrays_made_before_keep_numpys_default():
    a = np.ones(100)
    with mnp.allocator("tracking"):
        b = np.ones(100)
        assert mnp.get_allocator(a).name == "default_allocator"
    assert mnp.get_allocator(b).name == "memplug:tracking"
    assert mnp.get_allocator().name == "default_allocator"
    assert mnp.get_allocator().handler is None


def test_arrays_outliving_the_block_free_through_their_handler_on_any_thread():
    before = plugin("tracking")
    with mnp.allocator("tracking"):
        kept = np.arange(50_000.0)
        elsewhere = np.arange(70_000.0)
    with mnp.allocator("system"):
        kept += 1  # a new handler is current; the array still belongs to tracking
        del kept
    t = threading.Thread(target=lambda arr: arr.sum(), args=(elsewhere,))
    box = [elsewhere]
    del elsewhere
    t.start()
    t.join()

    def drop():
        box.pop()

    t2 = threading.Thread(target=drop)
    t2.start()
    t2.join()
    after = plugin("tracking")
    assert (after["live_count"], after["live_bytes"]) == (before["live_count"], before["live_bytes"])
    assert after["bad_frees"] == 0 and after["size_mismatches"] == 0


def test_aligned_gives_64_byte_aligned_data():
    with mnp.allocator("aligned"):
        arrays = [np.empty(n, dtype=np.uint8) for n in (1, 3, 64, 1000, 1 << 20)]
    for a in arrays:
        assert a.ctypes.data % 64 == 0, hex(a.ctypes.data)
    assert bridge("aligned")["header_bytes"] == 64
    with mnp.allocator("aligned:alignment=4096"):
        big = np.zeros(5000)
    assert big.ctypes.data % 4096 == 0
    assert mnp.get_allocator(big).name == "memplug:aligned:alignment=4096"


def test_arena_from_several_threads_with_numpy_releasing_the_gil():
    before = plugin("arena")
    errors = []

    def work(seed):
        try:
            rng = np.random.default_rng(seed)
            with mnp.allocator("arena"):
                for _ in range(30):
                    a = rng.random(20_000)      # ufunc loops release the GIL
                    b = np.sort(a * 2.0 + 1.0)
                    c = np.loadtxt(io.StringIO("\n".join(["1 2 3"] * 200)))  # parsing reallocs without the GIL
                    small = [np.arange(k) for k in range(1, 40)]
                    assert b[0] >= 1.0 and c.shape == (200, 3)
                    assert mnp.get_allocator(b).name == "memplug:arena"
                    del a, b, c, small
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    after = plugin("arena")
    assert after["bad_frees"] == 0 and after["size_mismatches"] == 0
    assert after["live_count"] == before["live_count"]
    assert after["total_allocations"] > before["total_allocations"] + 4 * 30 * 40


def test_realloc_through_numpy_keeps_contents():
    with mnp.allocator("tracking"):
        grown = np.fromiter((i * 0.5 for i in range(100_000)), dtype=float)  # unknown length: grows by realloc
        text = np.loadtxt(io.StringIO("\n".join(f"{i} {i + 1}" for i in range(5000))))
        parsed = np.fromstring(" ".join(str(i) for i in range(20_000)), sep=" ")
    assert mnp.get_allocator(grown).name == "memplug:tracking"
    np.testing.assert_array_equal(grown, np.arange(100_000) * 0.5)
    np.testing.assert_array_equal(text[:, 0], np.arange(5000))
    np.testing.assert_array_equal(parsed, np.arange(20_000))
    assert bridge("tracking")["reallocs"] > 0
    assert plugin("tracking")["size_mismatches"] == 0


def test_a_numpy_size_mismatch_is_counted_with_where_it_happened():
    before = bridge("tracking") or {"numpy_size_mismatches": 0}
    with mnp.allocator("tracking"):
        empty = np.fromstring("", sep=" ")  # NumPy allocates 8 bytes and frees with 1
        del empty  # MISMATCH-LINE
    after = bridge("tracking")
    assert after["numpy_size_mismatches"] == before["numpy_size_mismatches"] + 1
    site = next(s for s in after["numpy_size_mismatch_sites"] if s["file"] == __file__)
    source = open(__file__).read().splitlines()
    assert "MISMATCH-LINE" in source[site["line"] - 1]
    assert site["function"] == "test_a_numpy_size_mismatch_is_counted_with_where_it_happened"
    assert (site["allocated"], site["passed"]) == (8, 1)
    # The plugin itself got the right size.
    assert plugin("tracking")["size_mismatches"] == 0


def test_free_null_is_filtered_and_counted():
    before = bridge("tracking")["null_frees"] if bridge("tracking") else 0
    with mnp.allocator("tracking"):
        np.argsort(np.arange(100)[::-1])  # frees an index buffer it never allocated
    assert bridge("tracking")["null_frees"] > before
    assert plugin("tracking")["bad_frees"] == 0


def test_mimalloc_by_symbol_name_serves_arrays(repo):
    if ctypes.util.find_library("mimalloc") is None:
        pytest.skip("libmimalloc is not installed (Debian: libmimalloc2.0)")
    memplug.load(repo / "examples" / "manifests" / "mimalloc.memplug.toml")
    with mnp.allocator("mimalloc"):
        a = np.arange(1_000_000, dtype=np.float64)
        b = np.sqrt(a) + 1
    assert mnp.get_allocator(b).name == "memplug:mimalloc"
    assert b[4] == 3.0
    s = bridge("mimalloc")
    del a, b
    assert bridge("mimalloc")["live_blocks"] == s["live_blocks"] - 2


def test_bridge_counters_balance():
    with mnp.allocator("system"):
        arrays = [np.zeros(n) for n in range(1, 200)]
        s = bridge("system")
        assert s["live_blocks"] >= 199
        del arrays
    t = bridge("system")
    assert t["frees"] >= s["frees"] + 199
    assert t["peak_bytes"] >= t["live_bytes"]
    assert t["bytes_allocated"] - t["bytes_freed"] == t["live_bytes"]


def test_the_capsule_is_made_once():
    assert mnp.allocator("tracking").capsule is mnp.allocator("tracking").capsule
    assert mnp.allocator("arena:region_size=1m").capsule is mnp.allocator("arena:region_size=1m").capsule


def test_set_allocator_returns_the_previous_allocator():
    previous = mnp.set_allocator("tracking")
    try:
        assert mnp.get_allocator().name == "memplug:tracking"
        assert mnp.set_allocator("system").handler == memplug.Handler("tracking")
    finally:
        mnp.set_allocator(previous)
    assert mnp.get_allocator().name == "default_allocator"
    with pytest.raises(memplug.NumpyError) as info:
        mnp.set_allocator(object())
    assert info.value.code == "not-a-handler"


def test_the_peak_counts_arrays_of_several_threads_alive_at_once():
    # A makes and frees an array, B makes one, A makes one again: both
    # arrays were alive at once, though A never passed its own high.
    key = "arena:region_size=8m"
    mb = 1 << 20
    kept = []
    b_made, a_again = threading.Event(), threading.Event()

    def a():
        with mnp.allocator(key):
            x = np.empty(mb, np.uint8)
            del x
            a_again.wait()
            kept.append(np.empty(mb, np.uint8))

    def b():
        with mnp.allocator(key):
            kept.append(np.empty(mb, np.uint8))
        b_made.set()

    ta, tb = threading.Thread(target=a), threading.Thread(target=b)
    ta.start()
    tb.start()
    b_made.wait()
    a_again.set()
    ta.join()
    tb.join()
    before = bridge(key)["live_bytes"]
    kept.clear()
    after = bridge(key)
    assert after["live_bytes"] == before - 2 * mb
    assert after["peak_bytes"] >= 2 * mb, after


def _made_and_freed_in_a_frame_called_from_c(_):
    y = np.fromstring("", sep=" ")  # NumPy allocates 8 bytes and frees 1: a size mismatch, recorded
    return y.size  # y is freed while this frame is torn down, right after the C caller's entry


def test_a_size_mismatch_while_a_frame_called_from_c_is_torn_down_is_recorded_at_its_caller():
    """The bridge records where a mismatch happened from the innermost
    complete Python frame: freed during the teardown of a frame that C code
    called (map here, pytest's call of a test function), Python 3.13's
    `sys._getframe(0)` would give the C caller's entry frame, which crashed
    the interpreter or gave no site."""
    alloc = mnp.allocator("tracking")
    before = {(s["file"], s["line"]): s["count"] for s in memplug.stats("tracking")["bridge"]["numpy_size_mismatch_sites"]}
    with alloc:
        sizes = list(map(_made_and_freed_in_a_frame_called_from_c, range(3)))  # the line recorded
    line = inspect.currentframe().f_lineno - 1
    assert sizes == [0, 0, 0]
    sites = memplug.stats("tracking")["bridge"]["numpy_size_mismatch_sites"]
    here = [s for s in sites if s["file"] == __file__ and s["line"] == line]
    assert here and here[0]["count"] - before.get((__file__, line), 0) == 3, sites
    assert here[0]["function"] == "test_a_size_mismatch_while_a_frame_called_from_c_is_torn_down_is_recorded_at_its_caller"
