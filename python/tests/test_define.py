"""Allocators defined from Python at run time: memplug.from_library,
memplug.from_functions (ctypes functions, addresses, CFUNCTYPE instances,
Python callables) and memplug.Handler. Each serves NumPy arrays that name
it and gives back every byte; refusals carry the codes `memplug check`
gives."""

from __future__ import annotations

import ctypes
import gc
import json
import subprocess
import sys
import threading

import numpy as np
import pytest

import memplug
import memplug.numpy as mnp

from conftest import REPO

CLI = REPO / "target" / "debug" / "memplug"


def libc_functions():
    """Fresh ctypes function objects of libc's allocator, typed."""
    lib = ctypes.CDLL("libc.so.6")
    malloc, calloc, realloc, free = lib.malloc, lib.calloc, lib.realloc, lib.free
    malloc.restype = calloc.restype = realloc.restype = ctypes.c_void_p
    malloc.argtypes = [ctypes.c_size_t]
    calloc.argtypes = [ctypes.c_size_t, ctypes.c_size_t]
    realloc.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    free.argtypes = [ctypes.c_void_p]
    free.restype = None
    return lib, malloc, calloc, realloc, free


class Counting:
    """Python callables over libc's allocator, counting the bytes live."""

    def __init__(self):
        _, self._malloc, self._calloc, self._realloc, self._free = libc_functions()
        self.lock = threading.Lock()
        self.live = 0
        self.calls = 0

    def _count(self, delta):
        with self.lock:
            self.live += delta
            self.calls += 1

    def malloc(self, size):
        self._count(size)
        return self._malloc(max(size, 1))

    def calloc(self, nelem, size):
        self._count(nelem * size)
        return self._calloc(max(nelem, 1), max(size, 1))

    def realloc(self, ptr, old, new):
        q = self._realloc(ptr, max(new, 1))
        if q:
            self._count(new - old)
        return q

    def free(self, ptr, size):
        self._count(-size)
        self._free(ptr)


def serves_numpy(h: memplug.Handler) -> None:
    """Arrays made under `h` name it, and every byte comes back."""
    with mnp.allocator(h.name):
        a = np.arange(10**6, dtype=np.float64)
        b = np.zeros((300, 300))
        c = np.concatenate([a, a])
        small = [np.ones(i) for i in range(1, 40)]
    for arr in (a, b, c, small[0]):
        assert mnp.get_allocator(arr).name == "memplug:" + h.name
    assert c[10**6 + 5] == 5.0 and b.sum() == 0.0
    del a, b, c, small, arr
    gc.collect()
    bridge = memplug.stats(h.name)["bridge"]
    assert bridge["live_bytes"] == 0 and bridge["live_blocks"] == 0, bridge


def cli_code(tmp_path, manifest: str) -> str:
    """The reason `memplug check --json` gives for a manifest."""
    if not CLI.exists():
        pytest.fail(f"{CLI} is missing: build the command first (cargo build)")
    path = tmp_path / "it.memplug.toml"
    path.write_text(manifest)
    out = subprocess.run([str(CLI), "check", "--json", str(path)], capture_output=True, text=True)
    rows = json.loads(out.stdout)
    rows = rows if isinstance(rows, list) else rows.get("reports", rows.get("candidates", [rows]))
    return rows[0]["reason"]


# --- from_library ---------------------------------------------------------


def test_from_library_libc_serves_numpy_and_is_idempotent():
    h = memplug.from_library("libc.so.6", name="libc-lib", calloc="calloc", realloc="realloc")
    assert isinstance(h, memplug.Handler) and h.name == "libc-lib"
    assert h.info["source"] == "libc.so.6 (malloc / free)"
    assert h.info["thread_safe"] is True
    serves_numpy(h)
    again = memplug.from_library("libc.so.6", name="libc-lib", calloc="calloc", realloc="realloc")
    assert again == h
    with pytest.raises(memplug.LoadError) as e:
        memplug.from_library("libc.so.6", name="libc-lib")  # another spec under the same name
    assert e.value.code == "duplicate-name"


def test_from_library_mimalloc_by_symbol_names():
    # Named: the bridge tests may have registered examples/manifests' `mimalloc`.
    h = memplug.from_library(
        "libmimalloc.so.2",
        name="mimalloc-by-call",
        malloc="mi_malloc",
        free="mi_free",
        calloc="mi_calloc",
        realloc="mi_realloc",
        sized_free="mi_free_size",
    )
    assert h.name == "mimalloc-by-call"
    serves_numpy(h)


@pytest.mark.parametrize(
    "library, want",
    [
        ("libmimalloc.so.2", "mimalloc"),
        ("/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4", "tcmalloc_minimal"),
        ("libc.so.6", "c"),
        ("/opt/my alloc/libfancy+heap.so", "fancy_heap"),
        ("allocator.dylib", "allocator.dylib"),
        ("lib.so", "symbols"),
        ("lib" + "x" * 200 + ".so", "x" * 127),
    ],
)
def test_library_names_are_derived_from_the_file_name(library, want):
    assert memplug.library_name(library) == want


