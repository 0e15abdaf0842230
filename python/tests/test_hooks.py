"""Hooked allocators: every call NumPy makes reaches the callback, with the
GIL, on the thread that made it; blocks pair up; a failing callback changes
nothing but a report."""

from __future__ import annotations

import gc
import subprocess
import sys
import threading

import numpy as np
import pytest

import memplug
import memplug.numpy as mnp

from conftest import FREE_THREADED


class Recorder:
    """A callback keeping every event, and the blocks still live."""

    def __init__(self):
        self.events = []
        self.live = {}
        self.threads = set()

    def __call__(self, event, ptr, size, old_ptr):
        self.events.append((event, ptr, size, old_ptr))
        self.threads.add(threading.get_ident())
        if event in ("malloc", "calloc"):
            assert ptr not in self.live
            self.live[ptr] = size
        elif event == "realloc":
            self.live.pop(old_ptr)
            self.live[ptr] = size
        elif ptr:
            assert self.live.pop(ptr) is not None, f"free of {ptr:#x}, never allocated"

    def kinds(self):
        return [e[0] for e in self.events]


@pytest.mark.parametrize("inner", ["tracking", "system", None], ids=["tracking", "system", "numpy-default"])
def test_growth_by_realloc_is_seen_call_by_call_and_every_block_is_freed(inner):
    rec = Recorder()
    hooked = mnp.hooked(inner, rec)
    text = " ".join(str(i) for i in range(20_000))
    with hooked:
        parsed = np.fromstring(text, sep=" ")
        grown = np.fromiter((i for i in range(20_000)), dtype=np.int64)
    kinds = rec.kinds()
    assert kinds.count("realloc") >= 2 and kinds.count("malloc") >= 2
    reallocs = [e for e in rec.events if e[0] == "realloc"]
    assert all(old is not None for _, _, _, old in reallocs)
    assert {parsed.ctypes.data, grown.ctypes.data} <= set(rec.live)
    assert (parsed == np.arange(20_000.0)).all() and (grown == np.arange(20_000)).all()
    assert mnp.get_allocator(parsed[::3]) is hooked
    del parsed, grown
    assert rec.live == {}
    assert rec.kinds()[-1] == "free"


def test_a_sorts_temporary_buffer_is_allocated_and_freed_through_the_hook():
    m = np.arange(10_000.0)[::-1].reshape(100, 100).copy()
    rec = Recorder()
    with mnp.hooked("tracking", rec):
        s = np.sort(m, axis=0)  # sorts strided columns through a buffer
    assert rec.kinds() == ["malloc", "malloc", "free"]
    (_, out, out_size, _), (_, tmp, tmp_size, _), (_, freed, _, _) = rec.events
    assert (out, out_size) == (s.ctypes.data, s.nbytes) and freed == tmp and tmp_size == 100 * 8
    assert rec.live == {s.ctypes.data: s.nbytes}
    assert (s == np.sort(m, axis=0)).all()
    del s
    assert rec.live == {}


def test_calloc_and_frees_on_another_thread_are_reported_there():
    rec = Recorder()
    with mnp.hooked("tracking", rec):
        z = np.zeros(1 << 16)
    assert rec.kinds() == ["calloc"] and rec.events[0][2] == z.nbytes
    box = [z]
    del z
    t = threading.Thread(target=box.clear)
    t.start()
    t.join()
    if FREE_THREADED:
        # Biased reference counting: the array's last reference, dropped on
        # a thread that does not own it, goes back to its owner (this
        # thread), which frees it (at once here, or at the collection).
        gc.collect()
        assert rec.kinds() == ["calloc", "free"] and rec.live == {}
        assert rec.threads == {threading.get_ident()}
    else:
        assert rec.kinds() == ["calloc", "free"] and rec.live == {}
        assert t.ident in rec.threads


def test_a_raising_callback_is_reported_and_changes_nothing(monkeypatch):
    reports = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: reports.append(u.exc_type))
    calls = []

    def failing(event, ptr, size, old_ptr):
        calls.append(event)
        raise RuntimeError("the hook fails")

    with mnp.hooked("tracking", failing):
        a = np.arange(1000.0)
        b = np.fromstring(" ".join(["1"] * 5000), sep=" ")
    assert a.sum() == 499500.0 and b.sum() == 5000.0
    del a, b
    assert calls and len(reports) == len(calls) and set(reports) == {RuntimeError}


def test_a_pending_exception_survives_the_callback():
    seen = []
    hooked = mnp.hooked(None, lambda *e: seen.append(e[0]))
    with hooked:
        keep = np.empty(100)
    with pytest.raises(KeyError):
        try:
            raise KeyError("pending")
        finally:
            del keep  # freed (and reported) while KeyError propagates
    assert seen == ["malloc", "free"]


def test_arrays_the_callback_makes_are_served_but_not_reported():
    rec = Recorder()

    def makes_arrays(*event):
        np.ones(10)  # allocates through the hooked handler, from the callback
        rec(*event)

    with mnp.hooked("tracking", makes_arrays):
        a = np.empty(100)
    del a
    assert rec.kinds() == ["malloc", "free"]


def test_counting_by_call_site():
    counts = {}

    def by_site(event, ptr, size, old_ptr):
        frame = sys._getframe(1)
        while frame.f_code.co_filename.startswith(np.__path__[0]):
            frame = frame.f_back
        site = (frame.f_code.co_filename, frame.f_lineno)
        counts[site] = counts.get(site, 0) + 1

    with mnp.hooked("system", by_site):
        made = sys._getframe().f_lineno + 1
        a = np.empty(1000)
    freed = sys._getframe().f_lineno + 1
    del a
    assert counts == {(__file__, made): 1, (__file__, freed): 1}


def test_hooked_refuses_what_is_not_callable_or_not_a_handler():
    with pytest.raises(TypeError):
        mnp.hooked("tracking", 3)
    with pytest.raises(memplug.NumpyError):
        mnp.hooked(object(), print)


def test_arrays_outliving_the_interpreter_free_quietly():
    script = """
import threading, numpy as np, memplug.numpy as mnp
seen = []
hooked = mnp.hooked("tracking", lambda *e: seen.append(e[0]))
with hooked:
    kept = [np.ones(1000) for _ in range(10)]   # freed during finalization: not reported
def worker():
    with hooked:
        kept.append(np.ones(10))
t = threading.Thread(target=worker)
t.start(); t.join()
print(len(seen) >= 11)
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stdout.strip(), done.stderr) == (0, "True", "")


def test_an_allocator_over_c_functions_is_hookable():
    import ctypes

    libc = ctypes.CDLL(None)
    rec = Recorder()
    with mnp.hooked(mnp.allocator(memplug.from_functions(malloc=libc.malloc, free=libc.free)), rec):
        a = np.empty(1000)
    del a
    assert rec.kinds() == ["malloc", "free"] and rec.live == {}


def test_threads_allocating_at_once_are_each_reported():
    rec = Recorder()
    hooked = mnp.hooked("tracking", rec)
    start = threading.Barrier(4)

    def work():
        start.wait()
        with hooked:
            for n in range(200):
                a = np.empty(n + 1)
                np.sort(a[::2])  # a temporary buffer too, sorting released from the GIL
                del a

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    kinds = rec.kinds()
    assert kinds.count("malloc") == kinds.count("free") >= 4 * 200 and rec.live == {}
    assert {t.ident for t in threads} <= rec.threads
