"""NumPy's handler is a context variable (NEP 49): per thread and per
asyncio task."""

from __future__ import annotations

import asyncio
import threading

import numpy as np

import memplug.numpy as mnp


def test_a_new_thread_starts_from_numpys_default():
    seen = {}

    def child():
        seen["name"] = mnp.get_allocator().name
        seen["array"] = mnp.get_allocator(np.ones(10)).name

    with mnp.allocator("tracking"):
        t = threading.Thread(target=child)
        t.start()
        t.join()
        assert mnp.get_allocator().name == "memplug:tracking"
    assert seen == {"name": "default_allocator", "array": "default_allocator"}


def test_setting_it_in_a_thread_leaves_the_others_alone():
    ready, done = threading.Event(), threading.Event()

    def child():
        mnp.set_allocator("arena")
        ready.set()
        done.wait(10)

    t = threading.Thread(target=child)
    t.start()
    ready.wait(10)
    assert mnp.get_allocator().name == "default_allocator"
    done.set()
    t.join()


def test_asyncio_tasks_inherit_at_creation_and_keep_their_own():
    async def report():
        return mnp.get_allocator().name, mnp.get_allocator(np.ones(4)).name

    async def installs():
        mnp.set_allocator("system")
        await asyncio.sleep(0)
        return mnp.get_allocator().name

    async def main():
        with mnp.allocator("tracking"):
            inherited = asyncio.create_task(report())
        outside = asyncio.create_task(report())
        own = await installs_task_and_check(installs)
        return await inherited, await outside, own, mnp.get_allocator().name

    async def installs_task_and_check(fn):
        return await asyncio.create_task(fn())

    inherited, outside, own, after = asyncio.run(main())
    assert inherited == ("memplug:tracking", "memplug:tracking")
    assert outside == ("default_allocator", "default_allocator")
    assert own == "memplug:system"
    assert after == "default_allocator"  # the task's install stayed in the task


def test_use_restores_on_exception_and_nests():
    try:
        with mnp.allocator("tracking"):
            with mnp.allocator("system"):
                assert mnp.get_allocator().name == "memplug:system"
            assert mnp.get_allocator().name == "memplug:tracking"
            raise KeyError("boom")
    except KeyError:
        pass
    assert mnp.get_allocator().name == "default_allocator"
