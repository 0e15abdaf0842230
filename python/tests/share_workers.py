"""What the worker processes of test_share.py run. A module of its own, so
that a spawned child imports only this (and NumPy and memplug), not the
tests."""

from __future__ import annotations

import os
from typing import Any

import numpy as np

import memplug
import memplug.numpy as mnp


def modify(conn: Any) -> None:
    """Receive a handle, check the pattern the parent wrote, add 1000 to
    every element, say so."""
    handle = conn.recv()
    a = mnp.attach(handle)
    ok = bool(np.array_equal(a, np.arange(a.size, dtype=a.dtype).reshape(a.shape)))
    a += 1000
    conn.send(("modified", ok, os.getpid()))
    conn.close()


def relay(inbox: Any, outbox: Any) -> None:
    """Receive a handle, write -1 into the first half of the array, and hand
    the second half on (a handle to a view of the attached array)."""
    handle = inbox.get()
    a = mnp.attach(handle)
    half = a.size // 2
    a[:half] = -1
    outbox.put(mnp.share(a[half:]))


def finish(inbox: Any, results: Any) -> None:
    """Receive a handle and write -2 into all of it."""
    handle = inbox.get()
    a = mnp.attach(handle)
    a[...] = -2
    results.put(("finished", os.getpid(), a.size))


def scale(handle: mnp.SharedArray, factor: float) -> float:
    """Pool task: scale an attached slice in place; its sum after."""
    part = mnp.attach(handle)
    part *= factor
    return float(part.sum())


def try_attach(handle: mnp.SharedArray) -> Any:
    """Attach and report the outcome: ("ok", sum) or ("error", code, message)."""
    try:
        a = mnp.attach(handle)
    except memplug.ShareError as e:
        return ("error", e.code, str(e))
    return ("ok", float(a.sum()))