def test_a_missing_symbol_is_refused_as_the_manifest_is(tmp_path):
    with pytest.raises(memplug.LoadError) as e:
        memplug.from_library("libc.so.6", name="no-such", malloc="no_such_malloc")
    assert e.value.code == "missing-symbol"
    assert "no_such_malloc" in str(e.value)
    manifest = 'name = "no-such"\nlibrary = "libc.so.6"\n[symbols]\nmalloc = "no_such_malloc"\nfree = "free"\n'
    assert cli_code(tmp_path, manifest) == e.value.code
    assert "no-such" not in memplug.names()


def test_jemalloc_is_refused_as_the_manifest_is(repo, tmp_path):
    with pytest.raises(memplug.LoadError) as e:
        memplug.from_library("libjemalloc.so.2", calloc="calloc", realloc="realloc")
    assert e.value.code == "not-a-library"
    assert "static TLS" in str(e.value)
    manifest = (repo / "examples/manifests/jemalloc.memplug.toml").read_text()
    assert cli_code(tmp_path, manifest) == e.value.code


# --- from_functions: C functions -----------------------------------------


def test_ctypes_functions_work_after_the_user_drops_them():
    lib, malloc, calloc, realloc, free = libc_functions()
    h = memplug.from_functions("libc-ctypes", malloc=malloc, free=free, calloc=calloc, realloc=realloc)
    del lib, malloc, calloc, realloc, free
    gc.collect()
    assert h.info["source"] == "<C functions>"
    serves_numpy(h)


def test_integer_addresses():
    _, malloc, _, _, free = libc_functions()
    addr = lambda f: ctypes.cast(f, ctypes.c_void_p).value  # noqa: E731
    h = memplug.from_functions("libc-addresses", malloc=addr(malloc), free=addr(free))
    assert h.info["alignment"] == 16
    serves_numpy(h)


def test_cfunctype_instances_and_a_sized_free():
    counts = {"live": 0}
    lock = threading.Lock()  # the conformance pass calls from threads at once (truly, without a GIL)
    _, c_malloc, _, _, c_free = libc_functions()

    @ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_size_t)
    def malloc(size):
        with lock:
            counts["live"] += size
        return c_malloc(size)

    @ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_size_t)
    def free(ptr, size):  # two argtypes: a sized free
        with lock:
            counts["live"] -= size
        c_free(ptr)

    h = memplug.from_functions("cfunctype", malloc=malloc, free=free)
    del malloc, free
    gc.collect()
    assert counts["live"] == 0
    mnp.allocator(h.name).set_cache(False)
    serves_numpy(h)
    assert counts["live"] == 0


# --- from_functions: Python callables -------------------------------------


def test_python_callables_over_libc():
    c = Counting()
    h = memplug.from_functions("py-counting", malloc=c.malloc, free=c.free, calloc=c.calloc, realloc=c.realloc)
    assert c.calls > 0, "the conformance pass ran on the callables"
    assert c.live == 0
    assert h.info["source"] == "<Python callables>"
    mnp.allocator(h.name).set_cache(False)
    serves_numpy(h)
    assert c.live == 0


@pytest.mark.parametrize("failure", ["raises", "returns-none"])
def test_a_failing_callable_gives_memory_error_and_leaks_nothing(monkeypatch, failure):
    c = Counting()
    state = {"fail": False}

    def malloc(size):
        if state["fail"] and size >= 10**6:
            if failure == "raises":
                raise RuntimeError("no memory for you")
            return None
        return c.malloc(size)

    h = memplug.from_functions(f"py-{failure}", malloc=malloc, free=c.free)
    mnp.allocator(h.name).set_cache(False)
    seen = []
    monkeypatch.setattr(sys, "unraisablehook", seen.append)
    state["fail"] = True
    with mnp.allocator(h.name):
        ok = np.ones(100)
        with pytest.raises(MemoryError):
            np.empty(10**6)
    del ok
    gc.collect()
    if failure == "raises":
        assert len(seen) == 1 and isinstance(seen[0].exc_value, RuntimeError)
        assert seen[0].object is malloc
    else:
        assert seen == []
    assert c.live == 0
    assert memplug.stats(h.name)["bridge"]["live_bytes"] == 0


@pytest.mark.parametrize("thread_safe", [True, False])
def test_callables_on_threads_while_numpy_releases_the_gil(thread_safe):
    c = Counting()
    inside = {"now": 0, "most": 0}

    def one_at_a_time(f):
        def call(*args):
            with c.lock:
                inside["now"] += 1
                inside["most"] = max(inside["most"], inside["now"])
            try:
                return f(*args)  # ctypes drops the GIL here: another thread may come in
            finally:
                with c.lock:
                    inside["now"] -= 1

        return call

    h = memplug.from_functions(
        f"py-threads-{thread_safe}",
        malloc=one_at_a_time(c.malloc),
        free=one_at_a_time(c.free),
        calloc=one_at_a_time(c.calloc),
        realloc=one_at_a_time(c.realloc),
        thread_safe=thread_safe,
    )
    mnp.allocator(h.name).set_cache(False)
    errors = []

    def work(seed):
        try:
            rng = np.random.default_rng(seed)  # keeps a block of its own for good
            with mnp.allocator(h.name):
                for _ in range(20):
                    a = rng.random(200_000)
                    b = np.empty_like(a)
                    np.add(a, a, out=b)  # no GIL for the loop
                    s = np.sort(b)  # allocates, without the GIL in places
                    parts = np.concatenate([s[:1000], a[:5000], b])
                    assert parts.shape == (206_000,)
                    del a, b, s, parts
        except BaseException as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    gc.collect()
    assert c.live == 0
    assert memplug.stats(h.name)["bridge"]["live_bytes"] == 0
    if not thread_safe:
        assert inside["most"] == 1, "callables not declared thread-safe are called one at a time"


