"""NumPy arrays handed to other processes: memplug.numpy.share / attach over
the `shm` plugin, with real processes (multiprocessing, spawn context)."""

from __future__ import annotations

import gc
import itertools
import multiprocessing as mp
import os
import pickle
import stat
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import memplug
import memplug.numpy as mnp
import share_workers

SPAWN = mp.get_context("spawn")
PREFIX = f"pytest-{os.getpid()}-"
_names = itertools.count()


def shm_file(name: str) -> Path:
    return Path("/dev/shm") / f"memplug-{name}"


def left_behind() -> list[str]:
    return sorted(p.name for p in Path("/dev/shm").glob(f"memplug-{PREFIX}*"))


@pytest.fixture(scope="module", autouse=True)
def no_segment_is_left_behind():
    yield
    gc.collect()
    assert left_behind() == [], "every test closes its segments"


class Segment:
    """A named segment for one test, made through NumPy's handler."""

    def __init__(self, tag: str, size: str = "16m") -> None:
        self.name = f"{PREFIX}{tag}-{next(_names)}"
        self.key = f"shm:name={self.name},size={size},create=1,unlink=1"
        self.file = shm_file(self.name)
        self._allocator: mnp.Allocator | None = None

    @property
    def allocator(self) -> mnp.Allocator:
        """The segment's allocator, made (and the segment with it) the
        first time it is asked for."""
        if self._allocator is None:
            self._allocator = mnp.allocator(self.key)
        return self._allocator

    def close(self) -> bool:
        """Close the segment's allocator, if it was made."""
        return False if self._allocator is None else self._allocator.close()

    def array(self, shape, dtype=np.float64, order="C") -> np.ndarray:
        with self.allocator:
            return np.zeros(shape, dtype=dtype, order=order)


@pytest.fixture
def segment(request):
    """Make segments; at the end, free what the test left and close them:
    each must be gone from /dev/shm."""
    made: list[Segment] = []

    def make(size: str = "16m") -> Segment:
        s = Segment(request.node.name[:40].replace("[", "-").replace("]", ""), size)
        made.append(s)
        return s

    yield make
    gc.collect()
    for s in made:
        s.close()
        assert not s.file.exists(), f"{s.file} removed when its instance closed"


def mappings_of(path: Path) -> int:
    """How many mappings of `path` this process has."""
    with open("/proc/self/maps") as maps:
        return sum(1 for line in maps if line.rstrip().endswith(str(path)))


def test_an_array_changed_in_another_process_is_seen_here(segment):
    for what, key in [("named", segment().allocator), ("own", "shm")]:
        with mnp.allocator(key):
            a = np.arange(12 * 1024, dtype=np.int64).reshape(96, 128)
        parent, child = SPAWN.Pipe()
        p = SPAWN.Process(target=share_workers.modify, args=(child,))
        p.start()
        parent.send(mnp.share(a))
        said, ok, pid = parent.recv()
        p.join(60)
        assert p.exitcode == 0, what
        assert (said, ok, pid) == ("modified", True, p.pid), what
        np.testing.assert_array_equal(a, np.arange(12 * 1024).reshape(96, 128) + 1000, err_msg=what)
        del a


def test_a_handle_travels_on_through_several_processes(segment):
    a = segment().array(10_000, dtype=np.int32)
    first, second, results = SPAWN.Queue(), SPAWN.Queue(), SPAWN.Queue()
    relay = SPAWN.Process(target=share_workers.relay, args=(first, second))
    finish = SPAWN.Process(target=share_workers.finish, args=(second, results))
    relay.start()
    finish.start()
    first.put(mnp.share(a[2000:]))  # a view: the workers see just these 8000 elements
    said, pid, size = results.get(timeout=60)
    relay.join(60)
    finish.join(60)
    assert (relay.exitcode, finish.exitcode) == (0, 0)
    assert (said, pid, size) == ("finished", finish.pid, 4000)
    assert (a[:2000] == 0).all(), "outside the shared view: untouched"
    assert (a[2000:6000] == -1).all(), "the first worker's half"
    assert (a[6000:] == -2).all(), "the second worker's half, shared on from an attached view"


def test_pool_workers_scale_slices_in_place(segment):
    a = segment(size="64m").array(4_000_000)
    a[:] = 1.0
    bounds = np.linspace(0, a.size, 9).astype(int)
    handles = [mnp.share(a[lo:hi]) for lo, hi in zip(bounds[:-1], bounds[1:])]
    with SPAWN.Pool(2) as pool:
        sums = pool.starmap(share_workers.scale, [(h, float(i + 2)) for i, h in enumerate(handles)])
    for i, (lo, hi) in enumerate(zip(bounds[:-1], bounds[1:])):
        assert sums[i] == (hi - lo) * (i + 2)
        assert (a[lo:hi] == i + 2).all()


