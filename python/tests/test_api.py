"""The public vocabulary of `memplug.numpy`: one name per operation, every
name in the guide."""

from __future__ import annotations

import inspect
import re

import memplug
import memplug.numpy as mnp

#: `memplug.numpy.__all__`: the allocator objects and what is made with them.
NUMPY_API = {
    "Allocator",
    "allocator",
    "create_allocator",
    "get_allocator",
    "set_allocator",
    "hooked",
    "owner_of",
    "from_pointer",
    "ForeignMemory",
    "share",
    "attach",
    "SharedArray",
}
#: The public attributes of an Allocator.
ALLOCATOR_API = {"name", "handler", "capsule", "handles", "close", "set_cache"}
#: What the capsule vocabulary called these; none is public any more.
GONE = {"use", "install", "current", "handler", "close", "set_cache", "get_handler_name", "memplug_name",
        "capsule"}


def guide(repo) -> str:
    return "\n".join(p.read_text() for p in sorted((repo / "docs" / "src").glob("*.md")))


def test_memplug_numpy_all_is_the_allocator_api():
    assert len(mnp.__all__) == len(set(mnp.__all__))
    assert set(mnp.__all__) == NUMPY_API
    assert all(hasattr(mnp, name) for name in mnp.__all__)


def test_no_other_public_name_and_no_capsule_vocabulary():
    public = {n for n, v in vars(mnp).items() if not n.startswith("_") and not inspect.ismodule(v)}
    assert public - NUMPY_API <= {"annotations"}, public - NUMPY_API
    assert not any(hasattr(mnp, name) for name in GONE)


def test_the_allocator_class_has_one_name_per_operation():
    members = {n for n in dir(mnp.Allocator) if not n.startswith("_")}
    assert members == ALLOCATOR_API


def test_no_name_means_two_things_across_memplug_and_memplug_numpy():
    # `handler` is memplug.handler(name) -> Handler, and Allocator.handler a Handler too.
    assert not set(mnp.__all__) & set(memplug.__all__)
    assert mnp.allocator("tracking").handler == memplug.handler("tracking")


def test_every_public_name_is_in_the_guide(repo):
    text = guide(repo)
    missing = [n for n in sorted(NUMPY_API) if f"memplug.numpy.{n}" not in text]
    assert not missing, f"not in docs/src as memplug.numpy.NAME: {missing}"
    missing = [m for m in sorted(ALLOCATOR_API) if not re.search(rf"`alloc\.{m}\b", text)]
    assert not missing, f"Allocator members not in docs/src as `alloc.NAME`: {missing}"


def test_the_guide_uses_no_name_that_went(repo):
    text = guide(repo)
    gone = sorted(n for n in GONE - {"handler", "close", "set_cache", "capsule"}
                  if re.search(rf"(mnp|memplug\.numpy)\.{n}\b", text))
    gone += sorted(n for n in ("handler", "close", "set_cache", "capsule")
                   if re.search(rf"(mnp|memplug\.numpy)\.{n}\(", text))
    assert not gone, gone