# --- refusals --------------------------------------------------------------


def test_a_misaligned_malloc_fails_conformance_and_is_not_registered():
    _, malloc, _, _, free = libc_functions()
    h = memplug.from_functions("libc-ok-for-misaligned", malloc=malloc, free=free)
    with pytest.raises(memplug.LoadError) as e:
        memplug.from_functions(
            "misaligned",
            malloc=lambda size: malloc(size + 8) + 1,
            free=lambda ptr, size: free(ptr - 1),
        )
    assert e.value.code == "conformance-failed"
    assert "alignment" in str(e.value)
    assert "misaligned" not in memplug.names()
    with pytest.raises(memplug.UnknownHandlerError):
        memplug.handler("misaligned")
    assert h.name in memplug.names()


def test_mixed_kinds_bad_names_and_bad_types_are_refused():
    _, malloc, _, _, free = libc_functions()
    with pytest.raises(memplug.LoadError) as e:
        memplug.from_functions("mixed", malloc=malloc, free=lambda p, n: free(p))
    assert e.value.code == "mixed-function-kinds"
    with pytest.raises(memplug.LoadError) as e:
        memplug.from_functions("bad name", malloc=malloc, free=free)
    assert e.value.code == "bad-name"
    with pytest.raises(memplug.LoadError) as e:
        memplug.from_functions("odd-alignment", malloc=malloc, free=free, alignment=24)
    assert e.value.code == "bad-alignment"
    with pytest.raises(memplug.LoadError) as e:
        memplug.from_functions("null", malloc=0, free=free)
    assert e.value.code == "null-function"
    with pytest.raises(TypeError):
        memplug.from_functions("not-a-function", malloc="malloc", free=free)


# --- Handler -----------------------------------------------------------------


def test_handler_objects():
    h = memplug.handler("tracking")
    assert h == memplug.Handler("tracking") and hash(h) == hash(memplug.Handler("tracking"))
    assert h != memplug.handler("system")
    assert repr(h) == "memplug.Handler('tracking')"
    assert h.info == next(i for i in memplug.handlers() if i["name"] == "tracking")
    assert h.stats()["name"] == "tracking"
    inst = h.instantiate("") if h.info["takes_options"] else memplug.handler("arena").instantiate("region_size=1m")
    assert ":" in inst.name and inst.info["options"] is not None
    with pytest.raises(memplug.UnknownHandlerError):
        memplug.handler("no-such-handler")


def test_a_callable_not_thread_safe_may_free_a_block_of_its_own_handler_inside_its_call():
    """A callable's own code can free an array of the handler it serves (a
    collection running inside it, a cache it empties): the turn that makes
    calls one at a time is taken again by the thread holding it, instead of
    waiting for itself forever."""
    c = Counting()
    kept = []

    def malloc(size):
        if kept:
            kept.pop()  # the last reference: freed now, through this handler, inside this call
        return c.malloc(size)

    alloc = mnp.create_allocator(malloc=malloc, free=c.free, thread_safe=False)
    alloc.set_cache(False)  # every allocation reaches the callable
    with alloc:
        for n in range(1, 30):
            kept.append(np.ones(100 + n))
            assert np.ones(50 + n).sum() == 50 + n
    kept.clear()
    gc.collect()
    assert c.live == 0
    assert memplug.stats(alloc.handler.name)["bridge"]["live_blocks"] == 0


def test_a_cfunctype_of_a_python_function_is_refused_under_the_hosts_lock():
    """thread_safe=False puts C functions under the host's lock, where no
    Python code may run: a CFUNCTYPE made from a Python function is
    refused there (and taken as it is with thread_safe=True)."""
    _, c_malloc, _, _, c_free = libc_functions()
    py_malloc = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_size_t)(lambda size: c_malloc(size))
    with pytest.raises(memplug.LoadError) as refused:
        memplug.from_functions("thunk-locked", malloc=py_malloc, free=c_free, thread_safe=False)
    assert refused.value.code == "python-under-lock" and "malloc" in str(refused.value)
    assert "thunk-locked" not in memplug.names()
    plain = memplug.from_functions("libc-locked", malloc=c_malloc, free=c_free, thread_safe=False)
    assert not plain.info["thread_safe"]
    assert memplug.from_functions("thunk-free", malloc=py_malloc, free=c_free).info["thread_safe"]