def test_the_pool_example_fills_the_array_and_removes_its_segment(repo):
    out = subprocess.run(
        [sys.executable, str(repo / "python" / "examples" / "pool_fill.py"), "--mib", "16", "--workers", "2",
         "--chunks", "6"],
        capture_output=True, text=True, timeout=300,
    )
    assert out.returncode == 0, out.stderr
    assert "6 chunks of a 16 MiB array filled in place by" in out.stdout
    assert "every element checked" in out.stdout
    name = out.stdout.split("segment /memplug-")[1].split()[0]
    assert "removed" in out.stdout and not shm_file(name).exists()


def test_a_handle_is_small_plain_data(segment):
    a = segment(size="64m").array(5_000_000)
    h = mnp.share(a)
    assert len(pickle.dumps(h)) < 1024, "a handle, not the data"
    assert pickle.loads(pickle.dumps(h)) == h
    assert (h.handler, h.length, h.shape, h.dtype) == ("shm", a.nbytes, a.shape, a.dtype)
    assert h.attach.endswith(",create=0") and h.segment.startswith("/memplug-")
    assert h.plugin and Path(h.plugin).name == "libmemplug_shm.so"
    with pytest.raises(AttributeError):
        h.offset = 0


VIEWS = {
    "whole": lambda a: a,
    "reversed": lambda a: a[::-1],
    "strided": lambda a: a[1::3, ::2],
    "transposed": lambda a: a.T,
    "column": lambda a: a[:, 5],
    "negative": lambda a: a[::-2, ::-1],
    "empty": lambda a: a[3:3],
    "element": lambda a: a[7, 9:10],
}


@pytest.mark.parametrize("view", VIEWS)
def test_views_share_exactly_their_elements(segment, view):
    a = segment().array((40, 30))
    a[...] = np.arange(a.size).reshape(a.shape)
    v = VIEWS[view](a)
    h = mnp.share(v)
    assert h.length <= a.nbytes
    b = mnp.attach(h)  # a second mapping of the segment, in this process
    assert (b.shape, b.strides, b.dtype) == (v.shape, v.strides, v.dtype)
    np.testing.assert_array_equal(b, v)
    b += 0.5  # through the other mapping: the same memory
    np.testing.assert_array_equal(v, VIEWS[view](np.arange(a.size).reshape(a.shape)) + 0.5)
    del a, v, b


@settings(max_examples=40, deadline=None)
@given(
    st.tuples(*[st.integers(-4, 4).filter(bool)] * 3),
    st.tuples(*[st.integers(0, 5)] * 3),
    st.sampled_from(["f8", "i2", "c16", "u1", [("x", "f4"), ("n", "i8")]]),
    st.sampled_from(["C", "F"]),
)
def test_any_view_round_trips(steps, starts, dtype, order):
    s = Segment("hypothesis")
    try:
        with s.allocator:
            a = np.zeros((7, 6, 5), dtype=dtype, order=order)
        pattern = (np.arange(a.nbytes) % 251).astype(np.uint8).tobytes()
        a[...] = np.frombuffer(pattern, dtype=a.dtype).reshape(a.shape)
        v = a[tuple(slice(b, None, k) for b, k in zip(starts, steps))]
        b = mnp.attach(pickle.loads(pickle.dumps(mnp.share(v))))
        assert b.dtype == v.dtype and b.shape == v.shape
        assert b.tobytes() == v.tobytes()
        del a, v, b
    finally:
        gc.collect()
        s.close()
    assert not s.file.exists()


def test_an_attachment_lives_as_long_as_its_arrays(segment):
    s = segment()
    a = s.array(100_000)
    before = mappings_of(s.file)
    b = mnp.attach(mnp.share(a))
    assert mappings_of(s.file) == before + 1, "attaching maps the segment"
    tail = b[-10:]
    del b
    gc.collect()
    assert mappings_of(s.file) == before + 1, "a view keeps the attachment"
    tail[:] = 7
    assert (a[-10:] == 7).all()
    del tail
    gc.collect()
    assert mappings_of(s.file) == before, "the last array gone, the mapping goes"
    attachment = mnp.attach(mnp.share(a)).base.base
    assert "memplug attachment" in repr(attachment)
    with pytest.raises(TypeError, match="send the handle"):
        pickle.dumps(attachment)
    del attachment


def test_read_only_arrays_attach_read_only(segment):
    a = segment().array(100)
    a.flags.writeable = False
    b = mnp.attach(mnp.share(a))
    assert not b.flags.writeable


