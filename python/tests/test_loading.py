"""Loading plugins, describing handlers, and errors with reason codes."""

from __future__ import annotations

import pickle
import shutil

import pytest

import memplug
import memplug.numpy as mnp

BUNDLED = {"system", "aligned", "tracking", "arena"}


def test_bundled_handlers_are_listed_with_their_information():
    by_name = {h["name"]: h for h in memplug.handlers()}
    assert BUNDLED <= set(by_name), by_name.keys()
    assert "default_allocator" in by_name
    for name in BUNDLED:
        h = by_name[name]
        assert set(h) >= {"name", "version", "abi", "alignment", "thread_safe", "memory_kind", "source"}
        assert h["memory_kind"] == "kDLCPU"
        assert h["source"].startswith(str(memplug.PLUGIN_DIR)), h["source"]
    assert by_name["aligned"]["alignment"] == 64
    # Every bundled plugin speaks the current ABI (1.0 plugins are proven
    # to load by the host's own tests, with fixtures).
    assert by_name["system"]["abi"] == by_name["tracking"]["abi"] == by_name["aligned"]["abi"] == "1.3"
    assert by_name["tracking"]["thread_safe"] is True
    assert by_name["arena"]["thread_safe"] is False
    assert by_name["arena"]["takes_options"] is True


def test_every_bundled_plugin_loads():
    shipped = sorted(p.name for p in memplug.PLUGIN_DIR.glob("libmemplug_*.so"))
    assert len(shipped) >= len(BUNDLED), shipped
    outcomes = memplug.load(memplug.PLUGIN_DIR)
    assert sorted(o["path"].rsplit("/", 1)[1] for o in outcomes) == shipped
    assert all(o["status"] == "ok" for o in outcomes), outcomes


def test_search_path_outcomes_are_reported_like_memplug_check():
    outcomes = memplug.load_search_path()
    ok = {o["name"] for o in outcomes if o["status"] == "ok"}
    assert BUNDLED <= ok
    row = next(o for o in outcomes if o["name"] == "tracking")
    assert row["reason"] is None and row["message"] is None
    assert row["symbol"] == "memplug_handler"
    assert row["path"].endswith("libmemplug_tracking.so")
    # Loading the same candidates again reports the same, not duplicate-name.
    again = memplug.load(row["path"])
    assert again[0]["status"] == "ok" and again[0]["name"] == "tracking"


def test_a_directorys_copy_is_shadowed_and_a_named_copy_is_a_duplicate(tmp_path):
    memplug.load(memplug.PLUGIN_DIR)
    copy = tmp_path / "libmemplug_tracking.so"
    shutil.copy(memplug.PLUGIN_DIR / "libmemplug_tracking.so", copy)
    # A directory is scanned: the earlier directory's `tracking` takes
    # precedence, which is not a failure.
    [row] = memplug.load(tmp_path)
    assert (row["status"], row["reason"], row["name"]) == ("shadowed", "shadowed", "tracking"), row
    # A file named explicitly whose handler name is taken is a conflict.
    with pytest.raises(memplug.LoadError) as info:
        memplug.load(copy)
    assert info.value.code == "duplicate-name"
    assert info.value.outcomes[0]["status"] == "rejected"


def test_a_bad_plugin_raises_with_its_code(bad_magic_plugin):
    with pytest.raises(memplug.LoadError) as info:
        memplug.load(bad_magic_plugin)
    assert info.value.code == "bad-magic"
    assert str(bad_magic_plugin) in str(info.value)
    assert info.value.outcomes[0]["status"] == "rejected"
    # Without strict, the outcome comes back instead.
    [row] = memplug.load(bad_magic_plugin, strict=False)
    assert (row["status"], row["reason"]) == ("rejected", "bad-magic")
    assert "MEMPLUG_MAGIC" in row["message"]


def test_a_file_that_is_not_a_library_is_refused(tmp_path):
    junk = tmp_path / "libjunk.so"
    junk.write_text("not an ELF file\n")
    with pytest.raises(memplug.LoadError) as info:
        memplug.load(junk)
    assert info.value.code == "not-elf"  # refused by memplug's file checks, before dlopen
    assert isinstance(info.value, memplug.Error)


def test_a_directory_loads_every_candidate_and_reports_each(tmp_path, bad_magic_plugin):
    shutil.copy(bad_magic_plugin, tmp_path / "libbad_magic.so")
    (tmp_path / "readme.txt").write_text("ignored: neither .so nor .memplug.toml")
    outcomes = memplug.load(tmp_path, strict=False)
    assert [o["reason"] for o in outcomes] == ["bad-magic"]


def test_an_unknown_handler_names_the_loaded_ones():
    with pytest.raises(memplug.UnknownHandlerError) as info:
        mnp.allocator("no-such-handler")
    assert info.value.code == "unknown-handler"
    assert isinstance(info.value, LookupError)
    for name in BUNDLED:
        assert name in str(info.value)
    with pytest.raises(memplug.UnknownHandlerError):
        memplug.stats("no-such-handler")


def test_options_are_checked_by_the_plugin():
    with pytest.raises(memplug.LoadError) as info:
        mnp.allocator("arena:region_size=7")
    assert info.value.code == "bad-options"
    assert "region_size" in str(info.value)
    with pytest.raises(memplug.LoadError) as info:
        mnp.allocator("system:anything=1")
    assert info.value.code == "no-options"


def test_errors_pickle_with_their_code():
    e = memplug.LoadError("msg", "bad-magic", "x.so", [{"status": "rejected"}])
    back = pickle.loads(pickle.dumps(e))
    assert (type(back), str(back), back.code, back.source, back.outcomes) == (
        memplug.LoadError, "msg", "bad-magic", "x.so", [{"status": "rejected"}],
    )


def test_stats_of_a_handler_numpy_never_used():
    s = memplug.stats("system")
    assert s["name"] == "system"
    assert s["handler"]["name"] == "system"
    assert s["plugin"] is None  # the system plugin reports no statistics


def test_search_path_is_memplugs_with_the_package_after_the_user_directory(monkeypatch, tmp_path):
    monkeypatch.setenv(memplug.PATH_ENV, f"{tmp_path}::{tmp_path}")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("MEMPLUG_SYSTEM_PLUGIN_PATH", str(tmp_path / "sys"))
    assert memplug.search_path() == [
        tmp_path, tmp_path / "data" / "memplug" / "plugins", memplug.PLUGIN_DIR, tmp_path / "sys",
    ]
    origins = [d["origin"] for d in memplug.search_path_origins()]
    assert origins == ["MEMPLUG_PLUGIN_PATH", "user", "package", "MEMPLUG_SYSTEM_PLUGIN_PATH"]