def test_segments_are_made_0600_whatever_the_umask(segment):
    old = os.umask(0)
    try:
        s = segment()
        a = s.array(10)
    finally:
        os.umask(old)
    mode = s.file.stat().st_mode
    assert stat.S_IMODE(mode) == 0o600, oct(mode)
    assert s.file.stat().st_uid == os.getuid()
    del a


# Errors


def test_arrays_no_shareable_handler_made_are_refused(segment):
    cases = {"NumPy's default handler": (np.ones(10), "not-shareable", "default_allocator")}
    made_before = np.ones(10)
    with segment().allocator:
        cases["made before the block"] = (made_before, "not-shareable", "default_allocator")
    with mnp.allocator("system"):
        cases["a memplug handler that cannot share"] = (np.ones(10), "not-shareable", "locate")
    cases["np.frombuffer"] = (np.frombuffer(b"12345678", dtype=np.uint8), "foreign-memory", "bytes")
    cases["a view of NumPy's default"] = (np.ones((4, 4))[1:, ::2], "not-shareable", "default_allocator")
    with segment().allocator:
        objects = np.array([object(), None])
    cases["objects"] = (objects, "object-dtype", "pointers")
    for what, (arr, code, hint) in cases.items():
        with pytest.raises(memplug.ShareError) as info:
            mnp.share(arr)
        assert info.value.code == code, what
        assert hint in str(info.value), what
    with pytest.raises(TypeError):
        mnp.share([1.0, 2.0])
    del cases, objects


def test_attaching_a_segment_that_is_gone(segment):
    s = segment()
    a = s.array(1000)
    h = mnp.share(a)
    del a
    gc.collect()
    assert s.close() is True
    assert not s.file.exists()
    with SPAWN.Pool(1) as pool:
        outcome = pool.apply(share_workers.try_attach, (h,))
    assert outcome[:2] == ("error", "attach-failed"), outcome
    assert f"there is no segment /memplug-{s.name}" in outcome[2]
    with pytest.raises(memplug.ShareError) as info:
        mnp.attach(h)
    assert info.value.code == "attach-failed"


def test_a_handle_from_another_segment(segment):
    one, other = segment(), segment()
    a, b = one.array(100), other.array(100)
    h, g = mnp.share(a), mnp.share(b)
    # Attaching through the other segment's instance: not its segment.
    crossed = mnp.SharedArray({**h.block(), "attach": g.attach}, h.dtype, h.shape, h.strides, 0)
    with pytest.raises(memplug.ShareError) as info:
        mnp.attach(crossed)
    assert info.value.code == "other-segment"
    # The other segment's name with this one's generation: not that incarnation.
    forged = mnp.SharedArray({**h.block(), "segment": g.segment, "attach": g.attach}, h.dtype, h.shape, h.strides, 0)
    with pytest.raises(memplug.ShareError) as info:
        mnp.attach(forged)
    assert info.value.code == "stale-handle"
    # A range past the segment's end: a damaged handle.
    damaged = mnp.SharedArray({**h.block(), "offset": h.segment_size}, h.dtype, h.shape, h.strides, 0)
    with pytest.raises(memplug.ShareError) as info:
        mnp.attach(damaged)
    assert info.value.code == "bad-handle"
    del a, b


def test_a_segment_made_again_under_the_same_name(segment):
    first = segment(size="16m")
    a = first.array(100)
    h = mnp.share(a)
    del a
    gc.collect()
    first.close()
    again = Segment("again", size="32m")
    again.name, again.key, again.file = first.name, first.key.replace("16m", "32m"), first.file
    b = again.array(100)
    try:
        with pytest.raises(memplug.ShareError) as info:
            mnp.attach(h)
        assert info.value.code == "segment-size-mismatch"
        assert "another segment of the same name" in str(info.value)
    finally:
        del b
        gc.collect()
        again.close()
    assert not first.file.exists()


def test_close_applies_to_instances_only(segment):
    for alloc in (mnp.allocator("shm"), mnp.allocator(None), mnp.hooked("shm", lambda *e: None)):
        with pytest.raises(memplug.NumpyError) as info:
            alloc.close()
        assert info.value.code == "not-an-instance", alloc
    s = segment()
    alloc = s.allocator
    assert alloc.close() is True and alloc.close() is False
    with pytest.raises(memplug.NumpyError) as info:
        alloc.set_cache(False)
    assert info.value.code == "allocator-closed"
    assert mnp.allocator(s.key) is not alloc, "a new instance after close"
    assert mnp.allocator(s.key).close() is True
